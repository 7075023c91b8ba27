// Prints the simulator's behaviour on the two effects docs/inference-sim.md validates against
// published vLLM behaviour: TTFT vs the cached fraction of the prompt, and decode time per
// output token vs batch size. Virtual time, deterministic.   tsx sim/inference/llm/validate.ts
import { DEFAULT_LLM_CONFIG } from './engine';
import { tokenize } from './tokens';
import { runVirtual } from './virtual';
import { randomText } from './workloads';
import { mulberry32 } from '../prng';

const rng = mulberry32(11);
const out: string[] = ['prompt 2048 tokens, defaults: TTFT (ms) by cached fraction', 'cached  ttft_ms  ttft/cold'];
const prompt = randomText(rng, 2048);
let cold = 0;
for (const frac of [0, 0.25, 0.5, 0.75, 0.9, 0.97]) {
  const shared = Math.floor((2048 * frac) / 16) * 16;
  const warmup = tokenize(prompt.slice(0, shared * 4) + randomText(rng, 16));
  const probe = tokenize(prompt);
  const arrivals = frac > 0 ? [{ atMs: 0, spec: { model: 'sim-llm', promptTokens: warmup, maxTokens: 1 } }] : [];
  arrivals.push({ atMs: 10_000, spec: { model: 'sim-llm', promptTokens: probe, maxTokens: 1 } });
  const r = runVirtual({}, arrivals).requests.at(-1)!;
  const ttft = (r.firstTokenMs as number) - r.arrivalMs;
  if (frac === 0) cold = ttft;
  out.push(`${(r.cachedTokens / 2048).toFixed(2).padStart(6)}  ${ttft.toFixed(1).padStart(7)}  ${(ttft / cold).toFixed(2).padStart(9)}`);
}
out.push('', 'decode: mean time per output token (ms) by concurrent sequences (32-token prompts, 128 output)', 'batch  tpot_ms');
for (const n of [1, 4, 16, 64]) {
  const r = runVirtual({}, Array.from({ length: n }, () => ({ atMs: 0, spec: { model: 'sim-llm', promptTokens: tokenize(randomText(rng, 32)), maxTokens: 128 } })));
  out.push(`${String(n).padStart(5)}  ${((r.engine.stats.tpot.sum / r.engine.stats.tpot.count) * 1000).toFixed(2).padStart(7)}`);
}
out.push('', `cost model: step = ${DEFAULT_LLM_CONFIG.stepBaseMs} ms + ${DEFAULT_LLM_CONFIG.prefillMsPerToken} ms/prefill token + ${DEFAULT_LLM_CONFIG.decodeMsPerSeq} ms/decoding sequence`);
process.stdout.write(out.join('\n') + '\n');
