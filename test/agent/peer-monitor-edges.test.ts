// Peer monitor edges: the starvation judgement without a stall, and the shared lateness monitor's
// ownership (only the monitor that acquired it releases it).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { PeerConfig } from '../../agent/src/config';
import { PeerMonitor } from '../../agent/src/link/peer-monitor';
import type { Prober, ProbeResult } from '../../agent/src/link/probe';
import { judgeSlowSample, LatenessMonitor } from '../../agent/src/link/starvation';

test('judgeSlowSample: without a stall (0, or no measurement) the sample is judged as measured, the resolution is not subtracted', () => {
  // 55 ms against a 50 ms threshold: slow, although 55 - 10 (resolution) would be below it
  assert.equal(judgeSlowSample(55, 0, 50, 10), 'slow');
  assert.equal(judgeSlowSample(55, NaN, 50, 10), 'slow');
  assert.equal(judgeSlowSample(50, 0, 50, 10), 'slow');
  // any stall at all: the resolution is subtracted too
  assert.equal(judgeSlowSample(55, 0.001, 50, 10), 'starved');
});

const never: Prober = { run: (signal) => new Promise<ProbeResult>((resolve) => signal.addEventListener('abort', () => resolve({ outcome: 'aborted', rttMs: 0 }))), close() {} };
const cfg: PeerConfig = {
  name: 'p', probe: { kind: 'tcp', address: '127.0.0.1:1' }, intervalMs: 60_000, timeoutMs: 1000, maxInFlight: 1,
  degradeThresholdMs: 50, degradeAfter: 1, recoverThresholdMs: 40, recoverAfter: 3, cooldownMs: 1000, starvationGuard: true, initialState: 'normal',
};
const running = (m: LatenessMonitor): boolean => (m as unknown as { running: boolean }).running;

test('lateness monitor: a peer monitor given the shared monitor does not release it; the one that acquired it does', () => {
  const a = new PeerMonitor(cfg, { prober: never });
  a.start();
  const shared = (a as unknown as { lateness: LatenessMonitor }).lateness;
  assert.ok(shared && running(shared));
  const b = new PeerMonitor({ ...cfg, name: 'q' }, { prober: never, lateness: shared });
  b.start();
  b.stop();
  assert.equal(running(shared), true, "b's stop must not stop a's lateness monitor");
  const off = new PeerMonitor({ ...cfg, name: 'r', starvationGuard: false }, { prober: never });
  off.start();
  off.stop();
  assert.equal(running(shared), true, 'a monitor without the guard owns no lateness monitor');
  a.stop();
  assert.equal(running(shared), false, 'the last owner stops it');
  // a monitor stopped before it ever started releases nothing either
  const c = new PeerMonitor(cfg, { prober: never });
  c.stop();
  c.start();
  assert.equal(c.inFlightCount, 0, 'a stopped monitor does not start');
});

test('LatenessMonitor.stop cancels its pending timer; stop before start cancels nothing', () => {
  const pending = new Set<number>();
  let id = 0;
  const sched = {
    now: () => 0,
    setTimeout: () => (pending.add(++id), id),
    clearTimeout: (h: unknown) => void pending.delete(h as number),
  };
  const m = new LatenessMonitor({ scheduler: sched });
  m.stop();
  assert.equal(pending.size, 0);
  m.start();
  assert.equal(pending.size, 1);
  m.stop();
  assert.equal(pending.size, 0, 'no timer left behind');
  assert.equal(m.stalledMs(0, 1000), 0);
});
