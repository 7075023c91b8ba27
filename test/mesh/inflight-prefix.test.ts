// Prefix placements across proxies, the agent's side (agent/src/mesh/prefix-records.ts,
// inflight.ts, inflight-exchange.ts; docs/mesh.md "Prefix placements"): the version-2 report and
// answer, each proxy given the OTHER proxies' records once, the bounds (per report, per answer,
// the log), malformed records counted and dropped, and the exchange between two agents over a real
// NATS server in both exchange modes.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type NatsConnection } from 'nats';
import { decodeInflight, encodeInflight, InflightAggregator, KIND_ANSWER, KIND_REPORT } from '../../agent/src/mesh/inflight';
import { InflightExchange, PREFIX_PENDING_FACTOR } from '../../agent/src/mesh/inflight-exchange';
import { INFLIGHT_DEFAULTS } from '../../agent/src/mesh/inflight-schema';
import { decodePrefixTrailer, encodePrefixTrailer, PrefixLog, type PrefixRecord } from '../../agent/src/mesh/prefix-records';
import { startNats, type NatsServer } from './servers';
import { Registry } from 'prom-client';
import { inflightMetrics } from '../../agent/src/api/inflight';

const rec = (addr: string, hash: bigint, service = 'llm'): PrefixRecord => ({ service, addr, hash });
const report = (id: number, prefix?: PrefixRecord[]): Buffer => encodeInflight(KIND_REPORT, 50, id, 1, [['a:1', 1]], prefix);
const hashesOf = (b: Buffer): bigint[] => (decodeInflight(b).prefix ?? []).map((r) => r.hash);

function agg(over: Partial<ConstructorParameters<typeof InflightAggregator>[0]> = {}) {
  const t = 1000;
  return new InflightAggregator({ maxProxies: 16, maxInstances: 100, expireReports: 4, now: () => t, ...over });
}

test('format: a version-2 document round-trips its placements; malformed records are counted and dropped; framing errors refuse it', () => {
  const b = report(7, [rec('a:1', 11n), rec('b:2', 12n), rec('a:1', 13n, 'chat')]);
  assert.equal(b[0], 2);
  const d = decodeInflight(b);
  assert.deepEqual(d.prefix, [rec('a:1', 11n), rec('b:2', 12n), rec('a:1', 13n, 'chat')]);
  assert.equal(d.prefixBad, 0);
  // a record with hash 0 and one with an address index outside its table: dropped, counted
  const t = encodePrefixTrailer([rec('a:1', 11n), rec('a:1', 12n)]);
  t.writeBigUInt64LE(0n, t.length - 20);
  t.writeUInt16LE(9, t.length - 2);
  const bad = decodePrefixTrailer(t, 0);
  assert.deepEqual([bad.records.length, bad.bad, bad.end], [0, 2, t.length]);
  for (let n = 0; n < b.length; n++) assert.throws(() => decodeInflight(b.subarray(0, n)), `cut at ${n}`);
  assert.throws(() => decodeInflight(Buffer.concat([b, Buffer.alloc(1)])), /1 bytes after the last record/);
  // version 1 stays version 1: no trailer
  assert.equal(decodeInflight(encodeInflight(KIND_REPORT, 50, 7, 1, [['a:1', 1]])).prefix, undefined);
});

test('each proxy is given the other proxies\' placements once, never its own; a version-1 report gets a version-1 answer', () => {
  const a = agg();
  const p1 = a.report(report(0, []));
  const p2 = a.report(report(0, []));
  assert.ok(p1.ok && p2.ok);
  const r1 = a.report(report(p1.proxyId, [rec('a:1', 1n), rec('a:1', 2n)]));
  assert.ok(r1.ok);
  assert.deepEqual(hashesOf(r1.answer), [], 'its own records are not given back');
  const r2 = a.report(report(p2.proxyId, [rec('a:1', 3n)]));
  assert.ok(r2.ok);
  assert.deepEqual(hashesOf(r2.answer), [1n, 2n]);
  const r2b = a.report(report(p2.proxyId, []));
  assert.ok(r2b.ok);
  assert.deepEqual(hashesOf(r2b.answer), [], 'given once');
  const r1b = a.report(report(p1.proxyId, []));
  assert.ok(r1b.ok);
  assert.deepEqual(hashesOf(r1b.answer), [3n]);
  const v1 = a.report(encodeInflight(KIND_REPORT, 50, p1.proxyId, 1, [['a:1', 1]]));
  assert.ok(v1.ok);
  assert.equal(v1.answer[0], 1);
  assert.equal(decodeInflight(v1.answer).kind, KIND_ANSWER);
  assert.deepEqual([a.stats.prefixIn, a.stats.prefixOut], [3, 3]);
});

test('metrics: switchyard_inflight_prefix_records_total by direction', async () => {
  const a = agg({ isInstance: (x) => x === 'a:1' });
  const reg = new Registry();
  inflightMetrics(reg, a);
  const p1 = a.report(report(0, []));
  const p2 = a.report(report(0, []));
  assert.ok(p1.ok && p2.ok);
  a.report(report(p1.proxyId, [rec('a:1', 1n), rec('b:1', 2n)]));
  a.report(report(p2.proxyId, []));
  const text = await reg.metrics();
  for (const [d, n] of [['in', 1], ['out', 1], ['ignored', 1], ['lost', 0]] as const) assert.match(text, new RegExp(`switchyard_inflight_prefix_records_total\\{direction="${d}"\\} ${n}\\b`));
});

test('bounds: the live fleet only, at most prefixRecords per report and per answer (the rest follows), a log of prefixLog records', () => {
  const a = agg({ prefixRecords: 2, prefixLog: 4, isInstance: (x) => x !== 'gone:1' });
  const p1 = a.report(report(0, []));
  const p2 = a.report(report(0, []));
  assert.ok(p1.ok && p2.ok);
  a.report(report(p1.proxyId, [rec('gone:1', 1n), rec('a:1', 2n), rec('a:1', 3n), rec('a:1', 4n)]));
  assert.deepEqual([a.stats.prefixIn, a.stats.prefixIgnored], [2, 2], 'not an instance, and over the per-report bound');
  a.report(report(p1.proxyId, [rec('a:1', 5n), rec('a:1', 6n)]));
  const r = a.report(report(p2.proxyId, []));
  assert.ok(r.ok);
  assert.deepEqual(hashesOf(r.answer), [2n, 3n], 'at most prefixRecords per answer, the oldest first');
  const r2 = a.report(report(p2.proxyId, []));
  assert.ok(r2.ok);
  assert.deepEqual(hashesOf(r2.answer), [5n, 6n]);
  const log = new PrefixLog(4);
  log.append(1, [2n, 3n, 4n, 5n, 6n, 7n].map((h) => rec('a:1', h)));
  assert.deepEqual(log.since(0, 2, 10).records.map((x) => x.hash), [4n, 5n, 6n, 7n]);
  assert.equal(log.lost, 2, 'a proxy slower than the log loses the overwritten records');
});

let nats: NatsServer;
const conns: NatsConnection[] = [];
before(async () => { nats = await startNats(); });
after(async () => {
  for (const c of conns) await c.close();
  await nats?.dispose();
});

async function until(f: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!f()) {
    if (Date.now() > end) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

for (const mode of ['leader', 'all'] as const) {
  test(`two agents over NATS (${mode}): a placement reported to one agent reaches the other agent's proxies, bounded, its own proxies not given it twice`, async () => {
    const pools = [{ peer: '', service: 'llm' }];
    const poolOf = (x: string): string | undefined => (x.startsWith('10.') ? '_/llm' : undefined);
    const mk = async (id: number) => {
      const nc = await connect({ servers: nats.url });
      conns.push(nc);
      const g = agg({ isInstance: (x) => poolOf(x) !== undefined });
      const cfg = { ...INFLIGHT_DEFAULTS, exchange: mode };
      const ex = new InflightExchange(g, cfg, { id, subjectPrefix: `t${mode}`, connection: () => nc, pools, poolOf, isLeader: () => id === 1, isCandidate: () => id === 1 });
      return { g, ex };
    };
    const A = await mk(1);
    const B = await mk(2);
    const tick = (): void => { A.ex.tick(); B.ex.tick(); };
    tick(); // subscribe (and, leader mode, A starts relaying)
    await Promise.all(conns.slice(-2).map((c) => c.flush()));
    const pa = A.g.report(report(0, []));
    const pb = B.g.report(report(0, []));
    assert.ok(pa.ok && pb.ok);
    A.g.report(report(pa.proxyId, [rec('10.0.0.1:8000', 77n), rec('other:1', 78n)]));
    await until(() => { tick(); return B.g.stats.prefixIn > 0; }, 3000, 'B takes A\'s placement');
    const r = B.g.report(report(pb.proxyId, []));
    assert.ok(r.ok);
    assert.deepEqual(hashesOf(r.answer), [77n], 'the pool\'s instances only');
    // A's own proxy: in leader mode the relay brings A's record back once; never a second time from the log
    await new Promise((res) => setTimeout(res, 60));
    tick();
    const own = A.g.report(report(pa.proxyId, []));
    assert.ok(own.ok);
    const again = hashesOf(own.answer);
    assert.ok(mode === 'leader' ? again.length <= 1 : again.length === 0, `A's proxy given its own record: ${again.join(',')}`);
    assert.ok(A.ex.stats.prefixOut >= 1);
    if (mode === 'leader') assert.ok(A.ex.stats.prefixRelayed >= 1, 'the leader relays');
    await A.ex.stop();
    await B.ex.stop();
  });
}

test('NATS away: the placements waiting to go out stay bounded (prefixRecords × PREFIX_PENDING_FACTOR), the oldest dropped and counted', () => {
  const pools = [{ peer: '', service: 'llm' }];
  const poolOf = (x: string): string | undefined => (x.startsWith('10.') ? '_/llm' : undefined);
  const g = agg({ isInstance: (x) => poolOf(x) !== undefined, prefixRecords: 2 });
  const ex = new InflightExchange(g, { ...INFLIGHT_DEFAULTS, exchange: 'leader' }, { id: 1, subjectPrefix: 'taway', connection: () => undefined, pools, poolOf });
  const first = g.report(report(0, []));
  assert.ok(first.ok);
  let h = 1n;
  for (let k = 0; k < 10; k++) {
    const r = g.report(report(first.proxyId, [rec('10.0.0.1:8000', h++), rec('10.0.0.2:8000', h++)]));
    assert.ok(r.ok);
    ex.tick(); // no connection: nothing goes out
  }
  // 20 reported, at most 2 × 4 wait
  assert.equal(ex.stats.prefixDropped, 20 - 2 * PREFIX_PENDING_FACTOR);
  assert.equal(ex.stats.prefixOut, 0);
});
