// Mesh-wide in-flight, the agent's side (agent/src/mesh/inflight.ts, agent/src/api/inflight.ts):
// the report/answer format, the answer = the other proxies' counts, expiry, the bounds (proxies,
// instances of the live fleet, body size), and the endpoint on a real agent.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { startAgent } from '../../agent/src';
import {
  decodeInflight, encodeInflight, HEADER_BYTES, InflightAggregator, INFLIGHT_CONTENT_TYPE, KIND_ANSWER, KIND_REPORT, MIN_EXPIRE_MS,
} from '../../agent/src/mesh/inflight';
import { ConfigError, resolveConfig } from '../../agent/src/config';

const report = (id: number, counts: Record<string, number>, intervalMs = 50): Buffer => encodeInflight(KIND_REPORT, intervalMs, id, 1, Object.entries(counts));
const answerOf = (b: Buffer): Record<string, number> => Object.fromEntries(decodeInflight(b).counts);

function agg(over: Partial<ConstructorParameters<typeof InflightAggregator>[0]> = {}) {
  let t = 1000;
  const a = new InflightAggregator({ maxProxies: 16, maxInstances: 100, expireReports: 4, now: () => t, ...over });
  return { a, advance: (ms: number) => { t += ms; } };
}

test('format: a report round-trips; zero counts and over-long addresses stay out; malformed bodies are refused by name', () => {
  const b = encodeInflight(KIND_REPORT, 50, 7, 123, [['10.0.0.1:8000', 3], ['10.0.0.2:8000', 0], ['x'.repeat(256), 5]]);
  assert.equal(b.length, HEADER_BYTES + 5 + 13);
  const d = decodeInflight(b);
  assert.deepEqual([d.kind, d.intervalMs, d.proxyId, d.atMs], [KIND_REPORT, 50, 7, 123]);
  assert.deepEqual([...d.counts], [['10.0.0.1:8000', 3]]);
  assert.throws(() => decodeInflight(Buffer.alloc(3)), /shorter than the 18-byte header/);
  const v = Buffer.from(b); v[0] = 3;
  assert.throws(() => decodeInflight(v), /version 3/);
  const v2 = Buffer.from(b); v2[0] = 2; // version 2 without its prefix trailer
  assert.throws(() => decodeInflight(v2), /prefix trailer is cut off/);
  assert.throws(() => decodeInflight(b.subarray(0, b.length - 1)), /record 0 of 1 is cut off/);
  assert.throws(() => decodeInflight(Buffer.concat([b, Buffer.alloc(1)])), /1 bytes after the last record/);
});

test('the answer is the other proxies\' counts: the sum over live reports minus the reporter\'s own', () => {
  const { a } = agg();
  const r1 = a.report(report(0, { 'a:1': 2, 'b:1': 1 }));
  assert.ok(r1.ok);
  assert.notEqual(r1.proxyId, 0, 'the agent gives a new proxy its id');
  assert.deepEqual(answerOf(r1.answer), {}, 'alone: nothing from others');
  assert.equal(decodeInflight(r1.answer).kind, KIND_ANSWER);
  assert.equal(decodeInflight(r1.answer).proxyId, r1.proxyId);
  const r2 = a.report(report(0, { 'a:1': 5 }));
  assert.ok(r2.ok);
  assert.notEqual(r2.proxyId, r1.proxyId);
  assert.deepEqual(answerOf(r2.answer), { 'a:1': 2, 'b:1': 1 });
  // proxy 1 reports again with its id: its previous report is replaced, not added
  const r3 = a.report(report(r1.proxyId, { 'a:1': 1 }));
  assert.ok(r3.ok);
  assert.equal(r3.proxyId, r1.proxyId);
  assert.deepEqual(answerOf(r3.answer), { 'a:1': 5 });
  assert.equal(a.proxyCount, 2);
  assert.deepEqual(Object.fromEntries(a.localTotals()), { 'a:1': 6 });
  // another agent's sums (NATS) are added for everyone
  assert.ok(a.agentTotals('agent-9/_/llm', new Map([['a:1', 4], ['c:1', 2]]), 1000, 8));
  const r4 = a.report(report(r2.proxyId, { 'a:1': 5 }));
  assert.ok(r4.ok);
  assert.deepEqual(answerOf(r4.answer), { 'a:1': 5, 'c:1': 2 });
  a.dropAgent('agent-9/_/llm');
  const r5 = a.report(report(r2.proxyId, { 'a:1': 5 }));
  assert.ok(r5.ok);
  assert.deepEqual(answerOf(r5.answer), { 'a:1': 1 });
});

test('a silent proxy\'s report expires after expireReports of its intervals (at least 100 ms); a silent agent after its expiry', () => {
  const { a, advance } = agg();
  const r1 = a.report(report(0, { 'a:1': 3 }, 50));
  assert.ok(r1.ok);
  advance(150); // < 4 x 50
  const r2 = a.report(report(0, { 'a:1': 1 }, 50));
  assert.ok(r2.ok);
  assert.deepEqual(answerOf(r2.answer), { 'a:1': 3 });
  advance(60); // proxy 1's report is 210 ms old > 200
  const r3 = a.report(report(r2.proxyId, { 'a:1': 1 }, 50));
  assert.ok(r3.ok);
  assert.deepEqual(answerOf(r3.answer), {}, 'the silent proxy no longer counts');
  assert.equal(a.stats.expiredProxies, 1);
  assert.equal(a.proxyCount, 1);
  // a 20 ms interval still stands MIN_EXPIRE_MS
  const r4 = a.report(report(0, { 'b:1': 2 }, 20));
  assert.ok(r4.ok);
  advance(MIN_EXPIRE_MS - 10);
  const r5 = a.report(report(r2.proxyId, {}, 50));
  assert.ok(r5.ok);
  assert.deepEqual(answerOf(r5.answer), { 'b:1': 2 });
  assert.ok(a.agentTotals('x', new Map([['c:1', 1]]), 300, 8));
  advance(299);
  a.sweep(undefined, true);
  assert.equal(a.agentCount, 1);
  advance(2);
  a.sweep(undefined, true);
  assert.equal(a.agentCount, 0);
});

test('bounds: at most maxProxies reports (503 beyond), the live fleet\'s addresses only, at most maxInstances of them; malformed reports 400', () => {
  const fleet = new Set(['a:1', 'b:1', 'c:1']);
  const { a } = agg({ maxProxies: 2, maxInstances: 2, isInstance: (x) => fleet.has(x) });
  const r1 = a.report(report(0, { 'a:1': 1, 'zz:9': 50 }));
  assert.ok(r1.ok);
  assert.equal(r1.ignored, 1, 'an address outside the fleet is ignored');
  const r2 = a.report(report(0, { 'b:1': 1, 'c:1': 1 }));
  assert.ok(r2.ok);
  assert.equal(r2.ignored, 1, 'c:1 would be a third address summed');
  assert.deepEqual(Object.fromEntries(a.localTotals()), { 'a:1': 1, 'b:1': 1 });
  const r3 = a.report(report(0, { 'a:1': 1 }));
  assert.deepEqual(r3.ok ? 'ok' : [r3.status, r3.error], [503, '2 proxies report already (inflight.maxProxies)']);
  // a known proxy still reports at the cap
  assert.ok(a.report(report(r1.proxyId, { 'a:1': 2 })).ok);
  const bad = a.report(Buffer.from('nonsense-nonsense-nonsense'));
  assert.equal(bad.ok, false);
  assert.equal(bad.ok ? 0 : bad.status, 400);
  const ans = a.report(encodeInflight(KIND_ANSWER, 0, 1, 1, []));
  assert.equal(ans.ok ? 0 : ans.status, 400, 'an answer is not a report');
  assert.ok(!a.agentTotals('new-agent', new Map([['a:1', 1]]), 1000, 0), 'maxAgents');
});

test('config: inflight defaults, field-named errors', () => {
  const c = resolveConfig({});
  assert.deepEqual(c.inflight, { enabled: true, maxProxies: 4096, maxInstances: 100000, expireReports: 4, maxBodyBytes: 1048576, exchangeMs: 20, agentExpireMs: 1000, maxAgents: 4096, exchange: 'leader', prefixRecords: 4096, prefixLog: 65536 });
  assert.equal(resolveConfig({ inflight: { exchange: 'all' } }).inflight.exchange, 'all');
  assert.throws(() => resolveConfig({ inflight: { exchange: 'ring' } as never }), (e: unknown) => e instanceof ConfigError && /inflight\.exchange/.test(e.message));
  assert.throws(() => resolveConfig({ inflight: { maxProxies: 0 } }), (e: unknown) => e instanceof ConfigError && /inflight\.maxProxies: must be >= 1/.test(e.message));
  assert.throws(() => resolveConfig({ inflight: { exchangeMs: 500 } }), (e: unknown) => e instanceof ConfigError && /inflight\.agentExpireMs: must be >= 3 x inflight\.exchangeMs/.test(e.message));
  assert.throws(() => resolveConfig({ inflight: { colour: 1 } as never }), (e: unknown) => e instanceof ConfigError && /inflight\.colour: unknown field/.test(e.message));
});

test('POST /v1/inflight on the agent\'s listener: answered in the format; 413 over maxBodyBytes; 400 malformed; 404 when disabled; GET 405', async () => {
  const base = { listen: { host: '127.0.0.1', port: 0 }, link: { peers: [] } };
  const agent = await startAgent({ ...base, inflight: { maxBodyBytes: 1024 } } as never, { logger: pino({ level: 'silent' }), defaultMetrics: false });
  const off = await startAgent({ ...base, inflight: { enabled: false } } as never, { logger: pino({ level: 'silent' }), defaultMetrics: false });
  try {
    const post = (url: string, body: Buffer) => fetch(`${url}/v1/inflight`, { method: 'POST', body: new Uint8Array(body), headers: { 'content-type': INFLIGHT_CONTENT_TYPE } });
    // no instances configured: every address is outside the fleet and ignored, the answer is empty
    const r = await post(agent.url, report(0, { 'a:1': 3 }, 1000)); // stands 4 s
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('content-type'), INFLIGHT_CONTENT_TYPE);
    const d = decodeInflight(Buffer.from(await r.arrayBuffer()));
    assert.equal(d.kind, KIND_ANSWER);
    assert.notEqual(d.proxyId, 0);
    assert.equal(d.counts.size, 0);
    assert.equal(agent.inflight!.stats.ignoredRecords, 1);
    const big = await post(agent.url, Buffer.alloc(2048));
    assert.equal(big.status, 413);
    assert.match(await big.text(), /inflight\.maxBodyBytes \(1024\)/);
    const bad = await post(agent.url, Buffer.from('x'.repeat(40)));
    assert.equal(bad.status, 400);
    assert.match(await bad.text(), /version 120/);
    assert.equal((await fetch(`${agent.url}/v1/inflight`)).status, 405);
    const metrics = await (await fetch(`${agent.url}/metrics`)).text();
    assert.match(metrics, /switchyard_inflight_reports_total\{result="ok"\} 1/);
    assert.match(metrics, /switchyard_inflight_reports_total\{result="too_large"\} 1/);
    assert.match(metrics, /switchyard_inflight_proxies 1/);
    assert.equal((await post(off.url, report(0, {}))).status, 404);
    assert.equal(off.inflight, undefined);
  } finally {
    await agent.stop();
    await off.stop();
  }
});

test('the answer states the age of the counts it sums: the other proxies\' reports (weighted by their counts + 1) and other agents\' sums', () => {
  const { a, advance } = agg();
  const r1 = a.report(report(0, { 'a:1': 3 }));
  assert.ok(r1.ok);
  assert.equal(decodeInflight(r1.answer).intervalMs, 0, 'nothing else summed: not stated');
  advance(40);
  const r2 = a.report(report(0, { 'a:1': 1 }));
  assert.ok(r2.ok);
  // the only other report (weight 3 + 1) was taken 40 ms ago
  assert.equal(decodeInflight(r2.answer).intervalMs, 40);
  advance(10);
  const r1b = a.report(report(r1.proxyId, { 'a:1': 3 }));
  assert.ok(r1b.ok);
  assert.equal(decodeInflight(r1b.answer).intervalMs, 10, 'proxy 2\'s report is 10 ms old');
  // another agent's sums, 30 ms old when they came: with proxy 1's fresh report (weight 4) and the
  // other agent's (weight 6 + 1), proxy 2 hears (4 × 0 + 7 × 30) / 11 ms
  assert.ok(a.agentTotals('agent-b/_/llm', new Map([['a:1', 6]]), 1000, 16, 30));
  const r2b = a.report(report(r2.proxyId, { 'a:1': 1 }));
  assert.ok(r2b.ok);
  assert.equal(decodeInflight(r2b.answer).intervalMs, Math.round((4 * 0 + 7 * 30) / 11));
  // the sweep recomputes the sums (no drift); the agent's own proxies' age for its NATS message
  advance(20);
  a.sweep(undefined, true);
  assert.equal(a.localAgeMs(), Math.round((4 * 20 + 2 * 20) / 6));
  a.dropAgent('agent-b/_/llm');
  const r1c = a.report(report(r1.proxyId, { 'a:1': 3 }));
  assert.ok(r1c.ok);
  assert.equal(decodeInflight(r1c.answer).intervalMs, 20, 'the dropped agent no longer weighs');
});
