// Request-aware choice end to end in the embedded host: the real filter reads OpenAI bodies
// (headers held, body buffered: Envoy >= 1.35 allow_on_headers_stop_iteration, modelled by the
// host's allowOnHeadersStopIteration), and with Envoy's default it must not hang. Snapshots come
// from the agent's codec (INSTANCES, and an LLM section where model routing is the point; the
// agent's own LLM section is pinned in model-routing.test.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeSnapshot, type InstanceRecord } from '../../agent/src/snapshot/codec';
import { MODEL_BASE, MODEL_LOADED, type InstanceLlmRecord } from '../../agent/src/snapshot/llm';
import { ProxyWasmHost, HeaderMap, type HttpStream, type RequestResult } from '../../host/src';
import { WASM, header } from './helpers';

const AUTH = 'llm.example';
const T0 = 1_000_000;
const REFRESH = 10;

function inst(addr: string, over: Partial<InstanceRecord> = {}): InstanceRecord {
  return { service: 'llm', addr, peer: '', healthy: true, reason: 'ok', rho: 0.3, esMs: 10, es2Ms2: 200, lambdaPerS: 10, queueDepth: 0,
    p50Ms: 10, p99Ms: 40, baselineP99Ms: 40, gpuUtil: 0.3, dataAgeMs: 0, slots: 1, ...over };
}

let seq = 1;
interface Bed {
  host: ProxyWasmHost;
  serve(instances: InstanceRecord[], llm?: InstanceLlmRecord[]): Promise<void>;
  chat(body: unknown, extra?: Record<string, string>): Promise<RequestResult>;
}

async function bed(request: Record<string, unknown> = {}, opts: { allow?: boolean; service?: Record<string, unknown> } = {}): Promise<Bed> {
  let body: Buffer = Buffer.alloc(0);
  const host = await ProxyWasmHost.create({
    wasm: WASM, workers: 1, mainThread: false, canary: false, clock: 'manual', startTimeMs: T0,
    allowOnHeadersStopIteration: opts.allow ?? true,
    pluginConfig: JSON.stringify({
      agent: { cluster: 'switchyard_agent', longPollMs: 0, pollMs: REFRESH }, refreshMs: REFRESH, leaseMs: 20 * REFRESH,
      link: { stalenessMs: 60000, services: [] },
      loadAware: { services: [{ authorities: [AUTH], service: 'llm', stalenessMs: 60000, debug: true, ...opts.service,
        request: { allowOnHeadersStopIteration: true, ...request } }] },
    }),
    clusters: { switchyard_agent: { handler: () => ({ status: 200, body }) } },
  });
  return {
    host,
    serve: async (instances, llm) => {
      const now = host.clock.nowMs();
      body = encodeSnapshot({ seq: ++seq, generatedAtMs: now, peers: [], instances, llm });
      for (let i = 0; i < 8; i++) await host.advance(REFRESH);
    },
    chat: (b, extra = {}) => host.request({ ':method': 'POST', ':path': '/v1/chat/completions', ':authority': AUTH, ':scheme': 'http',
      'content-type': 'application/json', ...extra }, { body: typeof b === 'string' ? b : JSON.stringify(b) }),
  };
}

const endpoint = (r: RequestResult) => header(r.upstreamHeaders, 'x-switchyard-endpoint');
const debug = (r: RequestResult) => header(r.responseHeaders, 'x-switchyard-debug')[0] ?? '';
const SYSTEM = 'You are a careful assistant for the Switchyard test suite. '.repeat(80); // ~4.7 KiB
const chatBody = (system: string, user: string, extra: Record<string, unknown> = {}) =>
  ({ model: 'llama-3-8b', messages: [{ role: 'system', content: system }, { role: 'user', content: user }], max_tokens: 64, ...extra });
const FLEET = () => [inst('10.0.0.1:80'), inst('10.0.0.2:80'), inst('10.0.0.3:80'), inst('10.0.0.4:80')];

test('prefix affinity: the same long system prompt goes back to the instance that has it; the body reaches the upstream intact', async () => {
  const b = await bed();
  try {
    await b.serve(FLEET());
    const seen: string[] = [];
    const first = await b.host.request({ ':method': 'POST', ':path': '/v1/chat/completions', ':authority': AUTH, ':scheme': 'http' },
      { body: JSON.stringify(chatBody(SYSTEM, 'question 0')), response: (req) => { seen.push(req.body.toString()); return { status: 200 }; } });
    assert.equal(endpoint(first).length, 1);
    assert.deepEqual(seen, [JSON.stringify(chatBody(SYSTEM, 'question 0'))]);
    assert.match(debug(first), / model=llama-3-8b crit=standard prompt_tokens=\d+ cached_blocks=0 /);
    for (let i = 1; i <= 20; i++) {
      const r = await b.chat(chatBody(SYSTEM, `question ${i}`));
      assert.deepEqual(endpoint(r), endpoint(first), `request ${i}: ${debug(r)}`);
      assert.match(debug(r), /cached_blocks=[1-9]\d* /);
    }
    // distinct prompts are spread (p2c over equal instances), not pinned
    const spread = new Set<string>();
    for (let i = 0; i < 40; i++) spread.add(endpoint(await b.chat(chatBody(`prompt ${i} `.repeat(40), 'q')))[0]);
    assert.ok(spread.size >= 3, `distinct prompts went to ${[...spread]}`);
    // the same prompt for another model does not share the cached prefix
    const other = await b.chat(chatBody(SYSTEM, 'question 0', { model: 'llama-3-70b' }));
    assert.match(debug(other), /cached_blocks=0 /);
    await b.host.advance(REFRESH);
    assert.ok(Number(b.host.metric('switchyard.request.prefix_hit.llm')) >= 20);
  } finally {
    await b.host.close();
  }
});

test('prefix memory: kept across a new snapshot of the same fleet, dropped for an address that is gone', async () => {
  const b = await bed();
  try {
    await b.serve(FLEET());
    const holder = endpoint(await b.chat(chatBody(SYSTEM, 'q')))[0];
    // a new snapshot (new seq) re-plans the service: the instance still holds the prefix
    await b.serve(FLEET());
    const again = await b.chat(chatBody(SYSTEM, 'q2'));
    assert.equal(endpoint(again)[0], holder);
    assert.match(debug(again), /cached_blocks=[1-9]\d* /);
    // the holder replaced by a new pod (another address): nobody holds the prefix any more
    const replaced = FLEET().map((x) => (x.addr === holder ? { ...x, addr: '10.0.0.9:80' } : x));
    await b.serve(replaced);
    assert.match(debug(await b.chat(chatBody(SYSTEM, 'q3'))), /cached_blocks=0 /);
  } finally {
    await b.host.close();
  }
});

test('a model not routed elsewhere reaches the upstream byte for byte, JSON escapes included', async () => {
  const b = await bed();
  try {
    await b.serve(FLEET());
    const body = '{"model":"llama\\u002d3-8b","messages":[{"role":"user","content":"hi"}],"max_tokens":8}';
    const seen: string[] = [];
    const r = await b.host.request({ ':method': 'POST', ':path': '/v1/chat/completions', ':authority': AUTH, ':scheme': 'http' },
      { body, response: (req) => { seen.push(req.body.toString()); return { status: 200 }; } });
    assert.equal(endpoint(r).length, 1);
    assert.deepEqual(seen, [body]);
    assert.match(debug(r), / model=llama-3-8b /);
  } finally {
    await b.host.close();
  }
});

test('prefix affinity yields to load: the prefix holder with a long queue loses to an idle instance', async () => {
  const b = await bed();
  try {
    await b.serve(FLEET());
    const first = await b.chat(chatBody(SYSTEM, 'q'));
    const holder = endpoint(first)[0];
    await b.serve(FLEET().map((x) => (x.addr === holder ? { ...x, queueDepth: 30 } : x)));
    for (let i = 0; i < 5; i++) assert.notEqual(endpoint(await b.chat(chatBody(SYSTEM, `q${i}`)))[0], holder);
  } finally {
    await b.host.close();
  }
});

test('shipped request-aware picker (band): every candidate priced, the cheapest never missed; request.picker p2c draws two', async () => {
  // instance 3 serves in a fifth of the time of the others; prompts all distinct (no prefix holder)
  const fleet = () => FLEET().map((x) => (x.addr === '10.0.0.3:80' ? { ...x, esMs: 2, es2Ms2: 8, p50Ms: 2 } : x));
  const dflt = await bed();
  try {
    await dflt.serve(fleet());
    for (let i = 0; i < 20; i++) assert.deepEqual(endpoint(await dflt.chat(chatBody(`distinct ${i} `.repeat(30), 'q'))), ['10.0.0.3:80'], `request ${i}`);
  } finally {
    await dflt.host.close();
  }
  const p2c = await bed({ picker: 'p2c' });
  try {
    await p2c.serve(fleet());
    const to = new Set<string>();
    for (let i = 0; i < 20; i++) to.add(endpoint(await p2c.chat(chatBody(`distinct ${i} `.repeat(30), 'q')))[0]);
    assert.ok(to.size > 1, `p2c sent every request to ${[...to]}`);
  } finally {
    await p2c.host.close();
  }
});

test('invalid bodies, shipped default (fallback): the body-blind choice, the reason in the debug header, counted', async () => {
  const b = await bed();
  try {
    await b.serve(FLEET());
    const cases: [string, RegExp][] = [
      ['not json', /fallback="request body is not JSON/],
      ['{"messages":[]}', /fallback="request body has no "model" string"/],
      ['[1,2]', /fallback="request body is not a JSON object"/],
      ['{"model":"m","max_tokens":"many"}', /fallback="request field "max_tokens" has the wrong type"/],
    ];
    for (const [body, why] of cases) {
      const r = await b.chat(body);
      assert.equal(r.localReply, undefined, body);
      assert.equal(endpoint(r).length, 1, body);
      assert.match(debug(r), why);
    }
    // an inference call without a body: the body-blind choice too, never a 400
    const empty = await b.host.request({ ':method': 'POST', ':path': '/v1/completions', ':authority': AUTH, ':scheme': 'http' });
    assert.equal(empty.localReply, undefined, 'empty body');
    assert.equal(endpoint(empty).length, 1, 'empty body');
    await b.host.advance(REFRESH);
    assert.equal(Number(b.host.metric('switchyard.request.invalid.llm')), cases.length + 1);
  } finally {
    await b.host.close();
  }
});

test('invalid bodies with onInvalid reject-400: a 400 naming the problem, nothing upstream', async () => {
  const b = await bed({ onInvalid: 'reject-400' });
  try {
    await b.serve(FLEET());
    const r = await b.chat('{"model": 5}');
    assert.equal(r.localReply?.status, 400);
    assert.equal(r.upstreamHeaders, undefined);
    assert.match(String(r.localReply?.body), /request field \\?"model\\?" has the wrong type|has no "model"/);
    const e = await b.host.request({ ':method': 'POST', ':path': '/v1/completions', ':authority': AUTH, ':scheme': 'http' });
    assert.equal(e.localReply?.status, 400);
    assert.match(String(e.localReply?.body), /request body is empty/);
    // other paths stay body-blind
    const m = await b.host.request({ ':method': 'GET', ':path': '/v1/models', ':authority': AUTH, ':scheme': 'http' });
    assert.equal(endpoint(m).length, 1);
    // a rejected request chose no instance: only the GET counts as a choice
    await b.host.advance(REFRESH);
    assert.equal(b.host.metric('switchyard.lb.choice.llm'), 1);
  } finally {
    await b.host.close();
  }
});

test('oversized body: fallback forwards it with the body-blind choice; reject answers 413', async () => {
  const big = JSON.stringify(chatBody('x'.repeat(3000), 'q'));
  const a = await bed({ maxBodyBytes: 2048 });
  try {
    await a.serve(FLEET());
    const seen: number[] = [];
    const r = await a.host.request({ ':method': 'POST', ':path': '/v1/chat/completions', ':authority': AUTH, ':scheme': 'http' },
      { body: [big.slice(0, 1500), big.slice(1500)], response: (req) => { seen.push(req.body.length); return { status: 200 }; } });
    assert.equal(endpoint(r).length, 1);
    assert.match(debug(r), /fallback="request body larger than 2048 bytes/);
    assert.deepEqual(seen, [big.length]);
  } finally {
    await a.host.close();
  }
  const b = await bed({ maxBodyBytes: 2048, onInvalid: 'reject-400' });
  try {
    await b.serve(FLEET());
    const r = await b.chat(big);
    assert.equal(r.localReply?.status, 413);
    assert.match(String(r.localReply?.body), /larger than 2048 bytes \(request\.maxBodyBytes\)/);
  } finally {
    await b.host.close();
  }
});

test('shedding order: sheddable gets 429 + retry-after first, standard next; critical still gets the cheapest instance', async () => {
  // band 0: the request goes to the cheapest instance, whose pressure decides (p2c would draw two at random)
  const b = await bed({ models: [{ name: 'batch-model', criticality: 'sheddable' }] }, { service: { retryAfterS: 3, picker: 'band', band: 0 } });
  try {
    // `growing`: the servers report their waiting counts rising (the agent's queueGrowing flag)
    const pool = (q: number, growing = false) => [inst('10.0.0.1:80', { queueDepth: q, queueGrowing: growing }), inst('10.0.0.2:80', { queueDepth: q + 2, queueGrowing: growing }),
      inst('10.0.0.3:80', { queueDepth: q + 4, queueGrowing: growing })];
    // light load: nobody is shed
    await b.serve(pool(0));
    for (const c of ['sheddable', 'standard', 'critical']) assert.equal((await b.chat(chatBody('s', 'q'), { 'x-switchyard-criticality': c })).localReply, undefined, c);
    // pressure 0.75 where the request would go (the cheapest, also the pool's least loaded): the pool
    // is at sheddableAt / 2 or more, so the sheddable threshold halves (0.5): sheddable shed, standard served
    await b.serve(pool(0.75));
    const s = await b.chat(chatBody('s', 'q'), { 'x-switchyard-criticality': 'sheddable' });
    assert.equal(s.localReply?.status, 429);
    assert.deepEqual(header(s.localReply?.headers, 'retry-after'), ['3']);
    assert.match(String(s.localReply?.body), /sheddable request shed/);
    assert.equal((await b.chat(chatBody('s', 'q', { model: 'batch-model' }))).localReply?.status, 429, 'model default sheddable');
    assert.equal((await b.chat(chatBody('s', 'q'))).localReply, undefined, 'standard (service default) served');
    // pressure 2.5, past the standard threshold, but no server reports a growing queue: the pool is
    // not overloaded by the servers' evidence, and standard is served (the servers queue it)
    await b.serve(pool(2.5));
    assert.equal((await b.chat(chatBody('s', 'q'))).localReply, undefined, 'standard at 2.5 without server evidence');
    // the servers' queues keep growing: standard shed too; critical goes to the cheapest instance
    await b.serve(pool(2.5, true));
    assert.equal((await b.chat(chatBody('s', 'q'))).localReply?.status, 429);
    for (let i = 0; i < 5; i++) {
      const c = await b.chat(chatBody('s', 'q'), { 'x-switchyard-criticality': 'critical' });
      assert.deepEqual(endpoint(c), ['10.0.0.1:80']);
      assert.deepEqual(header(c.upstreamHeaders, 'x-switchyard-criticality'), [], 'the filter strips its header');
    }
    // an unknown header value counts as absent (the model / service default)
    assert.equal((await b.chat(chatBody('s', 'q'), { 'x-switchyard-criticality': 'vip' })).localReply?.status, 429);
    await b.host.advance(REFRESH);
    assert.equal(Number(b.host.metric('switchyard.request.shed_sheddable.llm')), 2);
    assert.equal(Number(b.host.metric('switchyard.request.shed_standard.llm')), 2);
  } finally {
    await b.host.close();
  }
});

test('overload (shipped defaults): entered on the servers\' evidence only, the pool thresholds then hold the pool near its normal load; released when it drains', async () => {
  const b = await bed({}, { service: { picker: 'band', band: 0 } });
  try {
    const ADDRS = ['10.0.0.1:80', '10.0.0.2:80', '10.0.0.3:80', '10.0.0.4:80'];
    const llm = (addr: string): InstanceLlmRecord => ({ service: 'llm', addr, prefillMsPerToken: 0.1, decodeMsPerToken: 10, kvCacheUsage: 0.3, kvSeqs: 10, maxLoras: 0,
      models: [{ name: 'llama-3-8b', flags: MODEL_BASE | MODEL_LOADED }] });
    // every instance with `q` requests of the 10 its KV cache holds; `growing` of them report a growing queue
    const pool = (q: number, growing = 0) => b.serve(ADDRS.map((a, i) => inst(a, { queueDepth: q, slots: 64, queueGrowing: i < growing })), ADDRS.map(llm));
    const send = (crit: string) => b.chat(chatBody('s', 'q'), { 'x-switchyard-criticality': crit });
    // normal load: 0.25 of the KV capacity everywhere, above both pool thresholds (0.15 / 0.2) and
    // under the instance ones (0.6 / 0.7): nothing shed, however many requests
    await pool(2.5);
    for (let i = 0; i < 60; i++) for (const c of ['standard', 'sheddable']) assert.equal((await send(c)).localReply, undefined, `${c} ${i} at normal load`);
    // 0.8 everywhere but no server reporting growth: standard served (the filter's pressure alone never overloads the pool)
    await pool(8);
    for (let i = 0; i < 30; i++) assert.equal((await send('standard')).localReply, undefined, `standard ${i} at 0.8, no evidence`);
    // overload: one server of four reports its queue growing; standard shed by the instance threshold
    await pool(8, 1);
    for (let i = 0; i < 30; i++) assert.equal((await send('standard')).localReply?.status, 429, `standard ${i} at 0.8`);
    // the pool back at 0.25 while overloaded: held at the pool thresholds, critical still served
    await pool(2.5);
    assert.equal((await send('standard')).localReply?.status, 429, 'standard at 0.25, overloaded');
    assert.equal((await send('sheddable')).localReply?.status, 429, 'sheddable at 0.25, overloaded');
    assert.equal((await send('critical')).localReply, undefined, 'critical');
    // at 0.18: sheddable shed, standard sent
    await pool(1.8);
    assert.equal((await send('standard')).localReply, undefined, 'standard at 0.18');
    assert.equal((await send('sheddable')).localReply?.status, 429, 'sheddable at 0.18');
    // the pool drains (0.1), the last evidence 3 s old: nothing shed, the share falls, and 0.25 is admitted again
    await b.host.advance(3000);
    await pool(1);
    for (let i = 0; i < 100; i++) assert.equal((await send('standard')).localReply, undefined, `standard ${i} at 0.1`);
    await pool(2.5);
    for (const c of ['standard', 'sheddable']) assert.equal((await send(c)).localReply, undefined, `${c} at 0.25 after the overload`);
    // every 429 was sent while the pool was overloaded (entered on the servers' evidence at once):
    // the 30 at 0.8 and the three at 0.25 and 0.18
    await b.host.advance(REFRESH);
    assert.equal(Number(b.host.metric('switchyard.request.shed_standard.llm')), 31);
    assert.equal(Number(b.host.metric('switchyard.request.shed_sheddable.llm')), 2);
    assert.equal(Number(b.host.metric('switchyard.request.shed_overloaded.llm')), 30 + 3);
  } finally {
    await b.host.close();
  }
});

test('overload: an adapter is in its base model\'s pool — once the base model\'s requests overload it, the adapter\'s are held at the pool thresholds too', async () => {
  const b = await bed({}, { service: { picker: 'band', band: 0 } });
  try {
    const ADDRS = ['10.0.0.1:80', '10.0.0.2:80', '10.0.0.3:80', '10.0.0.4:80'];
    const llm = (addr: string): InstanceLlmRecord => ({ service: 'llm', addr, prefillMsPerToken: 0.1, decodeMsPerToken: 10, kvCacheUsage: 0.3, kvSeqs: 10, maxLoras: 2,
      models: [{ name: 'llama-3-8b', flags: MODEL_BASE | MODEL_LOADED }, { name: 'sql-lora', flags: MODEL_LOADED }] });
    const pool = (q: number, growing = 0) => b.serve(ADDRS.map((a, i) => inst(a, { queueDepth: q, slots: 64, queueGrowing: i < growing })), ADDRS.map(llm));
    const send = (model: string, crit: string) => b.chat(chatBody('s', 'q', { model }), { 'x-switchyard-criticality': crit });
    // normal level (0.25 of the KV capacity): the adapter's standard requests are sent
    await pool(2.5);
    assert.equal((await send('sql-lora', 'standard')).localReply, undefined, 'adapter at normal load');
    // the base model's requests overload the pool (0.8, a server's queue growing: shed by the instance threshold)
    await pool(8, 1);
    for (let i = 0; i < 30; i++) assert.equal((await send('llama-3-8b', 'standard')).localReply?.status, 429, `base ${i} at 0.8`);
    // back at 0.25 while overloaded: the adapter's standard and sheddable requests are shed like the base model's, critical sent
    await pool(2.5);
    assert.equal((await send('sql-lora', 'standard')).localReply?.status, 429, 'adapter standard at 0.25, overloaded');
    assert.equal((await send('sql-lora', 'sheddable')).localReply?.status, 429, 'adapter sheddable at 0.25, overloaded');
    assert.equal((await send('sql-lora', 'critical')).localReply, undefined, 'adapter critical');
  } finally {
    await b.host.close();
  }
});

test('Envoy default (allow_on_headers_stop_iteration false): no body callback while held, the watchdog releases the request body-blind — no hang', async () => {
  const b = await bed({ holdTimeoutMs: 50 }, { allow: false });
  try {
    await b.serve(FLEET());
    const seen: string[] = [];
    let done = false;
    const pending = b.host.request({ ':method': 'POST', ':path': '/v1/chat/completions', ':authority': AUTH, ':scheme': 'http' },
      { body: JSON.stringify(chatBody(SYSTEM, 'q')), response: (req) => { seen.push(req.body.toString()); return { status: 200 }; } })
      .then((r) => { done = true; return r; });
    await b.host.advance(20);
    assert.equal(done, false, 'held while the hold timeout runs');
    await b.host.advance(60);
    const r = await pending;
    assert.equal(r.status, 200);
    assert.equal(endpoint(r).length, 1);
    assert.match(debug(r), /fallback="no request body callback within request\.holdTimeoutMs"/);
    assert.deepEqual(seen, [JSON.stringify(chatBody(SYSTEM, 'q'))], 'the body still goes upstream');
    await b.host.advance(REFRESH);
    assert.equal(Number(b.host.metric('switchyard.request.hold_timeout.llm')), 1);
  } finally {
    await b.host.close();
  }
});

test('the filter refuses a request block that does not state the Envoy feature', async () => {
  await assert.rejects(ProxyWasmHost.create({
    wasm: WASM, workers: 1, mainThread: false, canary: false, clock: 'manual', logLevel: 'critical',
    pluginConfig: JSON.stringify({ agent: { cluster: 'a' }, link: { services: [] },
      loadAware: { services: [{ authorities: [AUTH], service: 'llm', request: { maxBodyBytes: 4096 } }] } }),
  }), /loadAware\.services\[0\]\.request\.allowOnHeadersStopIteration: must be true.*allow_on_headers_stop_iteration/);
});

test('model aliases and splits: the upstream is asked for the routed model (body and content-length rewritten); a split is deterministic per x-request-id', async () => {
  const b = await bed({ models: [{ name: 'gpt-4o-mini', aliasOf: 'llama-3-8b' }, { name: 'llama-3-8b', split: [{ to: 'llama-3-8b-v2', percent: 10 }] }] });
  try {
    await b.serve(FLEET());
    const seen: { model: string; length: string | undefined; bytes: number }[] = [];
    const send = (model: string, id: string) => {
      const body = JSON.stringify(chatBody('sys', 'q', { model }));
      return b.host.request(
      { ':method': 'POST', ':path': '/v1/chat/completions', ':authority': AUTH, ':scheme': 'http', 'x-request-id': id, 'content-length': String(Buffer.byteLength(body)) },
      { body, response: (req) => {
        const cl = req.headers.find(([k]: [string, string]) => k === 'content-length');
        seen.push({ model: JSON.parse(req.body.toString()).model, length: cl?.[1], bytes: req.body.length });
        return { status: 200 };
      } });
    };
    await send('gpt-4o-mini', 'a-1');
    assert.equal(seen[0].model, 'llama-3-8b');
    assert.equal(seen[0].length, String(seen[0].bytes));
    const first = new Map<string, string>();
    for (let i = 0; i < 400; i++) {
      await send('llama-3-8b', `req-${i}`);
      first.set(`req-${i}`, seen[seen.length - 1].model);
      assert.equal(seen[seen.length - 1].length, String(seen[seen.length - 1].bytes));
    }
    const v2 = [...first.values()].filter((m) => m === 'llama-3-8b-v2').length;
    assert.ok(v2 >= 20 && v2 <= 65, `${v2} of 400 routed to v2 (10 % expected)`);
    for (const id of ['req-1', 'req-2', 'req-3', 'req-50', 'req-399']) {
      await send('llama-3-8b', id);
      assert.equal(seen[seen.length - 1].model, first.get(id), `retry of ${id} routed as before`);
    }
  } finally {
    await b.host.close();
  }
});

test('an alias with no eligible instance: forwarded degraded (shipped allIneligible), still asking the upstream for the routed model', async () => {
  const b = await bed({ models: [{ name: 'gpt-4o-mini', aliasOf: 'llama-3-8b' }] });
  try {
    await b.serve(FLEET().map((r) => ({ ...r, healthy: false, reason: 'unreachable' as const })));
    const body = JSON.stringify(chatBody('sys', 'q', { model: 'gpt-4o-mini' }));
    let seen: { model: string; length: string | undefined; bytes: number; degraded: string | undefined } | undefined;
    const r = await b.host.request(
      { ':method': 'POST', ':path': '/v1/chat/completions', ':authority': AUTH, ':scheme': 'http', 'content-length': String(Buffer.byteLength(body)) },
      { body, response: (req) => {
        const h = (k: string) => req.headers.find(([n]: [string, string]) => n === k)?.[1];
        seen = { model: JSON.parse(req.body.toString()).model, length: h('content-length'), bytes: req.body.length, degraded: h('x-degraded') };
        return { status: 200 };
      } });
    assert.deepEqual(endpoint(r), [], 'no instance chosen');
    assert.equal(seen?.degraded, 'true', 'forwarded on the default route');
    assert.equal(seen?.model, 'llama-3-8b', 'the default route serves the routed model, not the alias');
    assert.equal(seen?.length, String(seen?.bytes));
  } finally {
    await b.host.close();
  }
});

test('a slow upload is read, not cut short: the hold timeout counts from the last body chunk', async () => {
  const b = await bed({ holdTimeoutMs: 50 });
  try {
    await b.serve(FLEET());
    const body = Buffer.from(JSON.stringify(chatBody(SYSTEM, 'slow')));
    const upstream: { headers: HeaderMap; body: Buffer }[] = [];
    const { stream } = b.host.startStream(new HeaderMap('request', { ':method': 'POST', ':path': '/v1/chat/completions', ':authority': AUTH, ':scheme': 'http' }),
      null, false, { headers() {}, data() {}, reset() {} },
      { send: (_s: HttpStream, headers: HeaderMap, data: Buffer) => { upstream.push({ headers, body: data }); } }, undefined, () => {});
    const parts = 4;
    const step = Math.ceil(body.length / parts);
    for (let k = 0; k < parts; k++) {
      await b.host.advance(40); // each gap is within the timeout, the whole upload is not
      assert.equal(upstream.length, 0, `still held after chunk ${k}`);
      stream.pushRequestData(body.subarray(k * step, (k + 1) * step), k === parts - 1);
    }
    assert.equal(upstream.length, 1);
    assert.equal(upstream[0].body.toString(), body.toString());
    assert.equal(upstream[0].headers.get('x-switchyard-endpoint')?.length ? 1 : 0, 1);
    await b.host.advance(REFRESH);
    assert.equal(Number(b.host.metric('switchyard.request.hold_timeout.llm') ?? 0), 0);
    assert.equal(Number(b.host.metric('switchyard.request.parsed.llm')), 1);
  } finally {
    await b.host.close();
  }
});

test('Envoy default: a held request whose client goes away does not take another held request out of the watchdog', async () => {
  // three requests held at once; the first one's client resets while the others wait for the
  // watchdog (no body callback with Envoy's default): both others must still be released
  const b = await bed({ holdTimeoutMs: 50 }, { allow: false });
  try {
    await b.serve(FLEET());
    const upstream = new Map<string, HeaderMap>();
    const start = (user: string) => b.host.startStream(
      new HeaderMap('request', { ':method': 'POST', ':path': '/v1/chat/completions', ':authority': AUTH, ':scheme': 'http' }),
      [Buffer.from(JSON.stringify(chatBody('sys', user)))], true, { headers() {}, data() {}, reset() {} },
      { send: (_s: HttpStream, headers: HeaderMap, data: Buffer) => { upstream.set(JSON.parse(data.toString()).messages[1].content, headers); } },
      undefined, () => {}).stream;
    const first = start('first');
    start('second');
    start('third');
    await b.host.advance(20);
    assert.equal(upstream.size, 0, 'all three held');
    first.resetStream('downstream_remote_disconnect');
    await b.host.advance(60);
    assert.deepEqual([...upstream.keys()].sort(), ['second', 'third'], 'both remaining requests released by the watchdog');
    for (const k of ['second', 'third']) assert.equal(upstream.get(k)!.get('x-switchyard-endpoint')?.length ? 1 : 0, 1, `${k} has an endpoint`);
    await b.host.advance(REFRESH);
    assert.equal(Number(b.host.metric('switchyard.request.hold_timeout.llm')), 2);
  } finally {
    await b.host.close();
  }
});

test('with an LLM section, every listed model is routed by model (the first one listed too); an unlisted one gets the fallback', async () => {
  const b = await bed();
  try {
    const model = (name: string) => ({ name, flags: MODEL_BASE | MODEL_LOADED });
    const llm = (addr: string, models: string[]): InstanceLlmRecord =>
      ({ service: 'llm', addr, prefillMsPerToken: 0.1, decodeMsPerToken: 10, kvCacheUsage: 0.2, kvSeqs: NaN, maxLoras: 0, models: models.map(model) });
    // llama-3-8b only on instance 1: whichever model the plan lists first, both requests below must
    // go by model, not body-blind
    await b.serve([inst('10.0.0.1:80'), inst('10.0.0.2:80')], [llm('10.0.0.1:80', ['llama-3-8b', 'mistral-7b']), llm('10.0.0.2:80', ['mistral-7b'])]);
    for (let i = 0; i < 12; i++) {
      const r = await b.chat(chatBody('sys', `llama ${i}`));
      assert.deepEqual(endpoint(r), ['10.0.0.1:80'], `llama-3-8b request ${i}: ${debug(r)}`);
      assert.match(debug(r), / model=llama-3-8b /);
      const m = await b.chat(chatBody('sys', `mistral ${i}`, { model: 'mistral-7b' }));
      assert.equal(endpoint(m).length, 1);
      assert.match(debug(m), / model=mistral-7b /, `mistral-7b request ${i} routed by model: ${debug(m)}`);
    }
    await b.host.advance(REFRESH);
    assert.equal(Number(b.host.metric('switchyard.request.unknown_model.llm') ?? 0), 0);
    const u = await b.chat(chatBody('sys', 'q', { model: 'gpt-5' }));
    assert.match(debug(u), /fallback="model "gpt-5" is not served by llm"/);
    await b.host.advance(REFRESH);
    assert.equal(Number(b.host.metric('switchyard.request.unknown_model.llm')), 1);
  } finally {
    await b.host.close();
  }
});
