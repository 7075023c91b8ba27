// Adapter streams end to end (lib/choice/adapter-streams.ts): the real filter in the embedded host
// counts a LoRA request as running its adapter at the instance from the first byte of a 200
// answer to its end. The scrape here says sql-lora is loaded at FAST (the cheapest instance);
// since then sql-lora drained there and chat-lora and code-lora stream from it, holding both LoRA
// slots: a sql-lora request would wait there for a drain (vLLM skips it whatever its priority), so
// it goes to SLOW. When code-lora's stream ends, a slot is free again and FAST is back. An error
// answer, or one not streamed, never counts as running. With two worker VMs each sees the other's
// streams after a tick (lib/choice/adapter-streams-share.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeSnapshot, type InstanceRecord } from '../../agent/src/snapshot/codec';
import { MODEL_BASE, MODEL_LOADED, type InstanceLlmRecord } from '../../agent/src/snapshot/llm';
import { ProxyWasmHost, HeaderMap, type HttpStream } from '../../host/src';
import { WASM, header } from './helpers';

const AUTH = 'llm.example';
const T0 = 1_000_000;
const REFRESH = 10;
const FAST = '10.0.0.1:80';
const SLOW = '10.0.0.2:80';
const SINK = { headers(): void {}, data(): void {}, reset(): void {} };

/** SLOW is the busier one (4 requests in its batch): the filter prices every instance with the
 *  pool's per-token rates (docs/inference-llm.md, "One price in ms"), so what makes FAST the
 *  cheaper is its load, not the prefill rate its record names */
function inst(addr: string): InstanceRecord {
  return { service: 'llm', addr, peer: '', healthy: true, reason: 'ok', rho: 0.3, esMs: 100, es2Ms2: 20000, lambdaPerS: 1, queueDepth: addr === SLOW ? 4 : 0,
    p50Ms: 100, p99Ms: 300, baselineP99Ms: 300, gpuUtil: 0.3, dataAgeMs: 0, slots: 8 };
}
const llm = (addr: string, prefill: number, loaded: string[]): InstanceLlmRecord => ({
  service: 'llm', addr, prefillMsPerToken: prefill, decodeMsPerToken: 10, kvCacheUsage: 0.1, kvSeqs: NaN, maxLoras: 2,
  models: [{ name: 'llama-3-8b', flags: MODEL_BASE }, ...['sql-lora', 'chat-lora', 'code-lora'].map((name) => ({ name, flags: loaded.includes(name) ? MODEL_LOADED : 0 }))],
});

interface Sent { stream: HttpStream; endpoint: string }

interface Bed {
  host: ProxyWasmHost;
  /** a snapshot whose scrape shows these adapters loaded at FAST and SLOW */
  serve(fast: string[], slow: string[]): Promise<void>;
  serveLlm(llm: InstanceLlmRecord[]): Promise<void>;
  send(model: string, crit?: string, worker?: number): Sent;
}

async function bed(workers = 1): Promise<Bed> {
  let body: Buffer = Buffer.alloc(0);
  let seq = 1;
  const host = await ProxyWasmHost.create({
    wasm: WASM, workers, mainThread: false, canary: false, clock: 'manual', startTimeMs: T0, allowOnHeadersStopIteration: true,
    pluginConfig: JSON.stringify({
      agent: { cluster: 'switchyard_agent', longPollMs: 0, pollMs: REFRESH }, refreshMs: REFRESH, leaseMs: 20 * REFRESH,
      link: { stalenessMs: 60000, services: [] },
      loadAware: { services: [{ authorities: [AUTH], service: 'llm', stalenessMs: 600000, debug: true, picker: 'band', band: 0,
        request: { allowOnHeadersStopIteration: true, adapterLoadMs: 40 } }] },
    }),
    clusters: { switchyard_agent: { handler: () => ({ status: 200, body }) } },
  });
  const serveLlm = async (l: InstanceLlmRecord[]) => {
    body = encodeSnapshot({ seq: ++seq, generatedAtMs: host.clock.nowMs(), peers: [], instances: [inst(FAST), inst(SLOW)], llm: l });
    for (let i = 0; i < 8; i++) await host.advance(REFRESH);
  };
  // the upstream answers nothing by itself: each test streams the answer it needs
  let last: Sent | null = null;
  const upstream = { send(stream: HttpStream, headers: HeaderMap): void { last = { stream, endpoint: header(headers.pairs(), 'x-switchyard-endpoint')[0] ?? '' }; } };
  return {
    host,
    serve: async (fast, slow) => serveLlm([llm(FAST, 0.01, fast), llm(SLOW, 0.1, slow)]),
    serveLlm: (l) => serveLlm(l),
    send: (model, crit = 'standard', worker = 0) => {
      last = null;
      const req = JSON.stringify({ model, prompt: 'summarise the incident report line by line. '.repeat(40), max_tokens: 16, stream: true });
      const h = new HeaderMap('request', [[':method', 'POST'], [':path', '/v1/completions'], [':authority', AUTH], [':scheme', 'http'],
        ['content-type', 'application/json'], ['x-switchyard-criticality', crit]]);
      const { stream } = host.startStream(h, [Buffer.from(req)], true, SINK, upstream, worker, () => {});
      assert.ok(last, `${model}: forwarded (local reply ${stream.localReply?.status ?? '-'})`);
      return last!;
    },
  };
}

const streamFrom = (s: Sent, status = 200) => {
  s.stream.onUpstreamHeaders(new HeaderMap('response', [[':status', String(status)], ['content-type', 'text/event-stream']]), false);
  s.stream.onUpstreamData(Buffer.from('data: {"choices":[{"text":"x"}]}\n\n'), false);
};
const end = (s: Sent) => s.stream.onUpstreamData(Buffer.from('data: [DONE]\n\n'), true);

test('where two other adapters stream from the instance (max_loras 2), an adapter the scrape shows loaded there waits for a drain: the request goes elsewhere', async () => {
  const b = await bed();
  try {
    // chat-lora and code-lora loaded at FAST: their requests go there and stream
    await b.serve(['chat-lora', 'code-lora'], []);
    const chat = b.send('chat-lora'), code = b.send('code-lora');
    assert.equal(chat.endpoint, FAST);
    assert.equal(code.endpoint, FAST);
    streamFrom(chat);
    streamFrom(code);
    // a scrape that shows sql-lora loaded at FAST (it drained since): FAST is still the cheapest
    // by the scrape, but both its slots are held by the streaming adapters
    await b.serve(['sql-lora', 'chat-lora'], ['sql-lora']);
    assert.equal(b.send('sql-lora').endpoint, SLOW);
    assert.equal(b.send('sql-lora', 'critical').endpoint, SLOW);
    // chat-lora itself streams there: it joins the running batch
    assert.equal(b.send('chat-lora', 'critical').endpoint, FAST);
    // code-lora's stream ends: a slot is free, sql-lora goes to FAST again
    end(code);
    assert.equal(b.send('sql-lora').endpoint, FAST);
    end(chat);
  } finally {
    await b.host.close();
  }
});

test('only a streamed 200 answer counts: an error answer, or one whose body comes in a single chunk, does not hold a slot', async () => {
  const b = await bed();
  try {
    await b.serve(['chat-lora', 'code-lora'], []);
    const chat = b.send('chat-lora'), code = b.send('code-lora'), code2 = b.send('code-lora');
    streamFrom(chat);
    streamFrom(code, 503);                               // an error with a body: not running
    const whole = b.send('code-lora');                   // the whole answer at once: not streamed
    whole.stream.onUpstreamHeaders(new HeaderMap('response', [[':status', '200']]), false);
    whole.stream.onUpstreamData(Buffer.from('{"choices":[{"text":"x"}]}'), true);
    await b.serve(['sql-lora', 'chat-lora'], ['sql-lora']);
    assert.equal(b.send('sql-lora').endpoint, FAST, 'one adapter streams at FAST: a slot is free');
    // another code-lora request's answer streams (200): both slots held
    streamFrom(code2);
    assert.equal(b.send('sql-lora').endpoint, SLOW);
    // a stream reset by the upstream ends it too
    code2.stream.onUpstreamReset('connection termination');
    assert.equal(b.send('sql-lora').endpoint, FAST);
    end(chat); end(code);
  } finally {
    await b.host.close();
  }
});

test('two worker VMs: each streams one of the two adapters holding the slots; after a tick each sees them full', async () => {
  const b = await bed(2);
  try {
    await b.serve(['chat-lora', 'code-lora'], []);
    const chat = b.send('chat-lora', 'standard', 0), code = b.send('code-lora', 'standard', 1);
    assert.equal(chat.endpoint, FAST);
    assert.equal(code.endpoint, FAST);
    streamFrom(chat);
    streamFrom(code);
    await b.serve(['sql-lora', 'chat-lora'], ['sql-lora']);   // 8 ticks: the VMs exchanged
    assert.ok(b.host.sharedData()['switchyard.adapter-streams.v1.llm'], 'published');
    assert.equal(b.send('sql-lora', 'critical', 0).endpoint, SLOW, 'VM 0');
    assert.equal(b.send('sql-lora', 'critical', 1).endpoint, SLOW, 'VM 1');
    // VM 0's chat-lora ends; after a tick VM 1 sees a slot free
    end(chat);
    for (let i = 0; i < 2; i++) await b.host.advance(REFRESH);
    assert.equal(b.send('sql-lora', 'critical', 1).endpoint, FAST, 'VM 1 after the end');
    end(code);
    // every record of the other VM named an instance this VM has a slot for
    assert.equal(Number(b.host.metric('switchyard.request.adapter_records_skipped.llm')), 0);
  } finally {
    await b.host.close();
  }
});

test('bounded: past 16 adapters streaming from one instance a stream is not counted, and the counter says so', async () => {
  const b = await bed();
  try {
    const names = Array.from({ length: 17 }, (_, k) => `lora-${k}`);
    const rec = (addr: string, prefill: number): InstanceLlmRecord => ({ service: 'llm', addr, prefillMsPerToken: prefill, decodeMsPerToken: 10,
      kvCacheUsage: 0.1, kvSeqs: NaN, maxLoras: 32, models: [{ name: 'llama-3-8b', flags: MODEL_BASE }, ...names.map((name) => ({ name, flags: MODEL_LOADED }))] });
    // only FAST serves the adapters
    await b.serveLlm([rec(FAST, 0.01), { ...rec(SLOW, 0.1), models: [{ name: 'llama-3-8b', flags: MODEL_BASE }] }]);
    const sent = names.map((m) => b.send(m, 'critical'));   // never shed, however loaded FAST gets
    for (const x of sent) { assert.equal(x.endpoint, FAST); streamFrom(x); }
    await b.host.advance(REFRESH);
    assert.equal(Number(b.host.metric('switchyard.request.adapter_streams_dropped.llm')), 1);
    for (const x of sent) end(x);
  } finally {
    await b.host.close();
  }
});
