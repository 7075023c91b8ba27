// Smoke test of the routing-quality benchmark (bench/routing): a small discrete-event run at
// rho 0.85 where the compiled filter, in the embedded host, routes every request (~10k requests,
// 1-3 s). Round-robin is unstable on this fleet at rho 0.85 (its slowest instance gets 1/8 of the
// traffic for 5.8 % of the capacity), so its P99 grows with the run length: 8000 measured
// requests keep a clear margin even for a herding filter (the filter as built in Nov 2026:
// ~17 s vs ~31 s). The benchmark itself (bench/routing/run.ts) compares against LEAST_REQUEST.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { DEFAULT_AGENT } from '../../bench/routing/agent-model';
import { DEFAULT_FLEET, LeastRequest, makeSamplePath, MIXED_FLEET, RoundRobin, runPolicy, summarize } from '../../bench/routing/des';
import { SwitchyardPolicy } from '../../bench/routing/switchyard';

const WASM = path.resolve(__dirname, '../../build/switchyard.wasm');

test('routing DES: every decision comes from the filter, and it beats round-robin on P99 at rho 0.85', { timeout: 30_000 }, async () => {
  const t0 = performance.now();
  const sp = makeSamplePath(DEFAULT_FLEET, { rho: 0.85, seed: 11, warmupMs: 10_000, measured: 8000, tail: 500 });
  const rr = await runPolicy(DEFAULT_FLEET, sp, new RoundRobin());
  const sy = new SwitchyardPolicy({ wasmPath: WASM, agent: DEFAULT_AGENT, seed: 11, measuredRange: [sp.firstMeasured, sp.firstMeasured + sp.measured] });
  const r = await runPolicy(DEFAULT_FLEET, sp, sy);

  // every arrival went through the filter: either it set x-switchyard-endpoint (counted by its
  // switchyard.lb.choice.* counters) or it forwarded with x-degraded (switchyard.lb.all_ineligible)
  const routed = r.choice.reduce((n, c) => n + (c >= 0 ? 1 : 0), 0);
  assert.ok(routed >= sp.firstMeasured + sp.measured, `routed ${routed}`);
  assert.equal(sy.stats.filterRouted + sy.stats.fallback, routed);
  assert.equal(sy.stats.choiceMetric, sy.stats.filterRouted, 'switchyard.lb.choice.* counts every endpoint the filter set');
  assert.equal(sy.stats.allIneligibleMetric, sy.stats.fallback, 'every forward without endpoint is the filter\'s all-ineligible decision');
  // the fallback only happens before the first usable snapshot, never for a measured request
  assert.equal(sy.stats.fallbackMeasured, 0);
  assert.ok(sy.stats.fallback < sp.firstMeasured / 4, `fallback ${sy.stats.fallback}`);
  assert.equal(sy.stats.vmFailures, 0);
  // the filter adopted the agent's snapshots (every VM: 2 workers + main thread)
  assert.ok(sy.stats.snapshotUpdates >= 2 * sy.stats.publications, `updates ${sy.stats.snapshotUpdates}, publications ${sy.stats.publications}`);

  const p99 = { rr: summarize(rr.responseMs).p99Ms, sy: summarize(r.responseMs).p99Ms };
  assert.ok(p99.sy < p99.rr, `P99 switchyard ${p99.sy.toFixed(0)} ms vs round-robin ${p99.rr.toFixed(0)} ms`);
  assert.ok(performance.now() - t0 < 20_000);
});

// Fleet B (mixed GPU generations: speeds 1, 0.55, 0.2): Envoy's LEAST_REQUEST equalises in-flight
// counts, so the 0.2-speed instances hold as many requests as the fastest; the filter prices each
// instance by E[S] and its backlog. The benchmark measures 0.58-0.69x LEAST_REQUEST's P99 here;
// 0.9x leaves room for the sample path and fails if the choice degrades to count balancing.
test('routing DES, fleet B: the filter beats LEAST_REQUEST on P99 at rho 0.85 by a margin', { timeout: 60_000 }, async () => {
  const sp = makeSamplePath(MIXED_FLEET, { rho: 0.85, seed: 11, warmupMs: 10_000, measured: 8000, tail: 500 });
  const lr = summarize((await runPolicy(MIXED_FLEET, sp, new LeastRequest(11))).responseMs);
  const sy = new SwitchyardPolicy({ wasmPath: WASM, agent: DEFAULT_AGENT, seed: 11, measuredRange: [sp.firstMeasured, sp.firstMeasured + sp.measured] });
  const r = summarize((await runPolicy(MIXED_FLEET, sp, sy)).responseMs);
  assert.equal(sy.stats.fallbackMeasured, 0);
  assert.equal(sy.stats.vmFailures, 0);
  assert.ok(r.p99Ms < 0.9 * lr.p99Ms, `P99 switchyard ${r.p99Ms.toFixed(0)} ms vs LEAST_REQUEST ${lr.p99Ms.toFixed(0)} ms`);
});
