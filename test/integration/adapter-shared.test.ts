// The adapter marks shared across worker VMs (lib/choice/adapter-share.ts), end to end: the real
// filter in the embedded host with two worker VMs. Instance 1 prefills fast but has one LoRA slot,
// free; instance 2 is slower with two. VM 0 sends a sql-lora request to instance 1, which marks
// sql-lora as being loaded there and its one slot as taken. After a tick VM 1 must see that mark:
// a chat-lora request then waits for a drain at instance 1 (priced + E[S]) and goes to instance 2,
// and a sql-lora request joins the load at instance 1. Without the exchange VM 1 sees a free slot
// at instance 1 and sends chat-lora there, where it would wait until sql-lora's requests are done.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeSnapshot, type InstanceRecord } from '../../agent/src/snapshot/codec';
import { MODEL_BASE, type InstanceLlmRecord } from '../../agent/src/snapshot/llm';
import { ProxyWasmHost, type RequestResult } from '../../host/src';
import { header, twoWorkerLlmHost } from './helpers';

const AUTH = 'llm.example';
const T0 = 1_000_000;
const REFRESH = 10;
const FAST = '10.0.0.1:80';
const ROOMY = '10.0.0.2:80';

function inst(addr: string): InstanceRecord {
  return { service: 'llm', addr, peer: '', healthy: true, reason: 'ok', rho: 0.3, esMs: 500, es2Ms2: 300000, lambdaPerS: 1, queueDepth: 0,
    p50Ms: 500, p99Ms: 900, baselineP99Ms: 900, gpuUtil: 0.3, dataAgeMs: 0, slots: 8 };
}
// a ~2000-token prompt: 20 ms of prefill at FAST, 200 ms at ROOMY; an adapter load is priced 200 ms
const llm = (addr: string, prefill: number, maxLoras: number): InstanceLlmRecord => ({
  service: 'llm', addr, prefillMsPerToken: prefill, decodeMsPerToken: 10, kvCacheUsage: 0.1, kvSeqs: NaN, maxLoras,
  models: [{ name: 'llama-3-8b', flags: MODEL_BASE }, { name: 'sql-lora', flags: 0 }, { name: 'chat-lora', flags: 0 }],
});

const twoWorkers = (): Promise<ProxyWasmHost> => twoWorkerLlmHost({
  authority: AUTH, t0: T0, refreshMs: REFRESH, stalenessMs: 600000,
  snapshot: encodeSnapshot({ seq: 1, generatedAtMs: T0, peers: [], instances: [inst(FAST), inst(ROOMY)], llm: [llm(FAST, 0.01, 1), llm(ROOMY, 0.1, 2)] }),
});

const ask = (host: ProxyWasmHost, worker: number, model: string, tag: string): Promise<RequestResult> =>
  host.request({ ':method': 'POST', ':path': '/v1/completions', ':authority': AUTH, ':scheme': 'http', 'content-type': 'application/json' },
    { worker, body: JSON.stringify({ model, prompt: `${tag}: summarise the incident report line by line. `.repeat(160), max_tokens: 16 }) });
const endpoint = (r: RequestResult) => header(r.upstreamHeaders, 'x-switchyard-endpoint')[0];
const debug = (r: RequestResult) => header(r.responseHeaders, 'x-switchyard-debug')[0] ?? '';

test('an adapter one worker VM sent to the last free LoRA slot is seen by the other after a tick', async () => {
  const host = await twoWorkers();
  try {
    // before any mark, either VM sends an adapter to the fast instance (it has a free slot)
    const first = await ask(host, 0, 'sql-lora', 'first');
    assert.equal(first.worker, 0);
    assert.equal(endpoint(first), FAST, debug(first));
    // past the prefill and adapter load VM 0 queued there (exchanged as pending prefill, which
    // alone would also steer VM 1 away for ~220 ms): only the mark is left
    await host.advance(500);
    const doc = host.sharedData()['switchyard.adapters.v1.llm'];
    assert.ok(doc && doc.value.length > 2 * 14, 'VM 0 published its mark');
    // VM 1: another adapter would wait for sql-lora to drain at FAST: ROOMY
    const other = await ask(host, 1, 'chat-lora', 'other');
    assert.equal(other.worker, 1);
    assert.equal(endpoint(other), ROOMY, debug(other));
    // VM 1: sql-lora itself joins the load at FAST (being loaded there: no slot of its own)
    const same = await ask(host, 1, 'sql-lora', 'same');
    assert.equal(endpoint(same), FAST, debug(same));
  } finally {
    await host.close();
  }
});
