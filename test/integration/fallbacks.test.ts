// The pick and its fallbacks in the endpoint header, and remote picks in their own header
// (loadAware.services[].fallbacks, loadAware.remoteEndpointHeader): the real filter in the
// embedded host, snapshots encoded by the agent's codec.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeSnapshot, type InstanceRecord } from '../../agent/src/snapshot/codec';
import { ProxyWasmHost } from '../../host/src';
import { WASM, header } from './helpers';

const AUTH = 'inference.example';
const T0 = 1_000_000;
const inst = (addr: string, esMs: number, over: Partial<InstanceRecord> = {}): InstanceRecord => ({ service: 'llm', addr, peer: '', healthy: true,
  reason: 'ok', rho: 0.2, esMs, es2Ms2: 2 * esMs * esMs, lambdaPerS: 1, queueDepth: 0, p50Ms: esMs, p99Ms: 2 * esMs, baselineP99Ms: 2 * esMs,
  gpuUtil: 0.2, dataAgeMs: 0, slots: 4, ...over });

async function bed(loadAware: Record<string, unknown>, service: Record<string, unknown>, instances: InstanceRecord[]): Promise<ProxyWasmHost> {
  let body: Buffer = Buffer.alloc(0);
  const host = await ProxyWasmHost.create({
    wasm: WASM, workers: 1, mainThread: false, canary: false, clock: 'manual', startTimeMs: T0,
    pluginConfig: JSON.stringify({
      agent: { cluster: 'switchyard_agent', longPollMs: 0, pollMs: 10 }, refreshMs: 10, leaseMs: 200,
      link: { stalenessMs: 60000, services: [] },
      loadAware: { ...loadAware, services: [{ authorities: [AUTH], service: 'llm', stalenessMs: 60000, picker: 'band', band: 0, inband: { enabled: false }, ...service }] },
    }),
    clusters: { switchyard_agent: { handler: () => ({ status: 200, body }) } },
  });
  const now = host.clock.nowMs();
  body = encodeSnapshot({ seq: 2, generatedAtMs: now,
    peers: [{ name: 'cloud-b', state: 'normal', lastRttMs: 5, avgRttMs: 5, recoverStreak: 10, lastSampleAtMs: now }], instances });
  for (let i = 0; i < 8; i++) await host.advance(10);
  return host;
}
const req = (host: ProxyWasmHost, extra: Record<string, string> = {}) =>
  host.request({ ':method': 'POST', ':path': '/v1/completions', ':authority': AUTH, ...extra });

test('fallbacks: the pick, then the next-best local instances cheapest first, at most `fallbacks`; remote ones never listed', async () => {
  const host = await bed({ remoteEndpointHeader: 'x-remote' }, { fallbacks: 2 },
    [inst('10.0.0.4:80', 40), inst('10.0.0.1:80', 10), inst('10.9.0.1:80', 15, { peer: 'cloud-b' }), inst('10.0.0.3:80', 30), inst('10.0.0.2:80', 20)]);
  try {
    const r = await req(host, { 'x-switchyard-endpoint': '169.254.169.254:80', 'x-remote': '169.254.169.254:80' });
    assert.deepEqual(header(r.upstreamHeaders, 'x-switchyard-endpoint'), ['10.0.0.1:80,10.0.0.2:80,10.0.0.3:80']);
    assert.deepEqual(header(r.upstreamHeaders, 'x-remote'), [], 'a client copy of the remote header is removed');
  } finally { await host.close(); }
});

test('the shipped default (fallbacks 0): the pick alone, as ORIGINAL_DST needs', async () => {
  const host = await bed({}, {}, [inst('10.0.0.1:80', 10), inst('10.0.0.2:80', 20)]);
  try {
    assert.deepEqual(header((await req(host)).upstreamHeaders, 'x-switchyard-endpoint'), ['10.0.0.1:80']);
  } finally { await host.close(); }
});

test('remoteEndpointHeader: a pick in another cloud goes alone into it, the endpoint header is removed', async () => {
  // the remote instance is the cheapest (its RTT of 5 ms included)
  const host = await bed({ remoteEndpointHeader: 'x-remote' }, { fallbacks: 2 },
    [inst('10.9.0.1:80', 2, { peer: 'cloud-b' }), inst('10.0.0.1:80', 30), inst('10.0.0.2:80', 40)]);
  try {
    const r = await req(host, { 'x-switchyard-endpoint': '10.0.0.2:80' });
    assert.deepEqual(header(r.upstreamHeaders, 'x-remote'), ['10.9.0.1:80']);
    assert.deepEqual(header(r.upstreamHeaders, 'x-switchyard-endpoint'), [], 'no list for override_host, no client copy');
  } finally { await host.close(); }
  // without remoteEndpointHeader the remote pick stays in the endpoint header (ORIGINAL_DST for all, as before)
  const h2 = await bed({}, {}, [inst('10.9.0.1:80', 2, { peer: 'cloud-b' }), inst('10.0.0.1:80', 30)]);
  try {
    assert.deepEqual(header((await req(h2)).upstreamHeaders, 'x-switchyard-endpoint'), ['10.9.0.1:80']);
  } finally { await h2.close(); }
});
