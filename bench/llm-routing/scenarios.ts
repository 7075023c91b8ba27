// Fleet and workloads of the LLM routing benchmark (seeded; every policy runs the same sample path).
import { mulberry32 } from '../../sim/inference/prng';
import { merge, mixedLengths, multiTurnChats, sharedSystemPrompts, type WorkloadRequest } from '../../sim/inference/llm/workloads';
import { type Criticality, type InstanceSpec, type BenchRequest, prepare } from './fleet';

export const LLAMA = 'llama-3-8b';
export const MISTRAL = 'mistral-7b';
export const ADAPTERS = ['sql-lora', 'chat-lora', 'code-lora'];

/**
 * 8 instances: 6 serve llama-3-8b with three LoRA adapters (at most 2 resident, 40 ms to load),
 * two of them an older generation (every cost × 1.6); 2 serve mistral-7b. KV cache 2048 blocks
 * of 16 tokens (32 768 tokens) per instance, so the prefix working set of the prefix-heavy
 * workload does not fit in one instance.
 */
export function fleet(numBlocks = 2048): InstanceSpec[] {
  const out: InstanceSpec[] = [];
  const adapters = Object.fromEntries(ADAPTERS.map((a) => [a, LLAMA]));
  for (let i = 0; i < 6; i++) {
    const slow = i >= 4 ? 1.6 : 1;
    out.push({ name: `llama-${i}${slow > 1 ? '-old' : ''}`, cfg: { models: [LLAMA], adapters, maxLoras: 2, loraLoadMs: 40, numBlocks, stepBaseMs: 6 * slow, prefillMsPerToken: 0.08 * slow, decodeMsPerSeq: 0.25 * slow } });
  }
  for (let i = 0; i < 2; i++) out.push({ name: `mistral-${i}`, cfg: { models: [MISTRAL], numBlocks } });
  return out;
}

/** `model` values drawn uniformly: 3/8 llama base, 3/8 its adapters, 2/8 mistral — about equal
 *  load per instance (6 llama instances, 2 mistral). */
export const MODEL_MIX = [LLAMA, LLAMA, LLAMA, ...ADAPTERS, MISTRAL, MISTRAL];

export interface Scenario {
  name: string;
  requests: BenchRequest[];
  measureFromMs: number;
  measureToMs: number;
  ratePerS: number;
}

export interface ScenarioOpts {
  seed: number;
  durationMs: number;
  warmupMs: number;
  /** total request rate (req/s) */
  ratePerS: number;
  /** criticality shares [critical, standard] (the rest sheddable); default all standard */
  mix?: [number, number];
}

function critOf(seed: number, mix?: [number, number]): (i: number) => Criticality {
  if (!mix) return () => 'standard';
  const rng = mulberry32(seed ^ 0xc417);
  const draws: Criticality[] = [];
  return (i) => {
    while (draws.length <= i) {
      const u = rng();
      draws.push(u < mix[0] ? 'critical' : u < mix[0] + mix[1] ? 'standard' : 'sheddable');
    }
    return draws[i];
  };
}

/**
 * Prefix-heavy: 70 % of the requests share one of 48 system prompts of 1024-2048 tokens
 * (48 × 1536 ≈ 74 k tokens of prefixes, > 2× one instance's KV cache) with a unique question;
 * 30 % are turns of multi-turn chats (6 turns, 8 s apart, each prompt extends the previous one).
 */
export function prefixHeavy(o: ScenarioOpts): Scenario {
  const n = Math.round((o.ratePerS * o.durationMs) / 1000);
  const sysRate = o.ratePerS * 0.7;
  const groups: WorkloadRequest[][] = [];
  // four families of system prompts with different lengths (1024..2048 tokens)
  for (let k = 0; k < 4; k++) {
    groups.push(sharedSystemPrompts({ seed: o.seed * 31 + k, n: Math.round((n * 0.7) / 4), ratePerS: sysRate / 4, models: MODEL_MIX, maxTokens: [32, 160], prefixes: 12, prefixTokens: 1024 + 341 * k, suffixTokens: [16, 96] }));
  }
  const turns = 6;
  const chatRate = o.ratePerS * 0.3;
  groups.push(multiTurnChats({ seed: o.seed * 31 + 7, sessions: Math.round((n * 0.3) / turns), ratePerS: chatRate / turns, models: MODEL_MIX, maxTokens: [32, 160], turns, systemTokens: 256, userTokens: [64, 256], thinkMs: 8000 }));
  const ws = merge(...groups).filter((w) => w.atMs < o.durationMs);
  return { name: 'prefix-heavy', requests: prepare(ws, critOf(o.seed, o.mix), o.warmupMs, o.durationMs), measureFromMs: o.warmupMs, measureToMs: o.durationMs, ratePerS: o.ratePerS };
}

/** No shared prefixes: unrelated prompts, 80 % short (32-256 tokens), 20 % long (1024-4096). */
export function noSharedPrefix(o: ScenarioOpts): Scenario {
  const n = Math.round((o.ratePerS * o.durationMs) / 1000);
  const ws = mixedLengths({ seed: o.seed * 17 + 3, n, ratePerS: o.ratePerS, models: MODEL_MIX, maxTokens: [32, 160], shortTokens: [32, 256], longTokens: [1024, 4096], longFraction: 0.2 }).filter((w) => w.atMs < o.durationMs);
  return { name: 'no-shared-prefix', requests: prepare(ws, critOf(o.seed, o.mix), o.warmupMs, o.durationMs), measureFromMs: o.warmupMs, measureToMs: o.durationMs, ratePerS: o.ratePerS };
}
