// SnapshotPublisher without HTTP: seq numbering, optional sections, long-poll waiters (answer,
// timeout, cancel, stop), the periodic timer, invalid-number reporting.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as promClient from 'prom-client';
import { decodeSnapshot, type InstanceRecord } from '../../agent/src/snapshot/codec';
import { SnapshotPublisher, type Published } from '../../agent/src/snapshot/publisher';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const peers = [{ name: 'cloud-b', state: 'normal' as const, avgRttMs: 5, lastRttMs: 6, degradeStreak: 0, recoverStreak: 0, lastSampleAtMs: 7 }];
const inst: InstanceRecord = {
  service: 'llm', addr: '10.0.0.1:8000', peer: '', healthy: true, reason: 'ok', rho: 0.5, esMs: 80, es2Ms2: 12800, lambdaPerS: 6.25,
  queueDepth: 2, p50Ms: 60, p99Ms: 400, baselineP99Ms: 380, gpuUtil: NaN, dataAgeMs: 120, slots: 4,
};

test('seq: boot time in ms x 1000, +1 per publication; the given bootId; sections only when collected', () => {
  let instances: InstanceRecord[] | undefined;
  const reasons: string[] = [];
  const pub = new SnapshotPublisher({ publishIntervalMs: 60_000, collectPeers: () => peers, collectInstances: () => instances, now: () => 1_700_000_000_000, bootId: 7, onPublish: (_p, r) => reasons.push(r) });
  try {
    assert.equal(pub.current.snapshot.seq, 1_700_000_000_000_000);
    assert.equal(pub.current.snapshot.bootId, 7);
    assert.equal(pub.current.snapshot.generatedAtMs, 1_700_000_000_000);
    assert.equal(decodeSnapshot(pub.current.binary).instances, undefined, 'no INSTANCES section while none are collected');
    instances = [];
    const p = pub.publish('manual');
    assert.equal(p.snapshot.seq, 1_700_000_000_000_001);
    assert.deepEqual(decodeSnapshot(p.binary).instances, []);
    assert.equal(pub.publish('state_change').snapshot.seq, 1_700_000_000_000_002);
    assert.deepEqual(reasons, ['initial', 'manual', 'state_change']);
    assert.equal(JSON.parse(pub.current.json).seq, 1_700_000_000_000_002);
  } finally {
    pub.stop();
  }
});

test('wait: answered at once unless `after` is the current seq and waitMs > 0; then on the next publication', async () => {
  const pub = new SnapshotPublisher({ publishIntervalMs: 60_000, collectPeers: () => peers });
  try {
    const seq = String(pub.current.snapshot.seq);
    const got: Published[] = [];
    pub.wait(undefined, 1000, (p) => got.push(p));
    pub.wait('123', 1000, (p) => got.push(p));
    pub.wait(seq, 0, (p) => got.push(p));
    assert.equal(got.length, 3);
    assert.equal(pub.waiterCount, 0);
    const later: Published[] = [];
    pub.wait(seq, 5000, (p) => later.push(p));
    pub.wait(seq, 5000, (p) => later.push(p));
    assert.equal(pub.waiterCount, 2);
    assert.equal(later.length, 0);
    const next = pub.publish('state_change');
    assert.deepEqual(later, [next, next]);
    assert.equal(pub.waiterCount, 0);
  } finally {
    pub.stop();
  }
});

test('wait: times out after waitMs with the current snapshot, once; cancel drops the waiter', async () => {
  const pub = new SnapshotPublisher({ publishIntervalMs: 60_000, collectPeers: () => peers });
  try {
    const seq = String(pub.current.snapshot.seq);
    const got: Published[] = [];
    pub.wait(seq, 30, (p) => got.push(p));
    await sleep(80);
    assert.deepEqual(got, [pub.current]);
    assert.equal(pub.waiterCount, 0);
    pub.publish('manual');
    assert.equal(got.length, 1, 'a timed-out waiter is not answered again');
    const seq2 = String(pub.current.snapshot.seq);
    const cancelled: Published[] = [];
    const cancel = pub.wait(seq2, 30, (p) => cancelled.push(p));
    cancel();
    assert.equal(pub.waiterCount, 0);
    pub.publish('manual');
    await sleep(60);
    assert.equal(cancelled.length, 0);
  } finally {
    pub.stop();
  }
});

test('stop: answers the held waiters, then every wait at once; no periodic publication after it', async () => {
  let n = 0;
  const pub = new SnapshotPublisher({ publishIntervalMs: 20, collectPeers: () => peers, onPublish: () => n++ });
  pub.start();
  for (let i = 0; i < 100 && n < 3; i++) await sleep(20);
  assert.ok(n >= 3, `periodic publications: ${n - 1}`);
  const seq = String(pub.current.snapshot.seq);
  const got: Published[] = [];
  pub.wait(seq, 10_000, (p) => got.push(p));
  pub.stop();
  assert.equal(got.length, 1);
  pub.wait(String(pub.current.snapshot.seq), 10_000, (p) => got.push(p));
  assert.equal(got.length, 2, 'after stop a wait is answered at once');
  const at = n;
  await sleep(60);
  assert.equal(n, at, 'no publication after stop');
});

test('periodic: a manual publication re-arms the timer (no periodic one right after it); none before start()', async () => {
  const reasons: string[] = [];
  const pub = new SnapshotPublisher({ publishIntervalMs: 400, collectPeers: () => peers, onPublish: (_p, r) => reasons.push(r) });
  try {
    await sleep(450);
    assert.deepEqual(reasons, ['initial'], 'not started: nothing periodic');
    pub.start();
    await sleep(250);
    pub.publish('manual');
    await sleep(250); // 500 ms after start, 250 after the manual one
    assert.deepEqual(reasons, ['initial', 'manual']);
    await sleep(300);
    assert.deepEqual(reasons, ['initial', 'manual', 'periodic']);
  } finally {
    pub.stop();
  }
});

test('invalid numbers: counted by field in the registry and passed to onInvalid; none without a bad number', async () => {
  const registry = new promClient.Registry();
  const seen: string[] = [];
  let instances = [inst];
  const pub = new SnapshotPublisher({ publishIntervalMs: 60_000, collectPeers: () => peers, collectInstances: () => instances, registry, onInvalid: (i) => seen.push(`${i.addr} ${i.field}`) });
  try {
    const metric = async (): Promise<Array<[string, number]>> => (await registry.getSingleMetric('switchyard_agent_snapshot_invalid_numbers_total')!.get()).values.map((v) => [String(v.labels.field), v.value]);
    assert.deepEqual(await metric(), []);
    instances = [{ ...inst, rho: -1 }];
    pub.publish('manual');
    pub.publish('manual');
    assert.deepEqual(await metric(), [['rho', 2]]);
    assert.deepEqual(seen, ['10.0.0.1:8000 rho', '10.0.0.1:8000 rho']);
    // a second publisher on the same registry shares the counter
    const again = new SnapshotPublisher({ publishIntervalMs: 60_000, collectPeers: () => peers, collectInstances: () => instances, registry });
    again.stop();
    assert.deepEqual(await metric(), [['rho', 3]]);
  } finally {
    pub.stop();
  }
});
