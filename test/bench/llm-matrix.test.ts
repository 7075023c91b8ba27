// Harness invariants of the published-workload matrix (bench/llm-routing/matrix.ts): the engine
// profile keeps the published behaviours, the references behave as their owners define them,
// every request is accounted for, one table. Not the figures (those are docs/benchmarks/llm-bench.md).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LlmEngine } from '../../sim/inference/llm/engine';
import { advanceTo } from '../../sim/inference/llm/virtual';
import { tokenize } from '../../sim/inference/llm/tokens';
import { randomText } from '../../sim/inference/llm/workloads';
import { mulberry32 } from '../../sim/inference/prng';
import { A100_LLAMA8B, gspBurst, gspRequests, MODEL } from '../../bench/llm-routing/published';
import { ApproxTree, SGLANG_CACHE_AWARE_DEFAULTS, SglangCacheAware } from '../../bench/llm-routing/cache-aware';
import { calibratedPeakPrefill, LLMD_DEFAULTS, LlmdOptimizedBaseline } from '../../bench/llm-routing/llmd';
import { matrixTable, runMatrix } from '../../bench/llm-routing/matrix';
import type { PolicyCtx, RouteRequest } from '../../bench/llm-routing/fleet';

const EIGHT = Array.from({ length: 8 }, (_, i) => ({ name: `w${i}`, cfg: A100_LLAMA8B }));
const ctx8 = (): PolicyCtx => ({ instances: EIGHT, candidates: () => [0, 1, 2, 3, 4, 5, 6, 7], seed: 1 });
let idx = 0;
const req = (text: string): RouteRequest => ({ idx: idx++, model: MODEL, text, promptBytes: text.length, maxTokens: 256, criticality: 'standard', wire: () => ({ path: '/v1/completions', body: '{}' }) });

test('engine profile: memory-bound decode (step ~11 ms at batch 1, ~17 ms at batch 32) and a cached prefix cuts TTFT', () => {
  const stepAt = (batch: number): number => {
    const e = new LlmEngine(A100_LLAMA8B);
    for (let i = 0; i < batch; i++) e.submit({ model: MODEL, promptTokens: tokenize(`r${i} `.padEnd(64, 'x')), maxTokens: 100 }, 0);
    // past the prefill steps: every sequence decoding
    for (let k = 0; k < 5; k++) e.step();
    const s = e.step();
    assert.ok(s && s.decodeSeqs === batch && s.prefillTokens === 0);
    return s.endMs - s.startMs;
  };
  const one = stepAt(1);
  const full = stepAt(32);
  assert.ok(one >= 10 && one <= 12, `batch 1 step ${one} ms`);
  assert.ok(full >= 16 && full <= 18, `batch 32 step ${full} ms`);
  // prefix hit: the second request with the same 2,140-token prefix prefills only its question
  const rng = mulberry32(3);
  const sys = randomText(rng, 2140);
  const e = new LlmEngine(A100_LLAMA8B);
  const a = e.submit({ model: MODEL, promptTokens: tokenize(sys + randomText(rng, 131)), maxTokens: 1 }, 0);
  advanceTo(e, 10_000);
  const b = e.submit({ model: MODEL, promptTokens: tokenize(sys + randomText(rng, 131)), maxTokens: 1 }, 10_000);
  advanceTo(e, 20_000);
  const ttftA = (a.firstTokenMs as number) - a.arrivalMs;
  const ttftB = (b.firstTokenMs as number) - b.arrivalMs;
  assert.ok(b.cachedTokens >= 2128, `cached ${b.cachedTokens}`);
  assert.ok(ttftA - ttftB > 190, `prefix saving ${ttftA - ttftB} ms (cold ${ttftA}, warm ${ttftB})`);
});

test('generated-shared-prefix: groups × questions, one shared system prompt per group', () => {
  const rs = gspRequests({ seed: 1, groups: 4, perGroup: 16 });
  assert.equal(rs.length, 64);
  assert.equal(rs[0].prompt.length, (2140 + 131) * 4);
  assert.equal(rs[0].prompt.slice(0, 2140 * 4), rs[15].prompt.slice(0, 2140 * 4));
  assert.notEqual(rs[0].prompt.slice(0, 2140 * 4), rs[16].prompt.slice(0, 2140 * 4));
  const sh = gspBurst({ seed: 1, groups: 4, perGroup: 16, shuffled: true, atMs: 0 });
  assert.notDeepEqual(sh.requests.map((r) => r.w.group), gspBurst({ seed: 1, groups: 4, perGroup: 16, shuffled: false, atMs: 0 }).requests.map((r) => r.w.group));
});

test('SGLang cache-aware: highest match above cache_threshold, else the smallest tree; imbalance → least loaded', () => {
  assert.deepEqual(SGLANG_CACHE_AWARE_DEFAULTS, { cacheThreshold: 0.3, balanceAbsThreshold: 64, balanceRelThreshold: 1.5, evictionIntervalMs: 120_000, maxTreeSize: 2 ** 26 });
  const p = new SglangCacheAware();
  p.init(ctx8());
  const rng = mulberry32(5);
  const sysA = randomText(rng, 500);
  const first = p.route(0, req(sysA + randomText(rng, 20)));
  assert.equal(first, 0, 'cold: every tree empty, the first smallest');
  const other = p.route(1, req(randomText(rng, 520)));
  assert.notEqual(other, first, 'no match: the smallest tree (worker 0 now holds characters)');
  assert.equal(p.route(2, req(sysA + randomText(rng, 20))), first, 'match rate > 0.3: the holder');
  // imbalance: > 64 in flight more than the least loaded and > 1.5× it
  p.load = [100, 10, 10, 10, 10, 10, 10, 3];
  assert.equal(p.route(3, req(sysA + randomText(rng, 20))), 7);
  const t = new ApproxTree();
  t.insert('abcdef', 1, 0);
  t.insert('abcxyz', 2, 1);
  assert.deepEqual(t.prefixMatch('abcdeq'), { matched: 5, tenant: 1 });
  assert.equal(t.chars.get(1), 6);
  assert.equal(t.chars.get(2), 6);
  t.evict(3);
  assert.ok((t.chars.get(1) as number) <= 3 && (t.chars.get(2) as number) <= 3);
});

test('llm-d default: sticky at prefix score ≥ 0.8 until the TTFT gate breaks it, then the least token load', () => {
  assert.equal(LLMD_DEFAULTS.affinityThreshold, 0.8);
  assert.equal(LLMD_DEFAULTS.maxTTFTPenaltyMs, 18_000);
  const peak = calibratedPeakPrefill(A100_LLAMA8B as { stepBaseMs: number; prefillMsPerToken: number; maxNumBatchedTokens: number });
  assert.ok(peak > 9000 && peak < 10_000, `${peak}`);
  const p = new LlmdOptimizedBaseline({ peakPrefillThroughput: peak });
  p.init(ctx8());
  const rng = mulberry32(6);
  const sys = randomText(rng, 2140);
  const a = p.route(0, req(sys + randomText(rng, 131)));
  // the holder is loaded, the others idle: it stays sticky (penalty far below 18 s)
  assert.equal(p.route(1, req(sys + randomText(rng, 131))), a);
  // the holder's in-flight tokens worth > 18 s of prefill more than an idle pod: the gate opens
  p.tokens[a] += 19 * peak;
  assert.notEqual(p.route(2, req(sys + randomText(rng, 131))), a);
});

test('quick matrix: every row runs on the cold burst and no shared prefix, every request accounted for, one table', { timeout: 300_000 }, () => {
  const all = runMatrix({ quick: true, seed: 1, wasmPath: 'build/switchyard.wasm', workloads: ['grouped', 'ns'] }, [1]);
  const cells = all[0];
  assert.equal(cells.length, 14);
  for (const c of cells) {
    assert.equal(c.served + c.refused, 128, `${c.policy} ${c.workload}`);
    assert.ok(c.served > 0 && c.reqPerS > 0 && c.ttftP99S > 0, `${c.policy} ${c.workload}`);
  }
  const rr = cells.find((c) => c.policy === 'round-robin' && c.workload === 'grouped');
  const ca = cells.find((c) => c.policy === 'sglang cache-aware' && c.workload === 'grouped');
  assert.ok(rr && ca && ca.hitRate > rr.hitRate, 'cache-aware keeps prefixes where round robin scatters them');
  const table = matrixTable(all);
  assert.equal(table.split('\n').length, 2 + 7);
  assert.match(table, /switchyard \(shipped defaults\)/);
});
