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
import { DEFAULT_FLEET, type EngineCtx, type Episode, LeastRequest, makeSamplePath, MIXED_FLEET, orcaText, RoundRobin, type RunResult, runPolicy, summarize } from '../../bench/routing/des';
import { SwitchyardPolicy } from '../../bench/routing/switchyard';
import { ClientSideWrr, ENVOY_WRR_DEFAULTS, parseOrcaText, PeakEwma, PeakEwmaMetric, wrrWeight } from '../../bench/routing/inband-reference';
import { episodeStats } from '../../bench/routing/episodes';
import { EQUAL_FLEET, type ScenarioSpec, scenarioPath } from '../../bench/routing/inband';
import { LocalLeastRequest, MultiProxy } from '../../bench/routing/choose-model';

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

// ---------------------------------------------------------------- issue 9 §4: in-band scenarios
// Harness invariants of the in-band evidence benchmark (bench/routing/inband.ts), on short runs:
// every request accounted for, the episode really happens and is counted, the reference
// balancers behave as their owners define them. No performance targets here.

const SHORT_SLOW: ScenarioSpec = {
  name: 'slow', fleet: EQUAL_FLEET, rho: 0.3, warmupMs: 5000, afterMs: 10_000,
  episode: { kind: 'slow', inst: 2, fromMs: 10_000, toMs: 20_000, factor: 10 },
};
const SHORT_BLACKHOLE: ScenarioSpec = {
  name: 'blackhole', fleet: EQUAL_FLEET, rho: 0.6, warmupMs: 5000, afterMs: 10_000,
  episode: { kind: 'error', inst: 2, fromMs: 10_000, toMs: 20_000, errorMs: 2, status: 503 },
};

/** Every measured request answered once, counted on one instance; every routed request went somewhere. */
function assertAccounted(r: RunResult, measured: number): void {
  assert.equal(r.responseMs.length, measured);
  assert.equal(r.perInstance.reduce((a, b) => a + b, 0), measured);
  for (let i = 0; i < measured; i++) assert.ok(r.status[i] === 200 || r.status[i] === 503, `measured request ${i}: status ${r.status[i]}`);
  assert.ok(r.finished >= measured);
  // 2xx answers send their headers before their end of stream; error answers are headers only
  assert.ok(r.responded >= r.finished, `responded ${r.responded} < finished ${r.finished}`);
}

function inEpisode(r: RunResult, e: Episode, i: number): boolean {
  return r.arrivals[i] >= e.fromMs && r.arrivals[i] < e.toMs;
}

test('in-band slow scenario: the episode slows the sick instance 10x and is counted; the filter sees every stream to its end', { timeout: 60_000 }, async () => {
  const s = SHORT_SLOW;
  const e = s.episode;
  const sp = scenarioPath(s, 5);
  const opts = { episodes: [e], ttftFraction: 0.1 };
  const rr = await runPolicy(s.fleet, sp, new RoundRobin(), opts);
  assertAccounted(rr, sp.measured);
  // round-robin sends exactly 1/8 of the arrivals to the sick instance: during and after
  const st = episodeStats(rr, s.fleet, e, s.afterMs);
  assert.ok(Math.abs(st.sentDuring - st.fairDuring) <= 1, `RR during ${st.sentDuring} vs fair ${st.fairDuring}`);
  assert.ok(Math.abs(st.sentAfter - st.fairAfter) <= 1);
  assert.equal(st.reactMs, null);
  // the episode happened: requests the sick instance started in the episode's second half took >= 5x the others
  const m0 = sp.firstMeasured;
  const mean = (f: (i: number) => boolean): number => {
    let n = 0;
    let sum = 0;
    for (let i = 0; i < sp.measured; i++) if (f(i + m0)) { n++; sum += rr.responseMs[i]; }
    return sum / n;
  };
  const sick = mean((i) => rr.choice[i] === e.inst && rr.arrivals[i] >= e.fromMs && rr.arrivals[i] < e.fromMs + 3000);
  const healthy = mean((i) => rr.choice[i] !== e.inst && inEpisode(rr, e, i));
  assert.ok(sick > 5 * healthy, `sick mean ${sick.toFixed(0)} ms vs healthy ${healthy.toFixed(0)} ms`);

  // the compiled filter: request headers, response headers, end of stream for every request
  const sy = new SwitchyardPolicy({ wasmPath: WASM, agent: DEFAULT_AGENT, seed: 5, measuredRange: [sp.firstMeasured, sp.firstMeasured + sp.measured] });
  const r = await runPolicy(s.fleet, sp, sy, { ...opts, orca: true });
  assertAccounted(r, sp.measured);
  const routed = r.choice.reduce((n, c) => n + (c >= 0 ? 1 : 0), 0);
  assert.equal(sy.stats.filterRouted + sy.stats.fallback, routed);
  assert.equal(sy.stats.choiceMetric, sy.stats.filterRouted);
  assert.equal(sy.stats.vmFailures, 0);
  assert.equal(sy.stats.fallbackMeasured, 0);
  // the episode is counted for the filter's run the same way (it learns of the slow instance
  // from the agent's scrapes: fewer requests than round-robin's exact share)
  const fst = episodeStats(r, s.fleet, e, s.afterMs);
  assert.ok(fst.sentDuring < st.sentDuring, `filter sent ${fst.sentDuring} to the sick instance, RR ${st.sentDuring}`);
});

test('in-band black hole: every request sent to it in the episode is a fast 503, counted; LEAST_REQUEST is drawn to it', { timeout: 60_000 }, async () => {
  const s = SHORT_BLACKHOLE;
  const e = s.episode;
  const sp = scenarioPath(s, 6);
  const lr = await runPolicy(s.fleet, sp, new LeastRequest(6), { episodes: [e] });
  assertAccounted(lr, sp.measured);
  let bad = 0;
  for (let i = 0; i < sp.measured; i++) {
    const id = i + sp.firstMeasured;
    const shouldFail = lr.choice[id] === e.inst && inEpisode(lr, e, id);
    assert.equal(lr.status[i], shouldFail ? 503 : 200, `request ${id}`);
    if (shouldFail) {
      bad++;
      assert.equal(lr.responseMs[i], 2);
    }
  }
  const st = episodeStats(lr, s.fleet, e, s.afterMs);
  assert.equal(st.errorsDuring, st.sentDuring);
  assert.ok(bad > 0 && bad <= st.errorsDuring && st.errorsDuring <= lr.errors);
  // it looks idle (no active requests): LEAST_REQUEST sends it more than its fair share
  assert.ok(st.sentDuring > 1.3 * st.fairDuring, `LR sent ${st.sentDuring}, fair ${st.fairDuring.toFixed(0)}`);

  // the filter gets the 503 as headers-only end of stream: every stream completes (respond()
  // throws otherwise) and its in-flight counts stay balanced (the filter keeps routing to it)
  const sy = new SwitchyardPolicy({ wasmPath: WASM, agent: DEFAULT_AGENT, seed: 6, measuredRange: [sp.firstMeasured, sp.firstMeasured + sp.measured] });
  const r = await runPolicy(s.fleet, sp, sy, { episodes: [e] });
  assertAccounted(r, sp.measured);
  assert.equal(sy.stats.vmFailures, 0);
  const fst = episodeStats(r, s.fleet, e, s.afterMs);
  assert.equal(fst.errorsDuring, fst.sentDuring);
  // in-band learning prices the black hole out while it fails (docs/inband.md); after the episode
  // its error rate fades (errorTauMs) and probes find it answering: back to half its fair share
  // within 10 s (issue 9's recovery criterion; measured 4.75 s on this path)
  assert.ok(fst.errorsDuring < 0.2 * fst.fairDuring, `${fst.errorsDuring} errors, fair ${fst.fairDuring.toFixed(0)}`);
  assert.ok(fst.recoverMs !== null && fst.recoverMs <= 10_000, `back to half its fair share after ${fst.recoverMs} ms`);

  // Envoy LEAST_REQUEST per proxy: the error answer ends the stream, so the proxy's count goes back down
  const local = new LocalLeastRequest(6);
  await runPolicy(s.fleet, sp, local, { episodes: [e] });
  const counts = (local as unknown as { counts: Int32Array }).counts;
  assert.ok(counts[e.inst] <= s.fleet.slots * 4, `active count of the black hole ${counts[e.inst]} (leak?)`);
});

test('peak EWMA (Finagle/linkerd) jumps on one slow response, decays with tau, and moves P2C away', () => {
  const m = new PeakEwmaMetric(10_000, 30, 0);
  assert.equal(m.load(0), 30);
  m.pending = 1;
  assert.equal(m.load(0), 60, 'load = cost x (pending + 1)');
  m.pending = 0;
  m.observe(100, 800); // one slow response: the peak is taken at once
  assert.equal(m.cost, 800);
  m.observe(100, 40); // a fast one right after barely moves it (weight 1 - exp(0) = 0)
  assert.equal(m.cost, 800);
  assert.ok(Math.abs(m.load(10_100) - 800 * Math.exp(-1)) < 1e-6, 'decays toward 0 with tau = 10 s');
  const z = new PeakEwmaMetric(10_000, 0, 0);
  z.pending = 2;
  assert.equal(z.load(0), 2 ** 47 + 2, "Finagle's penalty without history");

  // P2C: after one slow answer from instance 0 it is never chosen over an idle peer
  const p = new PeakEwma(3);
  const ctx = { addrs: ['a', 'b', 'c'], now: () => 0 } as unknown as EngineCtx;
  p.init(ctx);
  p.metrics[0].observe(0, 5000);
  const picks = [0, 0, 0];
  for (let i = 0; i < 300; i++) {
    const j = p.route(1, i);
    picks[j]++;
    p.respond(1, i, j);
  }
  assert.equal(picks[0], 0, `picks ${picks}`);
  assert.ok(picks[1] > 50 && picks[2] > 50);
});

test('Envoy client-side WRR: weight = qps / (utilization + penalty x eps/qps), blackout, median default, weights follow utilisation', async () => {
  const P = ENVOY_WRR_DEFAULTS.errorUtilizationPenalty;
  assert.equal(wrrWeight(parseOrcaText('TEXT application_utilization=0.5,rps_fractional=10'), P), 20);
  assert.equal(wrrWeight(parseOrcaText('TEXT application_utilization=0.25, rps_fractional=10'), P), 40);
  assert.equal(wrrWeight(parseOrcaText('TEXT cpu_utilization=0.5,rps_fractional=10'), P), 20, 'cpu_utilization when application_utilization is absent');
  assert.equal(wrrWeight(parseOrcaText('TEXT application_utilization=0,rps_fractional=10,eps=5'), P), 20, 'eps/qps penalty');
  assert.equal(wrrWeight(parseOrcaText('TEXT application_utilization=0.5,rps_fractional=0'), P), undefined);
  assert.equal(wrrWeight(parseOrcaText('TEXT rps_fractional=3'), P), undefined);
  assert.deepEqual(parseOrcaText(orcaText({ utilization: 0.7, rps: 12.3, eps: 0, queue: 3 })).named_metrics, { queue: 3 });
  assert.throws(() => parseOrcaText('JSON {}'), /TEXT/);
  assert.throws(() => parseOrcaText('TEXT rps_fractional=abc'), /rps_fractional/);

  const w = new ClientSideWrr(1);
  const timers: Array<[number, () => void]> = [];
  let now = 0;
  w.init({ addrs: ['a', 'b', 'c', 'd'], now: () => now, at: (t: number, fn: () => void) => timers.push([t, fn]) } as unknown as EngineCtx);
  const report = (i: number, u: number): void => w.onReport(now, i, `TEXT application_utilization=${u},rps_fractional=10`);
  const tick = (): void => {
    const [t, fn] = timers.shift()!;
    now = t;
    fn();
  };
  report(0, 0.2); report(1, 0.4); report(2, 0.4);
  for (let k = 0; k < 9; k++) tick(); // 9 s: still in the blackout
  assert.deepEqual(w.applied, [1, 1, 1, 1]);
  tick(); // 10 s: valid; host 3 never reported -> median of [50, 25, 25] = 25
  assert.deepEqual(w.applied, [50, 25, 25, 25]);
  const picks = [0, 0, 0, 0];
  for (let i = 0; i < 1250; i++) picks[w.route()]++;
  [500, 250, 250, 250].forEach((n, i) => assert.ok(Math.abs(picks[i] - n) <= 1, `EDF by weight: ${picks}`));
  report(0, 0.8); // host 0 gets busy: its weight follows its utilisation at the next update
  tick();
  assert.equal(w.applied[0], 12);

  // in a run, the DES attaches the instance's ORCA report and the weights order the instances
  // by utilisation: the 10x slow instance's weight falls below every healthy one's
  const s = SHORT_SLOW;
  let snap: number[] = [];
  class Probe extends ClientSideWrr {
    init(ctx: EngineCtx): void {
      super.init(ctx);
      ctx.at(s.episode.toMs - 1, () => (snap = [...this.applied]));
    }
  }
  const probe = new Probe(2);
  const sp = scenarioPath({ ...s, warmupMs: 12_000, episode: { ...s.episode, fromMs: 14_000 } }, 7);
  const r = await runPolicy(s.fleet, sp, probe, { episodes: [{ ...s.episode, fromMs: 14_000 }], orca: true });
  assertAccounted(r, sp.measured);
  assert.equal(probe.reports, r.responded, 'one ORCA report per answer');
  const others = snap.filter((_, i) => i !== s.episode.inst);
  assert.ok(snap[s.episode.inst] < Math.min(...others), `weights at the end of the episode ${snap}`);
});

test('several proxies: arrivals split by the configured shares; the filter in each proxy decides its own requests', { timeout: 60_000 }, async () => {
  const split = [0.7, 0.1, 0.1, 0.1];
  const sp = makeSamplePath(DEFAULT_FLEET, { rho: 0.85, seed: 8, warmupMs: 8000, measured: 3000, tail: 200 });
  const members: SwitchyardPolicy[] = [];
  const multi = new MultiProxy('switchyard x4', (k, agent) => {
    const p = new SwitchyardPolicy({ wasmPath: WASM, agent: DEFAULT_AGENT, seed: 8 + k, sharedAgent: agent });
    members.push(p);
    return p;
  }, 4, { spec: DEFAULT_AGENT, seed: 8 }, 8, split);
  const r = await runPolicy(DEFAULT_FLEET, sp, multi, { orca: true });
  assertAccounted(r, sp.measured);
  const routed = r.choice.reduce((n, c) => n + (c >= 0 ? 1 : 0), 0);
  const each = members.map((m) => m.stats.filterRouted + m.stats.fallback);
  assert.equal(each.reduce((a, b) => a + b, 0), routed);
  each.forEach((n, k) => assert.ok(Math.abs(n / routed - split[k]) < 0.03, `proxy ${k}: ${n} of ${routed}`));
  for (const m of members) {
    assert.equal(m.stats.vmFailures, 0);
    assert.equal(m.stats.choiceMetric, m.stats.filterRouted);
  }
  assert.throws(() => new MultiProxy('x', () => new RoundRobin(), 4, undefined, 1, [1, 1]), /split/);
});
