// A burst on a cold fleet (issue 20, cause 1): `n` standard completions sharing one of `prefixes`
// system prompts, all arriving within `spreadMs` once the agent has scraped the idle fleet twice —
// the shape of SGLang's generated-shared-prefix burst, scaled to this bench's fleet. Through the
// compiled filter on its shipped defaults (fed by the agent's own code), every request should be
// served: the servers queue what they cannot batch yet. Used by test/integration/llm-admission.test.ts;
// `tsx bench/llm-routing/cold-burst.ts [--wasm path] [--n 1024] [--seeds 1,2]` prints the figures.
import { prepare, runFleet, type BenchRequest, type RunResult } from './fleet';
import { fleet, LLAMA } from './scenarios';
import { SwitchyardFilterPolicy } from './filter';
import { sharedSystemPrompts } from '../../sim/inference/llm/workloads';

export interface ColdBurstOpts {
  seed: number;
  n?: number;
  prefixes?: number;
  /** when the burst starts (ms of virtual time): after the agent's first scrapes of the idle fleet */
  startMs?: number;
  /** the burst arrives within this many ms (Poisson at n / spreadMs) */
  spreadMs?: number;
}

/** The burst's requests: llama-3-8b only (the 6 instances that serve it), all standard. */
export function coldBurst(o: ColdBurstOpts): BenchRequest[] {
  const n = o.n ?? 512;
  const spreadMs = o.spreadMs ?? 200;
  const ws = sharedSystemPrompts({
    seed: o.seed * 7919 + 1, n, ratePerS: (n * 1000) / spreadMs, startMs: o.startMs ?? 2500, models: [LLAMA], maxTokens: [128, 256],
    prefixes: o.prefixes ?? 32, prefixTokens: 1024, suffixTokens: [64, 160],
  });
  return prepare(ws, () => 'standard', 0, Infinity);
}

export interface ColdBurstResult {
  served: number;
  refused: number;
  /** last token of the last request, from the burst's start (s) */
  makespanS: number;
  reqPerS: number;
  ttftP99S: number;
  hitRate: number;
}

export function summarize(reqs: BenchRequest[], r: RunResult): ColdBurstResult {
  const start = Math.min(...reqs.map((q) => q.w.atMs));
  let served = 0, refused = 0, end = start, cached = 0, prompt = 0;
  const ttft: number[] = [];
  for (const o of r.outcomes) {
    if (o.shed) { refused++; continue; }
    served++;
    end = Math.max(end, o.arrivalMs + o.e2eMs);
    ttft.push(o.ttftMs);
    cached += o.cachedTokens;
    prompt += o.promptTokens;
  }
  ttft.sort((a, b) => a - b);
  const makespanS = (end - start) / 1000;
  return {
    served, refused, makespanS, reqPerS: makespanS > 0 ? served / makespanS : 0,
    ttftP99S: ttft.length > 0 ? ttft[Math.min(ttft.length - 1, Math.ceil(0.99 * ttft.length) - 1)] / 1000 : NaN,
    hitRate: prompt > 0 ? cached / prompt : 0,
  };
}

/** One run through the compiled filter (`wasmPath`, default build/switchyard.wasm), shipped defaults. */
export function runColdBurst(o: ColdBurstOpts & { wasmPath?: string }): ColdBurstResult {
  const reqs = coldBurst(o);
  const r = runFleet(fleet(), reqs, new SwitchyardFilterPolicy({ wasmPath: o.wasmPath }), o.seed);
  return summarize(reqs, r);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const arg = (k: string): string | undefined => { const i = process.argv.indexOf(k); return i >= 0 ? process.argv[i + 1] : undefined; };
  const seeds = (arg('--seeds') ?? '1,2').split(',').map(Number);
  const n = Number(arg('--n') ?? 512);
  const wasmPath = arg('--wasm');
  console.log(`cold burst: ${n} standard requests within 200 ms on the idle 8-instance fleet (llama-3-8b: 6 instances), shipped defaults${wasmPath ? `, ${wasmPath}` : ''}`);
  console.log('| seed | served | refused (429) | req/s | TTFT P99 (s) | prefix hit rate |');
  console.log('|---|---|---|---|---|---|');
  for (const seed of seeds) {
    const x = runColdBurst({ seed, n, wasmPath });
    console.log(`| ${seed} | ${x.served} | ${x.refused} | ${x.reqPerS.toFixed(1)} | ${x.ttftP99S.toFixed(2)} | ${(100 * x.hitRate).toFixed(0)} % |`);
  }
}
