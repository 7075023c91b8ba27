// Workloads and fleets of the published-workload matrix (issue 20; `matrix.ts`): replicas of
// SGLang v0.4's cache-aware router experiment (LMSYS blog, 2024-12-04: 8 data-parallel workers,
// Llama-3.1-8B on A100-80GB, `generated-shared-prefix`: 64 system prompts × 16 questions, ~2,140 +
// 131 prompt tokens, 256 output tokens) and of llm-d's "KV-cache wins" benchmark (150 tenants ×
// ~6k-token prefixes on 8 pods, the prefixes exceeding the fleet's KV cache). Seeded; every policy
// runs the same sample path.
import { mulberry32, openUniform, type Rng } from '../../sim/inference/prng';
import { randomText, type ChatMessage, type WorkloadRequest } from '../../sim/inference/llm/workloads';
import type { LlmEngineConfig } from '../../sim/inference/llm/engine';
import { type BenchRequest, type InstanceSpec, prepare } from './fleet';

export const MODEL = 'llama-3.1-8b';

/**
 * One worker ~ Llama-3.1-8B (bf16) on one A100-80GB under vLLM V1 defaults, as the engine's step
 * model (`stepBaseMs + prefillMsPerToken · prefill tokens + decodeMsPerSeq · decoding seqs`):
 * - decode is memory-bound: a step reads the weights once whatever the batch, so the step time
 *   is ~11 ms at batch 1 and ~17 ms at batch 32 (10.8 + 0.2·n ms) — the published A100 figures
 *   for an 8B model (the issue's "11 → 17 ms");
 * - prefill ~0.1 ms per uncached token (~10k tokens/s: a cached 2,048-token prefix saves ~205 ms
 *   of compute plus the steps it spans, the issue's ~213 ms);
 * - KV cache: (80 GB × 0.9 − 16 GB weights − activations) / 128 KiB per token (32 layers × 8 KV
 *   heads × 128 × 2 × bf16) ≈ 425k tokens = 26,500 blocks of 16;
 * - `max_num_seqs` 256, `max_num_batched_tokens` 8192 (vLLM V1's online-serving defaults on A100).
 */
export const A100_LLAMA8B: Partial<LlmEngineConfig> = {
  models: [MODEL], stepBaseMs: 10.8, decodeMsPerSeq: 0.2, prefillMsPerToken: 0.1, numBlocks: 26_500, blockSize: 16, maxNumSeqs: 256, maxNumBatchedTokens: 8192,
};

/** 8 identical workers (the SGLang experiment's 8 data-parallel replicas). */
export function publishedFleet(numBlocks = A100_LLAMA8B.numBlocks as number): InstanceSpec[] {
  return Array.from({ length: 8 }, (_, i) => ({ name: `w${i}`, cfg: { ...A100_LLAMA8B, numBlocks } }));
}

/**
 * The eviction-heavy fleet: the same 8 workers with 6,000 KV blocks (96k tokens) each — 768k
 * tokens for the fleet against 150 × 6k = 900k tokens of tenant prefixes (llm-d's benchmark ran a
 * 32B model, whose KV per token is larger; what the workload needs is prefixes that do not fit).
 */
export const EVICTION_BLOCKS = 6_000;

export interface MatrixScenario {
  name: string;
  requests: BenchRequest[];
  /** the fleet's KV blocks per worker */
  numBlocks: number;
}

function prep(name: string, ws: WorkloadRequest[], numBlocks = A100_LLAMA8B.numBlocks as number): MatrixScenario {
  ws.sort((a, b) => a.atMs - b.atMs);
  // every request is measured (a cold start is part of what the matrix measures)
  return { name, requests: prepare(ws, () => 'standard', 0, Infinity), numBlocks };
}

function shuffle<T>(xs: T[], rng: Rng): T[] {
  for (let i = xs.length - 1; i > 0; i--) {
    const j = Math.floor(rng() * (i + 1));
    [xs[i], xs[j]] = [xs[j], xs[i]];
  }
  return xs;
}

export interface GspOpts {
  seed: number;
  /** system prompts (64 in the published run) */
  groups: number;
  /** questions per system prompt (16) */
  perGroup: number;
  systemTokens?: number;
  questionTokens?: number;
  outputTokens?: number;
}

/** SGLang's `generated-shared-prefix` requests (bench_serving.py's gen_prompt: random text of the
 *  given lengths): `groups` system prompts × `perGroup` questions, in group order. */
export function gspRequests(o: GspOpts): Array<{ prompt: string; group: number }> {
  const rng = mulberry32(o.seed * 7919 + 11);
  const out: Array<{ prompt: string; group: number }> = [];
  for (let g = 0; g < o.groups; g++) {
    const sys = randomText(rng, o.systemTokens ?? 2140);
    for (let q = 0; q < o.perGroup; q++) out.push({ prompt: sys + randomText(rng, o.questionTokens ?? 131), group: g });
  }
  return out;
}

/** The whole set sent at once at `atMs` on a cold fleet (bench_serving with request rate inf),
 *  in group order ("grouped") or shuffled. */
export function gspBurst(o: GspOpts & { shuffled: boolean; atMs: number }): MatrixScenario {
  let rs = gspRequests(o);
  if (o.shuffled) rs = shuffle(rs, mulberry32(o.seed * 31 + 5));
  // one arrival instant; a µs apart keeps the order the client sends them in
  const ws = rs.map((r, k): WorkloadRequest => ({ atMs: o.atMs + k * 0.001, model: MODEL, api: 'completions', prompt: r.prompt, maxTokens: o.outputTokens ?? 256, group: `sys${r.group}` }));
  return prep(`gsp burst ${rs.length}, ${o.shuffled ? 'shuffled' : 'grouped'}`, ws);
}

function poissonTimes(rng: Rng, n: number, ratePerS: number, startMs: number): number[] {
  const out: number[] = [];
  let t = startMs;
  for (let i = 0; i < n; i++) {
    t += (-Math.log(openUniform(rng)) / ratePerS) * 1000;
    out.push(t);
  }
  return out;
}

/** The generated-shared-prefix requests, shuffled, arriving as a Poisson process at `ratePerS`. */
export function gspPoisson(o: GspOpts & { ratePerS: number; startMs: number; label: string }): MatrixScenario {
  const rs = shuffle(gspRequests(o), mulberry32(o.seed * 31 + 6));
  const ts = poissonTimes(mulberry32(o.seed * 31 + 7), rs.length, o.ratePerS, o.startMs);
  const ws = rs.map((r, k): WorkloadRequest => ({ atMs: ts[k], model: MODEL, api: 'completions', prompt: r.prompt, maxTokens: o.outputTokens ?? 256, group: `sys${r.group}` }));
  return prep(`gsp Poisson ${o.label}`, ws);
}

/**
 * Multi-turn chats: `sessions` conversations of `turns` turns, each opening with one of 8 shared
 * system prompts (1,024 tokens) and a private 512-token context; every turn adds a 131-token user
 * message to the previous turn's messages and answer (256 tokens). Sessions start as a Poisson
 * process; a turn follows the previous one after `thinkMs`.
 */
export function multiTurn(o: { seed: number; sessions: number; turns: number; sessionRatePerS: number; thinkMs: number; startMs: number }): MatrixScenario {
  const rng = mulberry32(o.seed * 131 + 3);
  const systems = Array.from({ length: 8 }, () => randomText(rng, 1024));
  const starts = poissonTimes(rng, o.sessions, o.sessionRatePerS, o.startMs);
  const ws: WorkloadRequest[] = [];
  for (let s = 0; s < o.sessions; s++) {
    const msgs: ChatMessage[] = [{ role: 'system', content: systems[s % systems.length] + randomText(rng, 512) }];
    for (let t = 0; t < o.turns; t++) {
      if (t > 0) msgs.push({ role: 'assistant', content: randomText(rng, 256) });
      msgs.push({ role: 'user', content: randomText(rng, 131) });
      ws.push({ atMs: starts[s] + t * o.thinkMs, model: MODEL, api: 'chat', messages: msgs.map((m) => ({ ...m })), maxTokens: 256, group: `chat${s}`, session: s, turn: t });
    }
  }
  return prep(`multi-turn ${o.sessions}×${o.turns}`, ws);
}

/** Unrelated prompts of the same size (2,271 tokens, 256 out), Poisson at `ratePerS`. */
export function noSharedPrefix(o: { seed: number; n: number; ratePerS: number; startMs: number }): MatrixScenario {
  const rng = mulberry32(o.seed * 137 + 9);
  const ts = poissonTimes(rng, o.n, o.ratePerS, o.startMs);
  const ws = ts.map((atMs): WorkloadRequest => ({ atMs, model: MODEL, api: 'completions', prompt: randomText(rng, 2271), maxTokens: 256, group: 'unique' }));
  return prep('no shared prefix', ws);
}

/**
 * Eviction-heavy (llm-d "KV-cache wins"): `tenants` tenants, each with a ~6,000-token system
 * prompt (5,500-6,500), requests picking a tenant uniformly with a 131-token question and 256
 * output tokens, Poisson at `ratePerS`, on the EVICTION_BLOCKS fleet (prefixes > fleet KV).
 */
export function evictionHeavy(o: { seed: number; tenants: number; n: number; ratePerS: number; startMs: number }): MatrixScenario {
  const rng = mulberry32(o.seed * 139 + 1);
  const prefixes = Array.from({ length: o.tenants }, () => randomText(rng, 5500 + Math.floor(rng() * 1001)));
  const ts = poissonTimes(rng, o.n, o.ratePerS, o.startMs);
  const ws = ts.map((atMs): WorkloadRequest => {
    const g = Math.floor(rng() * o.tenants);
    return { atMs, model: MODEL, api: 'completions', prompt: prefixes[g] + randomText(rng, 131), maxTokens: 256, group: `tenant${g}` };
  });
  return prep(`eviction-heavy ${o.tenants} tenants`, ws, EVICTION_BLOCKS);
}

/** The same requests, all arriving at `atMs` (for a saturation throughput measurement). */
export function asBurst(sc: MatrixScenario, atMs: number): MatrixScenario {
  return { ...sc, name: sc.name + ' (burst)', requests: sc.requests.map((b, k) => ({ ...b, w: { ...b.w, atMs: atMs + k * 0.001 } })) };
}
