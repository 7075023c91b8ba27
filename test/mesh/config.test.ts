// The mesh's config (field-named errors, the shipped default mode local) and the pool message
// (a CRC-framed document; a malformed one or another pool's records are rejected, not served).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { ConfigError, resolveConfig, startAgent } from '../../agent/src';
import { decodePoolMessage, encodePoolMessage } from '../../agent/src/mesh/message';
import { poolSubject } from '../../agent/src/mesh/schema';
import type { InstanceRecord } from '../../agent/src/snapshot/codec';

const inference = { services: [{ name: 'llm', kind: 'vllm', instances: { static: ['10.0.0.1:8000'] } }] };
const nats = { servers: ['nats://127.0.0.1:4222'] };

function problems(input: Record<string, unknown>): string[] {
  try {
    resolveConfig({ link: { peers: [] }, ...input });
  } catch (e) {
    assert.ok(e instanceof ConfigError, String(e));
    return e.problems;
  }
  return [];
}

test('mesh config: defaults, and errors that name the field', () => {
  const c = resolveConfig({ link: { peers: [] }, inference, mesh: { mode: 'subscriber', nats } });
  assert.equal(c.mesh!.fallbackAfterMs, 3000);
  assert.equal(c.mesh!.nats!.subjectPrefix, 'switchyard.pool');
  const col = resolveConfig({ link: { peers: [] }, inference, mesh: { mode: 'collector', nats, etcd: { endpoints: ['http://127.0.0.1:2379'] } } });
  assert.equal(col.mesh!.etcd!.leaseTtlS, 1, 'a crashed leader is replaced after about 1 s');
  assert.equal(col.mesh!.etcd!.prefix, '/switchyard/mesh/');
  assert.equal(col.mesh!.heartbeatMs, 100, 'a silent leader is taken over after 3 heartbeats: 300 ms');
  assert.equal(c.mesh!.heartbeatMs, 100);
  assert.equal(resolveConfig({ link: { peers: [] }, inference }).mesh, undefined, 'no mesh key: mode local');

  assert.deepEqual(problems({ inference, mesh: { mode: 'subscriber' } }), ['mesh.nats: required when mode is "subscriber"']);
  assert.deepEqual(problems({ inference, mesh: { mode: 'collector', nats } }), ['mesh.etcd: required when mode is "collector" (the leader is elected through an etcd lease)']);
  assert.deepEqual(problems({ mesh: { mode: 'subscriber', nats } }), ['mesh.mode: "subscriber" needs inference.services (the pools it collects or subscribes to)']);
  assert.match(problems({ inference, mesh: { mode: 'subscriber', nats, fallbackAfterMs: 1500 } })[0], /^mesh\.fallbackAfterMs: must be > 2 x inference\.scrapeIntervalMs/);
  assert.match(problems({ inference, mesh: { mode: 'peer', nats } })[0], /^mesh\.mode: must be one of "local", "collector", "subscriber"/);
  assert.match(problems({ inference, mesh: { mode: 'subscriber', nats: { servers: ['http://x:4222'] } } })[0], /^mesh\.nats\.servers\[0\]: must match/);
  assert.match(problems({ inference, mesh: { mode: 'collector', nats, etcd: { endpoints: ['http://e:2379'], leaseTtlS: 0 } } })[0], /^mesh\.etcd\.leaseTtlS: /);
  assert.match(problems({ inference, mesh: { mode: 'subscriber', nats, bogus: 1 } })[0], /^mesh\.bogus: unknown field/);
  assert.match(problems({ inference, mesh: { mode: 'subscriber', nats, heartbeatMs: 10 } })[0], /^mesh\.heartbeatMs: /);
  assert.deepEqual(problems({ inference, mesh: { mode: 'subscriber', nats, heartbeatMs: 500 } }), ['mesh.heartbeatMs: the takeover window (3 x heartbeatMs = 1500 ms) must be < fallbackAfterMs / 2 (1500 ms: a failover would look like an outage)']);
  assert.deepEqual(problems({ inference, mesh: { mode: 'collector', nats, heartbeatMs: 400, fallbackAfterMs: 5000, etcd: { endpoints: ['http://e:2379'] } } }), ['mesh.heartbeatMs: the takeover window (3 x heartbeatMs = 1200 ms) must be < etcd.leaseTtlS (1000 ms), or the lease expiry always comes first']);
  assert.deepEqual(problems({ inference, mesh: { mode: 'collector', nats, heartbeatMs: 400, fallbackAfterMs: 5000, etcd: { endpoints: ['http://e:2379'], leaseTtlS: 2 } } }), []);
});

test('an agent without a mesh key runs mode local (scrapes itself, no mesh runtime)', async () => {
  const a = await startAgent({ listen: { host: '127.0.0.1', port: 0 }, link: { peers: [] }, inference } as never, { logger: pino({ level: 'silent' }), defaultMetrics: false });
  try {
    assert.equal(a.mesh, undefined);
    const st = (await (await fetch(`${a.url}/status?format=json`)).json()) as Record<string, unknown>;
    assert.equal(st.mesh, undefined);
    // the record appears with the first scrape's outcome (a blackholed address answers at the
    // scrape timeout, a refused one at once): wait for a publication that carries it
    const deadline = Date.now() + 10_000;
    while (!a.snapshot().snapshot.instances?.length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    assert.equal(a.snapshot().snapshot.instances?.length, 1, 'its own scrape records');
  } finally {
    await a.stop();
  }
});

function rec(addr: string, over: Partial<InstanceRecord> = {}): InstanceRecord {
  return { service: 'llm', addr, peer: '', healthy: true, reason: 'ok', rho: 0.5, esMs: 100, es2Ms2: 20000, lambdaPerS: 5, queueDepth: 1, p50Ms: 90, p99Ms: 300, baselineP99Ms: 300, gpuUtil: NaN, dataAgeMs: 120, slots: 8, slotsSource: 'exporter', esSource: 'measured', ...over };
}

test('pool message: round trip of INSTANCES + LLM records; malformed or foreign messages are rejected', () => {
  const instances = [rec('10.0.0.1:8000'), rec('10.0.0.2:8000', { healthy: false, reason: 'unreachable' })];
  const llm = [{ service: 'llm', addr: '10.0.0.1:8000', prefillMsPerToken: 0.25, decodeMsPerToken: 12, kvCacheUsage: 0.5, kvSeqs: 40, maxLoras: 2, models: [{ name: 'llama', flags: 1 }] }];
  const buf = encodePoolMessage({ leaderId: 7, seq: 42, generatedAtMs: 1000, peer: '', service: 'llm', instances, llm });
  const m = decodePoolMessage(buf, '', 'llm');
  assert.equal(m.leaderId, 7);
  assert.equal(m.seq, 42);
  assert.deepEqual(m.instances.map((r) => [r.addr, r.healthy, r.reason, r.slots, r.dataAgeMs]), [['10.0.0.1:8000', true, 'ok', 8, 120], ['10.0.0.2:8000', false, 'unreachable', 8, 120]]);
  assert.ok(Number.isNaN(m.instances[0].gpuUtil), 'unknown stays unknown');
  assert.equal(m.llm![0].kvSeqs, 40);
  assert.throws(() => decodePoolMessage(buf, '', 'other'), /record llm\/10\.0\.0\.1:8000 .* on the subject of other/);
  assert.throws(() => decodePoolMessage(buf, 'cloud-b', 'llm'), /peer/);
  const bad = Buffer.from(buf);
  bad[bad.length - 3] ^= 0xff;
  assert.throws(() => decodePoolMessage(bad, '', 'llm'), /CRC/);
  assert.throws(() => decodePoolMessage(buf.subarray(0, 10), '', 'llm'), /truncated/);
  const orphan = encodePoolMessage({ leaderId: 7, seq: 43, generatedAtMs: 1000, peer: '', service: 'llm', instances: instances.slice(1), llm });
  assert.throws(() => decodePoolMessage(orphan, '', 'llm'), /LLM record llm\/10\.0\.0\.1:8000 has no INSTANCES record/);
  assert.equal(poolSubject('switchyard.pool', '', 'llm'), 'switchyard.pool._.llm');
  assert.equal(poolSubject('switchyard.pool', 'cloud-b', 'llm'), 'switchyard.pool.cloud-b.llm');
});
