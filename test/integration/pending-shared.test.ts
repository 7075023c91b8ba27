// The prefill sent ahead per instance, shared across worker VMs (lib/pending-prefill.ts), end to
// end: the real filter in the embedded host with two worker VMs and two equal instances. A long
// uncached prompt routed by one VM queues its prefill on that instance; after one tick the other
// VM prices it and sends the next long prompt to the other instance. Without the exchange the
// second VM sees two equal instances and picks either (1/2 per round: 8 rounds pass by chance
// with probability 1/256).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeSnapshot, type InstanceRecord } from '../../agent/src/snapshot/codec';
import { MODEL_BASE, MODEL_LOADED, type InstanceLlmRecord } from '../../agent/src/snapshot/llm';
import { ProxyWasmHost, type RequestResult } from '../../host/src';
import { header, twoWorkerLlmHost } from './helpers';

const AUTH = 'llm.example';
const T0 = 1_000_000;
const REFRESH = 10;
const ADDRS = ['10.0.0.1:80', '10.0.0.2:80'];

function inst(addr: string): InstanceRecord {
  return { service: 'llm', addr, peer: '', healthy: true, reason: 'ok', rho: 0.3, esMs: 500, es2Ms2: 300000, lambdaPerS: 1, queueDepth: 0,
    p50Ms: 500, p99Ms: 900, baselineP99Ms: 900, gpuUtil: 0.3, dataAgeMs: 0, slots: 8 };
}
// 0.5 ms per prompt token: a 2000-token prompt queues 1 s of prefill on the instance it is sent to
const llm = (addr: string): InstanceLlmRecord =>
  ({ service: 'llm', addr, prefillMsPerToken: 0.5, decodeMsPerToken: 10, kvCacheUsage: 0.1, kvSeqs: NaN, maxLoras: 0, models: [{ name: 'llama-3-8b', flags: MODEL_BASE | MODEL_LOADED }] });

const twoWorkers = (): Promise<ProxyWasmHost> => twoWorkerLlmHost({
  authority: AUTH, t0: T0, refreshMs: REFRESH, stalenessMs: 600000,
  snapshot: encodeSnapshot({ seq: 1, generatedAtMs: T0, peers: [], instances: ADDRS.map(inst), llm: ADDRS.map(llm) }),
});

// a distinct ~8 KiB prompt each time (≈ 2000 tokens, nothing cached anywhere)
const long = (host: ProxyWasmHost, worker: number, tag: string): Promise<RequestResult> =>
  host.request({ ':method': 'POST', ':path': '/v1/completions', ':authority': AUTH, ':scheme': 'http', 'content-type': 'application/json' },
    { worker, body: JSON.stringify({ model: 'llama-3-8b', prompt: `${tag}: summarise the incident report line by line. `.repeat(160), max_tokens: 16 }) });
const endpoint = (r: RequestResult) => header(r.upstreamHeaders, 'x-switchyard-endpoint')[0];
const debug = (r: RequestResult) => header(r.responseHeaders, 'x-switchyard-debug')[0] ?? '';

test('the prefill one worker VM sent ahead is priced by the other after one tick: the next long prompt goes to the other instance', async () => {
  const host = await twoWorkers();
  try {
    for (let k = 0; k < 8; k++) {
      const from = k % 2, to = 1 - from;
      const first = await long(host, from, `round ${k} first`);
      assert.equal(first.worker, from);
      assert.ok(ADDRS.includes(endpoint(first)), debug(first));
      // one tick of each VM: VM 0 ticks first, so VM 1 reads VM 0's section at once; the other
      // way round VM 0 reads it on its next tick (within two tick periods)
      await host.advance(from === 0 ? REFRESH : 2 * REFRESH);
      const second = await long(host, to, `round ${k} second`);
      assert.equal(second.worker, to);
      assert.notEqual(endpoint(second), endpoint(first), `round ${k}: VM ${to} sent to the instance VM ${from} had just loaded: ${debug(second)}`);
      await host.advance(3000); // both prefills done (1 s each): the instances are equal again
    }
    const doc = host.sharedData()['switchyard.pending.v1'];
    assert.ok(doc, 'the pending-prefill document is in shared data');
    // nothing ahead after the drain: one 14-byte section per VM, no records
    assert.equal(doc.value.length, 2 * 14);
  } finally {
    await host.close();
  }
});
