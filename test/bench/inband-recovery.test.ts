// Issue 9 §2 in virtual time, with the compiled filter and its SHIPPED defaults (the bench's
// plugin config sets no inband block): an instance 10x slower for 30 s, then normal, is priced
// out while slow and gets at least half its fair share again after recovery (not stuck at 0 as
// before in-band learning); a fast-failing instance (503 in 2 ms) receives far fewer requests
// than its fair share. bench/routing/inband.ts scenarios,
// one sample path each (~5-10 s wall each).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { DEFAULT_AGENT } from '../../bench/routing/agent-model';
import { runPolicy } from '../../bench/routing/des';
import { SwitchyardPolicy } from '../../bench/routing/switchyard';
import { episodeStats, fairShare, windowCounts } from '../../bench/routing/episodes';
import { BLACKHOLE_SCENARIO, SLOW_SCENARIO, scenarioPath } from '../../bench/routing/inband';
import { agentSpec, makePath, measuredErrors } from '../../bench/robustness/common';
import { defaultCells, endOf, episodesOf, fleetOf, lambdaOf, TIMING } from '../../bench/robustness/matrix';
import { LINKERD_EPISODE, LINKERD_FLEET } from '../../bench/robustness/linkerd';

// SWITCHYARD_WASM: another build (to show a test fails on the build before a fix)
const WASM = path.resolve(process.env.SWITCHYARD_WASM ?? path.resolve(__dirname, '../../build/switchyard.wasm'));
const AGENT = { ...DEFAULT_AGENT, scrapeIntervalMs: 1000 };

// One sample path decides little here: which requests land where during and after an episode
// depends on the whole path, and the same build's figures move by 2x between seeds (main e6a66e6
// on seeds 20261129 + 1000 k, k = 0..5: 11-30 to the slowed instance during its episode, 457-859
// to the black hole in the 30 s after it). The bounds hold for the sum over PATHS paths.
const PATHS = 4;

interface ScenarioRun { st: ReturnType<typeof episodeStats>; probes: number; routed: number }

async function scenarioRuns(s: typeof SLOW_SCENARIO): Promise<ScenarioRun[]> {
  const out: ScenarioRun[] = [];
  for (let k = 0; k < PATHS; k++) {
    const seed = 20261129 + 1000 * k;
    const sp = scenarioPath(s, seed);
    const sy = new SwitchyardPolicy({ wasmPath: WASM, agent: AGENT, seed, measuredRange: [sp.firstMeasured, sp.firstMeasured + sp.measured] });
    let probes = 0;
    const finish = sy.finish.bind(sy);
    sy.finish = (): void => { probes = sy.host.metric('switchyard.inband.probes') ?? 0; finish(); };
    const r = await runPolicy(s.fleet, sp, sy, { episodes: [s.episode], ttftFraction: 0.1 });
    assert.equal(sy.stats.vmFailures, 0);
    out.push({ st: episodeStats(r, s.fleet, s.episode, s.afterMs), probes, routed: r.choice.reduce((n, c) => n + (c >= 0 ? 1 : 0), 0) });
  }
  return out;
}

const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);

test('no absorbing state: 10x slower for 30 s, then back to half its fair share after recovery', { timeout: 240_000 }, async () => {
  const s = SLOW_SCENARIO;
  const runs = await scenarioRuns(s);
  const during = sum(runs.map((x) => x.st.sentDuring)), fairDuring = sum(runs.map((x) => x.st.fairDuring));
  // priced out while slow (round-robin would send it its fair share)...
  // (peak EWMA 0.04x, LEAST_REQUEST 0.30x on the first path: bench/routing/inband.ts)
  assert.ok(during < 0.1 * fairDuring, `sent ${during} during the episodes, fair ${fairDuring.toFixed(0)}`);
  // issue 9 §4: about peak EWMA's. Judged slow, the instance is priced at its whole slowdown until
  // it recovers and probed every 4 s: 0.044x over these paths (main e6a66e6); 0.053x on the first
  // before the verdict was held 0.072x. The norm learning from the episode's lone answers after
  // a short one (round 13a: a clamp for slow pairs only) made it 0.065x.
  assert.ok(during < 0.055 * fairDuring, `sent ${during} during the episodes (${(during / fairDuring).toFixed(3)}x fair), bound 0.055x`);
  for (const { st } of runs) {
    assert.ok(st.reactMs !== null && st.reactMs <= s.episode.fromMs + 3000, `reacted at ${st.reactMs}`);
    // ...and not for good: issue 9's target, back to half its fair share within 10 s of recovery
    // on every path (fresh normal answers after the slowdown lift the agent's P99 verdict and
    // price it at its calibrated norm, docs/inband.md). Before in-band learning and the agent's
    // fade: never (0 requests in the 30 s after); with the first in-band build: 18.3 s.
    assert.ok(st.recoverMs !== null && st.recoverMs <= 10_000, `back to half its fair share after ${st.recoverMs} ms`);
  }
  // it gets most of its share in the 30 s after (0.82x over these paths; 0.50x with the first in-band build)
  const after = sum(runs.map((x) => x.st.sentAfter)), fairAfter = sum(runs.map((x) => x.st.fairAfter));
  assert.ok(after > 0.6 * fairAfter, `sent ${after} in the 30 s after, fair ${fairAfter.toFixed(0)}`);
  // the probe share is bounded: at most 1 % of the requests
  for (const { probes, routed } of runs) assert.ok(probes > 0 && probes <= 0.01 * routed + 1, `${probes} probes of ${routed} requests`);
});

test('a black hole (503 in 2 ms) is priced out by its errors: far below its fair share', { timeout: 240_000 }, async () => {
  const s = BLACKHOLE_SCENARIO;
  const runs = await scenarioRuns(s);
  // LEAST_REQUEST sends it ~1.8x its fair share (bench/routing/inband.ts); the filter before in-band ~1.9x
  for (const { st } of runs) assert.ok(st.errorsDuring < 0.1 * st.fairDuring, `${st.errorsDuring} errors, fair share ${st.fairDuring.toFixed(0)}`);
  const after = sum(runs.map((x) => x.st.sentAfter)), fairAfter = sum(runs.map((x) => x.st.fairAfter));
  assert.ok(after > 0.5 * fairAfter, `after the episodes it gets traffic again: ${after}, fair ${fairAfter.toFixed(0)}`);
});

// Issue 21, the Linkerd-style case (bench/robustness/linkerd.ts: 11 instances, c = 1000
// configured, one 12x slower for 30 s for reasons unrelated to load, answers in one piece), one
// path, 1 s scrape, shipped defaults. The filter before issue 21 (80bf6a5) sent the slow instance
// 259 requests in its first 2 s on this path (round robin 180, peak EWMA 22:
// docs/benchmarks/robustness.md): the requests piling up there cost nothing at c = 1000, and its
// peers carried a phantom queue read from their waits that it, silent, did not.
test('Linkerd-style case: a slowed instance that has not answered yet is priced out by the pile of its outstanding requests', { timeout: 300_000 }, async () => {
  const fleet = LINKERD_FLEET;
  const e = LINKERD_EPISODE;
  const seed = 20261201;
  const sp = makePath({ law: { kind: 'lognormal', sigma: fleet.sigma }, meanMs: fleet.meanMs, lambdaPerS: 1000, rho: NaN, seed, warmupMs: 20_000, endMs: 80_000 });
  const sy = new SwitchyardPolicy({ wasmPath: WASM, agent: { ...AGENT, concurrency: fleet.slots }, seed, measuredRange: [sp.firstMeasured, sp.firstMeasured + sp.measured] });
  const r = await runPolicy(fleet, sp, sy, { episodes: [e], ttftFraction: 1 });
  assert.equal(sy.stats.vmFailures, 0);
  const first = windowCounts(r, e.inst, e.fromMs, e.fromMs + 2000);
  const fair = fairShare(fleet, e.inst) * first.all;
  assert.ok(first.sent < 0.2 * fair, `sent ${first.sent} in the first 2 s, fair ${fair.toFixed(0)}`);
  const st = episodeStats(r, fleet, e, 15_000);
  assert.ok(st.recoverMs !== null && st.recoverMs <= 10_000, `back to half its fair share after ${st.recoverMs} ms`);
  // issue 21's done-when on this path: no more than peak EWMA's 22 in the first 2 s (the branch
  // before the pile's load feedback: 25), and at least half its fair share in the 10 s after the
  // recovery (before: 0.45x; the recovered instance's share was set by the rank of its static price)
  assert.ok(first.sent <= 22, `sent ${first.sent} in the first 2 s, peak EWMA 22`);
  const after = windowCounts(r, e.inst, e.toMs, e.toMs + 10_000);
  assert.ok(after.sent >= 0.5 * fairShare(fleet, e.inst) * after.all, `${after.sent} in the 10 s after recovery, fair ${(fairShare(fleet, e.inst) * after.all).toFixed(0)}`);
});

// Issue 21, the black hole at c = 4 (bench/robustness matrix cell lognormals1.1/c4/r0.85/blackhole,
// one path): the hot peers had no free slot and the black hole, answering 503 at once, always had
// one -- the saturation filter dropped the peers and it took requests whatever its error price
// (the branch before: 69 on this path, 88 per path on 3; 80bf6a5: 43 per path; here 35).
test('black hole at c = 4, rho 0.85: a free slot on an instance priced out by its errors does not draw the requests', { timeout: 300_000 }, async () => {
  const cell = defaultCells().find((c) => c.id === 'lognormals1.1/c4/r0.85/blackhole/p1/s1000')!;
  const fleet = fleetOf(cell);
  const seed = 20261201;
  const sp = makePath({ law: cell.law, meanMs: fleet.meanMs, lambdaPerS: lambdaOf(cell, fleet), rho: cell.rho, seed, warmupMs: TIMING.warmupMs, endMs: endOf(cell, TIMING) });
  const sy = new SwitchyardPolicy({ wasmPath: WASM, agent: agentSpec(cell.scrapeMs, cell.c), seed, measuredRange: [sp.firstMeasured, sp.firstMeasured + sp.measured] });
  const r = await runPolicy(fleet, sp, sy, { episodes: episodesOf(cell, TIMING), ttftFraction: 0.1 });
  assert.equal(sy.stats.vmFailures, 0);
  const errors = measuredErrors(r);
  assert.ok(errors <= 50, `${errors} errors (80bf6a5: 43 per path on 3 paths)`);
});
