// The request path's own shortcuts (docs/benchmarks.md, "Per-request cost") must not change what
// the filter decides: the last-authority memo follows the rule decisions in force and every
// authority form; header values read into the scratch area (:authority, :status) are read right at
// any length, also past the scratch area's 2,048 bytes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ProxyWasmHost, type RequestResult } from '../../host/src';
import { encodeSnapshot, type InstanceRecord } from '../../agent/src/snapshot/codec';
import type { RuleDecision } from '../../agent/src/rules/engine';
import { WASM, header } from './helpers';

let seq = 1;
function body(rules?: RuleDecision[], instances?: InstanceRecord[]): Buffer {
  return encodeSnapshot({ seq: ++seq, generatedAtMs: 1_000_000, instances, rules,
    peers: [{ name: 'cloud-b', state: 'normal', lastRttMs: 10, avgRttMs: 10, recoverStreak: 10, lastSampleAtMs: 1_000_000 }] });
}
const route = (target: string): RuleDecision[] => [{ set: 'payments', authorities: ['payment.example'], routeHeader: 'x-switchyard-route', version: seq,
  ruleId: `to-${target}`, action: { kind: 'route', target }, sinceMs: 1_000_000 + seq, because: [] }];

async function host(config: Record<string, unknown>, answer: () => Buffer): Promise<ProxyWasmHost> {
  const h = await ProxyWasmHost.create({ wasm: WASM, workers: 1, mainThread: false, canary: false, clock: 'manual', startTimeMs: 1_000_000,
    pluginConfig: JSON.stringify({ agent: { cluster: 'switchyard_agent', longPollMs: 0, pollMs: 10 }, ...config }),
    clusters: { switchyard_agent: { handler: () => ({ status: 200, body: answer() }) } } });
  for (let i = 0; i < 10; i++) await h.advance(20);
  return h;
}
const rq = (authority: string, extra: Record<string, string> = {}) =>
  ({ ':method': 'GET', ':path': '/x', ':authority': authority, ':scheme': 'http', 'x-cross-cloud-status': 'spoofed', ...extra });
const up = (r: RequestResult, name: string) => header(r.upstreamHeaders, name).join(',');

test('the last-authority memo: same authority across rule changes, alternating authorities and their forms', async () => {
  let answer = body();
  const h = await host({ link: { services: [{ authorities: ['payment.example', '*.wild.example'], peer: 'cloud-b' }] } }, () => answer);
  try {
    const pay = () => h.requestSync(rq('payment.example', { 'x-switchyard-route': 'client' }));
    assert.equal(up(pay(), 'x-switchyard-route'), '');
    assert.equal(up(pay(), 'x-cross-cloud-status'), 'normal');
    for (const target of ['dc2', 'dc1', 'dc2']) {
      answer = body(route(target));
      for (let i = 0; i < 5; i++) await h.advance(20);
      const r = pay();
      assert.equal(up(r, 'x-switchyard-route'), target, `rule to ${target} applies to the authority seen just before`);
      assert.equal(up(r, 'x-cross-cloud-status'), 'normal');
    }
    answer = body();
    for (let i = 0; i < 5; i++) await h.advance(20);
    assert.equal(up(pay(), 'x-switchyard-route'), '', 'rule gone: the client copy is stripped, nothing written');
    // alternating authorities: each keeps its own answer
    const forms: [string, string][] = [['payment.example', 'normal'], ['other.example', ''], ['PAYMENT.example:443', 'normal'],
      ['a.wild.example', 'normal'], ['wild.example', ''], ['payment.example.', 'normal'], ['other.example', ''], ['payment.example', 'normal']];
    for (let round = 0; round < 3; round++) {
      for (const [authority, status] of forms) {
        assert.equal(up(h.requestSync(rq(authority)), 'x-cross-cloud-status'), status, authority);
        assert.equal(up(h.requestSync(rq(authority)), 'x-cross-cloud-status'), status, `${authority} again`);
      }
    }
  } finally {
    await h.close();
  }
});

test('authorities around and past the scratch area (2,048 bytes) are read whole', async () => {
  const h = await host({ link: { services: [{ authorities: ['*.wild.example'], peer: 'cloud-b' }] } }, () => body());
  try {
    for (const size of [2046, 2047, 2048, 2049, 2050, 4096, 20000]) {
      const suffix = '.wild.example';
      const labels = 'a.'.repeat(Math.floor((size - suffix.length) / 2));
      const host = ('b'.repeat(size - suffix.length - labels.length) + labels).replace(/\.$/, 'c') + suffix;
      assert.equal(host.length, size);
      assert.equal(up(h.requestSync(rq(host)), 'x-cross-cloud-status'), 'normal', `${size} bytes, matched`);
      const miss = host.slice(0, -1) + 'X';
      assert.equal(up(h.requestSync(rq(miss)), 'x-cross-cloud-status'), '', `${size} bytes, unmatched: the client copy is stripped`);
    }
  } finally {
    await h.close();
  }
});

test(':status read into the scratch area: 5xx answers count as in-band errors, others do not', async () => {
  const instances: InstanceRecord[] = [0, 1, 2, 3].map((i) => ({ service: 'llm', addr: `10.0.0.${i + 1}:8000`, peer: '', healthy: true, reason: 'ok',
    rho: 0.3, esMs: 80, es2Ms2: 80 * 80 * 2.7, lambdaPerS: 10, queueDepth: 0, p50Ms: 60, p99Ms: 300, baselineP99Ms: 250, gpuUtil: 0.3, dataAgeMs: 100, slots: 4 }));
  const h = await host({ link: { services: [] }, loadAware: { services: [{ authorities: ['inference.example'], service: 'llm', stalenessMs: 600000 }] } },
    () => body(undefined, instances));
  const errors = () => h.metric('switchyard.inband.errors') ?? 0;
  try {
    const base = errors();
    for (const status of [200, 204, 404, 499]) h.requestSync(rq('inference.example'), { response: { status } });
    await h.advance(20);
    assert.equal(errors(), base);
    for (const status of [500, 503, 599]) h.requestSync(rq('inference.example'), { response: { status } });
    await h.advance(20);
    assert.equal(errors(), base + 3);
  } finally {
    await h.close();
  }
});
