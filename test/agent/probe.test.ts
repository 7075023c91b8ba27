// Probing end to end on loopback: agent -> sim/leased-line.ts -> sim/cloud-service.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as net from 'node:net';
import { startAgent, type AgentHandle } from '../../agent/src/agent';
import type { SampleEvent, StateEvent, ProbeEndEvent } from '../../agent/src/link/peer-monitor';
import type { PeerConfig } from '../../agent/src/config';
import { startCloudService } from '../../sim/cloud-service';
import { startLeasedLine } from '../../sim/leased-line';
import { sleep, waitForEvent } from './_helpers';

const INTERVAL = 100;
const DEGRADE = 50;
const RECOVER = 40;
const N = 5;

async function rig(peer: Partial<PeerConfig> = {}, rttMs = 5) {
  const svc = await startCloudService({ cloud: 'cloud-b' });
  const line = await startLeasedLine({ targetPort: svc.port, rttMs });
  const agent = await startAgent(
    {
      log: { level: 'silent' },
      listen: { port: 0 },
      link: {
        peers: [
          {
            name: 'cloud-b',
            probe: { kind: 'http', url: `http://127.0.0.1:${line.port}/healthz` },
            intervalMs: INTERVAL,
            timeoutMs: 1000,
            degradeThresholdMs: DEGRADE,
            degradeAfter: 1,
            recoverThresholdMs: RECOVER,
            recoverAfter: N,
            // These tests time the trigger itself: recoveries follow degradations within the
            // shipped 2 s cooldown (held recoveries are tested in schmitt.test.ts).
            cooldownMs: 0,
            ...peer,
          },
        ],
      },
    },
    { defaultMetrics: false },
  );
  const samples: SampleEvent[] = [];
  const ends: ProbeEndEvent[] = [];
  agent.events.on('sample', (s) => samples.push(s));
  agent.events.on('probe-end', (e) => ends.push(e));
  const close = async () => {
    await agent.stop();
    await line.close();
    await svc.close();
  };
  return { svc, line, agent, samples, ends, close };
}

const toState = (agent: AgentHandle, to: string, ms: number) => waitForEvent<StateEvent>(agent.events, 'state', (e) => e.to === to, ms);

test('leased line 5 -> 200 -> 5 ms: degrades within threshold + interval, recovers after exactly N good samples', async () => {
  const { line, agent, samples, ends, close } = await rig();
  try {
    // boot: initial state is degraded, normal after N good samples
    assert.equal(agent.status('cloud-b'), 'degraded');
    const boot = await toState(agent, 'normal', 3000);
    assert.equal(boot.sampleKind, 'ok');
    assert.equal(samples.filter((s) => s.atMs <= boot.atMs).length >= N, true);
    await sleep(300);

    // --- RTT 200 ms
    const tSet = performance.now();
    line.setDelay({ rttMs: 200 });
    const deg = await toState(agent, 'degraded', 2000);
    const flipMs = performance.now() - tSet;
    assert.ok(flipMs <= INTERVAL + DEGRADE + 80, `flipped ${flipMs.toFixed(1)} ms after the change (budget ${INTERVAL + DEGRADE} + slack)`);
    assert.equal(deg.sampleKind, 'slow', 'counted by the threshold timer');
    assert.ok(deg.sampleElapsedMs >= DEGRADE - 1 && deg.sampleElapsedMs < DEGRADE + 40, `sample taken ${deg.sampleElapsedMs} ms into the probe`);
    assert.ok(
      !ends.some((e) => e.probeId === deg.probeId),
      'the slow probe had not completed when the agent flipped',
    );
    assert.equal(agent.status(), 'degraded');
    // the published snapshot says so right away
    assert.equal(agent.snapshot().snapshot.peers[0].state, 'degraded');

    await sleep(600);
    // slow probes later complete with the real RTT but are not counted twice
    const late = ends.filter((e) => e.late);
    assert.ok(late.length >= 3, `late completions: ${late.length}`);
    for (const e of late) {
      assert.equal(e.result.outcome, 'ok');
      // a probe in flight at the change may only see the delay in one direction (~100 ms)
      assert.ok(e.result.rttMs >= DEGRADE, `late rtt ${e.result.rttMs}`);
    }
    assert.ok(late.filter((e) => e.result.rttMs >= 195).length >= 2, 'late completions carry the real ~200 ms RTT');
    const ids = samples.map((s) => s.probeId);
    assert.equal(new Set(ids).size, ids.length, 'one sample per probe');
    const mon = agent.peers.get('cloud-b')!;
    // lastRttMs: the newest probe's value, a lower bound (>= threshold) while it is still in flight
    assert.ok(mon.lastRttMs >= DEGRADE - 1, `lastRttMs ${mon.lastRttMs}`);
    assert.ok(mon.avgRttMs > 100, `EWMA follows the real (late) RTTs: ${mon.avgRttMs}`);

    // --- back to 5 ms
    const restoreIdx = samples.length;
    const tRestore = performance.now();
    line.setDelay({ rttMs: 5 });
    const rec = await toState(agent, 'normal', 4000);
    const recMs = performance.now() - tRestore;
    const after = samples.slice(restoreIdx);
    const ti = after.findIndex((s) => s.probeId === rec.probeId);
    assert.ok(ti >= N - 1);
    // exactly the last N samples before the transition were good, the one before was not
    const lastN = after.slice(ti - N + 1, ti + 1);
    assert.deepEqual(lastN.map((s) => s.sampleClass), Array(N).fill('low'));
    assert.deepEqual(lastN.map((s) => s.recoverStreak), [1, 2, 3, 4, 5]);
    assert.deepEqual(lastN.slice(0, N - 1).map((s) => s.state), Array(N - 1).fill('degraded'), 'still degraded after N-1 good samples');
    if (ti - N >= 0) assert.notEqual(after[ti - N].sampleClass, 'low');
    assert.ok(recMs >= (N - 1) * INTERVAL - 20, `recovered after ${recMs.toFixed(0)} ms, N good samples need >= ${(N - 1) * INTERVAL}`);
  } finally {
    await close();
  }
});

test('HTTP probe errors count as degraded samples (non-2xx, connection refused)', async () => {
  const { svc, agent, samples, close } = await rig({ recoverAfter: 2 });
  try {
    await toState(agent, 'normal', 3000);
    svc.setHealthStatus(503);
    const e = await toState(agent, 'degraded', 1000);
    assert.equal(e.sampleKind, 'http_error');
    svc.setHealthStatus(200);
    await toState(agent, 'normal', 2000);
  } finally {
    await close();
  }
  // a port nobody listens on
  const free = await new Promise<number>((r) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => r(p));
    });
  });
  const agent2 = await startAgent(
    {
      log: { level: 'silent' },
      listen: { port: 0 },
      link: { peers: [{ name: 'x', probe: { kind: 'http', url: `http://127.0.0.1:${free}/healthz` }, intervalMs: 20, initialState: 'normal' }] },
    },
    { defaultMetrics: false },
  );
  try {
    const e = await toState(agent2, 'degraded', 2000);
    assert.equal(e.sampleKind, 'error');
    assert.ok(Number.isNaN(agent2.snapshot().snapshot.peers[0].lastRttMs));
  } finally {
    await agent2.stop();
  }
  assert.ok(samples.length > 0);
});

test('blackhole: unanswered probes count at the threshold, time out later uncounted; in-flight cap holds', async () => {
  const { line, agent, samples, ends, close } = await rig({ intervalMs: 20, timeoutMs: 300, maxInFlight: 3, recoverAfter: 3 });
  try {
    await toState(agent, 'normal', 3000);
    let maxInFlight = 0;
    const mon = agent.peers.get('cloud-b')!;
    const iv = setInterval(() => (maxInFlight = Math.max(maxInFlight, mon.inFlightCount)), 2);
    const skipped = () => agent.metrics.skipped.get().then((m) => m.values.reduce((a, v) => a + v.value, 0));
    const skipped0 = await skipped();
    line.setBlackhole('stall');
    const t0 = performance.now();
    const e = await toState(agent, 'degraded', 1000);
    assert.ok(performance.now() - t0 < 20 + DEGRADE + 60);
    assert.equal(e.sampleKind, 'slow');
    await sleep(700);
    clearInterval(iv);
    assert.ok(maxInFlight <= 3, `max in flight ${maxInFlight}`);
    assert.ok((await skipped()) > skipped0, 'ticks skipped at the cap');
    const timeouts = ends.filter((x) => x.result.outcome === 'timeout');
    assert.ok(timeouts.length >= 2);
    assert.ok(timeouts.every((x) => x.late), 'timeouts after the threshold were already counted');
    const ids = samples.map((s) => s.probeId);
    assert.equal(new Set(ids).size, ids.length);
    line.setBlackhole('off');
    await toState(agent, 'normal', 3000);
  } finally {
    await close();
  }
});

// --- starvation guard (agent/src/link/starvation.ts) -------------------------------------------

import { judgeSlowSample, nextCheckInMs, LatenessMonitor, type Scheduler } from '../../agent/src/link/starvation';
import { PeerMonitor } from '../../agent/src/link/peer-monitor';
import type { Prober, ProbeResult } from '../../agent/src/link/probe';

test('judgeSlowSample: slow only if slow after removing the stalled time and one resolution', () => {
  assert.equal(judgeSlowSample(80, 0, 50, 10), 'slow', 'no stall: as measured');
  assert.equal(judgeSlowSample(80, 30, 50, 10), 'starved', '80 - 30 - 10 = 40 < 50');
  assert.equal(judgeSlowSample(90, 30, 50, 10), 'slow', '90 - 30 - 10 = 50');
  assert.equal(judgeSlowSample(210, 40, 50, 10), 'slow', 'a 200 ms line stays slow under a 40 ms stall');
  assert.equal(judgeSlowSample(1000, 995, 50, 10), 'starved', 'a timeout while the agent was stalled');
  assert.equal(nextCheckInMs(50, 30, 50, 10), 40, 'the stall and the resolution have to be made up');
  assert.equal(nextCheckInMs(100, 1, 50, 10), 1, 'at least 1 ms');
});

/** A scheduler on a virtual clock: timers fire when the clock is advanced past them. */
function virtualScheduler(): Scheduler & { advance(ms: number, lateBy?: number): void; t: number } {
  const timers = new Map<number, { at: number; fn: () => void }>();
  let id = 0;
  const v = {
    t: 0,
    now: () => v.t,
    setTimeout: (fn: () => void, ms: number) => {
      timers.set(++id, { at: v.t + ms, fn });
      return id;
    },
    clearTimeout: (h: unknown) => void timers.delete(h as number),
    /** advance time; a timer due in this span fires `lateBy` ms late (a stall) */
    advance(ms: number, lateBy = 0) {
      const end = v.t + ms;
      for (;;) {
        const due = [...timers.entries()].filter(([, x]) => x.at <= end).sort((a, b) => a[1].at - b[1].at)[0];
        if (!due) break;
        timers.delete(due[0]);
        v.t = Math.min(end, due[1].at + lateBy);
        due[1].fn();
      }
      v.t = end;
    },
  };
  return v;
}

test('LatenessMonitor: records timer lateness as stalls, sums them over a window, sees a stall in progress', () => {
  const sch = virtualScheduler();
  const m = new LatenessMonitor({ intervalMs: 10, minStallMs: 2, scheduler: sch });
  m.start();
  sch.advance(100); // on time
  assert.equal(m.stalledMs(0, 100), 0);
  // the loop is blocked 40 ms: the timer due at 110 fires at 150
  sch.advance(50, 40);
  assert.equal(m.stalledMs(0, 150), 40);
  assert.equal(m.stalledMs(120, 150), 30, 'only the overlap with the window');
  assert.equal(m.stalledMs(150, 160), 0, 'after the stall');
  // a stall still in progress: the next timer (due 160) has not fired at 175
  sch.t = 175;
  assert.equal(m.stalledMs(150, 175), 15);
  sch.advance(0);
  // tiny lateness is noise
  const m2 = new LatenessMonitor({ intervalMs: 10, minStallMs: 2, scheduler: sch });
  m2.start();
  sch.advance(100, 1);
  assert.equal(m2.stalledMs(0, sch.t), 0);
  m.stop();
  m2.stop();
});

test('LatenessMonitor: forgets a stall once it ended more than horizonMs before the latest one', () => {
  const sch = virtualScheduler();
  const m = new LatenessMonitor({ intervalMs: 10, minStallMs: 2, horizonMs: 1000, scheduler: sch });
  m.start();
  sch.advance(100);
  sch.advance(50, 40); // stall [110, 150)
  sch.advance(950); // on time up to 1100
  sch.advance(50, 40); // stall [1110, 1150): the first one ended exactly horizonMs earlier and is kept
  assert.equal(m.stalledMs(0, 1150), 80);
  sch.advance(90); // on time up to 1240
  sch.advance(50, 40); // stall [1250, 1290): the first one is now older than the horizon
  assert.equal(m.stalledMs(0, 1290), 80, 'the stall that ended at 150 is forgotten, [1110, 1150) is kept');
  assert.equal(m.totalStalledMs, 120, 'the running total still counts every stall');
  m.stop();
});

/** A prober whose answers take `rttMs` of real time; returns its results in order. */
function fakeProber(rttMs: () => number): Prober {
  return {
    run: (signal) => new Promise<ProbeResult>((resolve) => {
      const t0 = performance.now();
      const t = setTimeout(() => resolve({ outcome: 'ok', rttMs: performance.now() - t0, status: 200 }), rttMs());
      signal.addEventListener('abort', () => {
        clearTimeout(t);
        resolve({ outcome: 'aborted', rttMs: performance.now() - t0 });
      });
    }),
    close() {},
  };
}

const peerCfg = (over: Partial<PeerConfig> = {}): PeerConfig => ({
  name: 'p', probe: { kind: 'tcp', address: '127.0.0.1:1' }, intervalMs: 100, timeoutMs: 1000, maxInFlight: 4,
  degradeThresholdMs: 50, degradeAfter: 1, recoverThresholdMs: 40, recoverAfter: 3, cooldownMs: 1000,
  starvationGuard: true, initialState: 'normal', ...over,
});

async function watch(m: PeerMonitor, ms: number): Promise<{ samples: SampleEvent[]; states: StateEvent[] }> {
  const samples: SampleEvent[] = [];
  const states: StateEvent[] = [];
  m.on('sample', (s) => samples.push(s));
  m.on('state', (s) => states.push(s));
  m.start();
  await sleep(ms);
  m.stop();
  return { samples, states };
}

test('starved agent: slow samples explained by injected lateness are not counted, the link stays normal', async () => {
  // Every answer takes 70 ms of wall time, but the agent reports it was stalled 60 ms of it.
  const lateness = { resolutionMs: 10, stalledMs: (from: number, to: number) => Math.min(60, to - from) };
  const m = new PeerMonitor(peerCfg(), { prober: fakeProber(() => 70), lateness });
  const { samples, states } = await watch(m, 700);
  assert.deepEqual(states, [], 'no transition');
  assert.ok(samples.length >= 3, `samples: ${samples.length}`);
  assert.ok(samples.every((s) => s.kind === 'starved' && !s.counted), JSON.stringify(samples.map((s) => s.kind)));
  assert.equal(m.state, 'normal');
});

test('guard off (starvationGuard: false): the same samples degrade the link (what the guard prevents)', async () => {
  const lateness = { resolutionMs: 10, stalledMs: (from: number, to: number) => Math.min(60, to - from) };
  const m = new PeerMonitor(peerCfg({ starvationGuard: false }), { prober: fakeProber(() => 70), lateness });
  const { states } = await watch(m, 400);
  assert.equal(states[0]?.to, 'degraded');
});

test('slow line while starved: still degraded (re-checked once the stall is made up)', async () => {
  // 200 ms answers, 30 ms stalled in every window: 200 - 30 - 10 >= 50.
  const lateness = { resolutionMs: 10, stalledMs: (from: number, to: number) => Math.min(30, to - from) };
  const m = new PeerMonitor(peerCfg(), { prober: fakeProber(() => 200), lateness });
  const t0 = performance.now();
  let at = NaN;
  m.on('state', (e) => { if (e.to === 'degraded' && Number.isNaN(at)) at = performance.now() - t0; });
  const { samples } = await watch(m, 400);
  assert.ok(at > 0 && at < 200, `degraded after ${at} ms: before the answer arrived (at 50 + 30 + 10 ms)`);
  const first = samples.find((s) => s.counted)!;
  assert.equal(first.kind, 'slow');
  assert.ok(first.elapsedMs >= 89, `counted at ${first.elapsedMs.toFixed(1)} ms, after the stall was made up`);
});

test('no stall: a slow answer counts at the threshold timer, as before', async () => {
  const lateness = { resolutionMs: 10, stalledMs: () => 0 };
  const m = new PeerMonitor(peerCfg(), { prober: fakeProber(() => 200), lateness });
  const { samples, states } = await watch(m, 250);
  assert.equal(states[0]?.to, 'degraded');
  const first = samples.find((s) => s.counted)!;
  assert.equal(first.kind, 'slow');
  assert.ok(first.elapsedMs < 80, `counted at ${first.elapsedMs.toFixed(1)} ms`);
});
