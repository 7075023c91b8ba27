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
