// Model routing and LoRA affinity end to end: live LLM simulators (sim/inference-server.ts --mode
// llm) scraped by the real agent (GET /v1/models, vllm:lora_requests_info), its snapshot's LLM
// section fed to the real filter in the embedded host (request-aware service, bodies read). The
// as-pect specs pin the same decisions on hand-built snapshots; these pin that the agent's
// document actually carries what the filter needs.
//
// Fleet (one for the file, started in parallel to keep it within ~20 s):
//   L1, L2  llama-3-8b with adapters sql/chat/code/math-lora, max-loras 2
//   L3      same, and also serves qwen-7b-v2 (the split's target)
//   M       mistral-7b and qwen-7b, no adapters
// The adapter-listing test starts its own agent and filter over L1 and a mistral server with
// LoRA room (B). Requests the filter routes are forwarded to the chosen simulator where the
// answer matters (200 vs 404), else answered by the host.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { startAgent, type AgentHandle } from '../../agent/src';
import { decodeSnapshot } from '../../agent/src/snapshot/codec';
import { MODEL_LOADED } from '../../agent/src/snapshot/llm';
import { ProxyWasmHost, type RequestResult, type UpstreamReply, type UpstreamRequest } from '../../host/src';
import { startLlmSim, type SimProcess } from '../inference/llm-sim-helpers';
import { WASM, header, metricAfterTick, pluginConfig, until } from './helpers';

const AUTH = 'inference.example';
const ADAPTERS = ['--adapters', 'sql-lora,chat-lora,code-lora,math-lora:llama-3-8b', '--max-loras', '2'];

let L1: SimProcess, L2: SimProcess, L3: SimProcess, M: SimProcess;
let sims: SimProcess[] = [];
let agent: AgentHandle;
let host: ProxyWasmHost;

before(async () => {
  sims = await Promise.all([
    startLlmSim(['--model-name', 'llama-3-8b', ...ADAPTERS]),
    startLlmSim(['--model-name', 'llama-3-8b', ...ADAPTERS]),
    startLlmSim(['--model-name', 'llama-3-8b,qwen-7b-v2', ...ADAPTERS]),
    startLlmSim(['--model-name', 'mistral-7b,qwen-7b']),
  ]);
  [L1, L2, L3, M] = sims;
  ({ agent, host } = await startBed(sims));
  // the agent has every instance's model list and the filter has adopted the document with it
  await until(async () => {
    const s = await snapshot();
    return (s.instances ?? []).length === 4 && s.instances!.every((r) => r.healthy) && (s.llm ?? []).length === 4 &&
      s.llm!.every((l) => l.models.length >= 2);
  }, 15_000, 'four healthy instances with their model lists');
  await until(async () => endpoint(await send('mistral-7b')).join() === M.addr, 10_000, 'the filter routes by model');
  // and it holds the document in which the llama servers' lists are known too (the one that routed
  // mistral may be an earlier publication, with only M's list: llama then had no eligible instance)
  await until(async () => [L1.addr, L2.addr, L3.addr].includes(endpoint(await send('llama-3-8b')).join()), 10_000, 'the filter routes llama-3-8b');
});

/** The real agent scraping `fleet` (service llm) and the real filter polling it, request-aware. */
async function startBed(fleet: SimProcess[]): Promise<{ agent: AgentHandle; host: ProxyWasmHost }> {
  const agent = await startAgent({
    listen: { host: '127.0.0.1', port: 0 },
    publishIntervalMs: 100,
    link: { peers: [] },
    inference: { scrapeIntervalMs: 100, services: [{ name: 'llm', kind: 'vllm', instances: { static: fleet.map((s) => s.addr) },
      // configured, not inferred: the LoRA test's pinned requests must weigh as backlog per slot
      concurrency: 4 }] },
  } as any, { logger: pino({ level: 'silent' }), defaultMetrics: false });
  const host = await ProxyWasmHost.create({ wasm: WASM, workers: 1, logLevel: 'info', allowOnHeadersStopIteration: true,
    clusters: { switchyard_agent: { address: '127.0.0.1', port: agent.port } }, pluginConfig: pluginConfig({
      loadAware: { services: [{ authorities: [AUTH], service: 'llm', debug: true, request: {
        allowOnHeadersStopIteration: true,
        models: [{ name: 'gpt-4o-mini', aliasOf: 'mistral-7b' }, { name: 'qwen-7b', split: [{ to: 'qwen-7b-v2', percent: 40 }] }],
      } }] },
    }, { services: [] }) });
  return { agent, host };
}

after(async () => {
  await host?.close();
  await agent?.stop();
  await Promise.all(sims.map((s) => s.stop()));
});

async function snapshot(a = agent) {
  return decodeSnapshot(Buffer.from(await (await fetch(`${a.url}/v1/snapshot`)).arrayBuffer()));
}

const endpoint = (r: RequestResult) => header(r.upstreamHeaders, 'x-switchyard-endpoint');
const debug = (r: RequestResult) => header(r.responseHeaders, 'x-switchyard-debug')[0] ?? '';

/** What reached the upstream and, when forwarded, what the simulator at the chosen endpoint answered. */
interface Sent {
  result: RequestResult;
  /** the model in the body the upstream received */
  upstreamModel?: string;
  simStatus?: number;
}

/** Forwards the request as the host hands it upstream to the simulator the filter chose (Envoy's original-dst). */
async function forward(req: UpstreamRequest, out: Sent): Promise<UpstreamReply> {
  const hdr = (k: string) => req.headers.find(([n]) => n === k)?.[1];
  out.upstreamModel = JSON.parse(req.body.toString()).model;
  const res = await fetch(`http://${hdr('x-switchyard-endpoint')}${hdr(':path')}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: new Uint8Array(req.body) });
  out.simStatus = res.status;
  return { status: res.status, body: Buffer.from(await res.arrayBuffer()) };
}

async function sendFull(model: string, opts: { id?: string; forward?: boolean; tiny?: boolean; host?: ProxyWasmHost } = {}): Promise<Sent> {
  const body = JSON.stringify({ model, prompt: opts.tiny ? 'hi' : `say something about ${model} ${opts.id ?? ''}`, max_tokens: opts.tiny ? 1 : 2 });
  const out: Sent = {} as Sent;
  const h: Record<string, string> = { ':method': 'POST', ':path': '/v1/completions', ':authority': AUTH, ':scheme': 'http',
    'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) };
  if (opts.id) h['x-request-id'] = opts.id;
  out.result = await (opts.host ?? host).request(h, { body, response: (req) => {
    if (opts.forward) return forward(req, out);
    out.upstreamModel = JSON.parse(req.body.toString()).model;
    return { status: 200 };
  } });
  return out;
}

const send = async (model: string) => (await sendFull(model)).result;
/** A near-empty request: its size terms (learned per instance, noisy at this scale) stay far below the load differences. */
const sendTiny = async (model: string) => (await sendFull(model, { tiny: true })).result;

test('model routing: each base model only goes to the instances serving it; an unknown model falls back body-blind (shipped onInvalid), counted', async () => {
  const llama = new Set([L1.addr, L2.addr, L3.addr]);
  const seen = new Set<string>();
  for (let i = 0; i < 15; i++) {
    const s = await sendFull('llama-3-8b', { forward: true, id: `l-${i}` });
    const e = endpoint(s.result);
    assert.equal(e.length, 1, `llama-3-8b request ${i}: no endpoint (${debug(s.result)})`);
    assert.ok(llama.has(e[0]), `llama-3-8b request ${i} went to ${e[0]} (${debug(s.result)})`);
    assert.equal(s.simStatus, 200);
    seen.add(e[0]);
  }
  assert.ok(seen.size >= 2, `llama-3-8b is spread over its instances: ${[...seen]}`);
  for (let i = 0; i < 10; i++) {
    const s = await sendFull('mistral-7b', { forward: true, id: `m-${i}` });
    assert.deepEqual(endpoint(s.result), [M.addr], `mistral-7b request ${i}: ${debug(s.result)}`);
    assert.equal(s.simStatus, 200);
  }
  // an adapter is a model too: never the instance without adapters
  for (let i = 0; i < 10; i++) {
    const r = await send('sql-lora');
    assert.ok(llama.has(endpoint(r)[0]), `sql-lora went to ${endpoint(r)[0]}`);
  }
  // documented (docs/contracts.md request.onInvalid, default fallback): body-blind choice, the
  // reason in the debug header, counted as unknown_model; the simulator then answers 404 itself
  const before = await metricAfterTick(host, 'switchyard.request.unknown_model.llm');
  const u = await sendFull('gpt-5', { forward: true });
  assert.equal(u.result.localReply, undefined);
  assert.equal(endpoint(u.result).length, 1);
  assert.match(debug(u.result), /fallback="model "gpt-5" is not served by llm"/);
  assert.equal(u.simStatus, 404);
  // counters reach the host on the filter's tick: wait for it rather than for a fixed time
  await until(() => (host.metric('switchyard.request.unknown_model.llm') ?? 0) === before + 1, 2000, 'unknown_model counted once');
  await metricAfterTick(host, 'switchyard.request.unknown_model.llm');
  assert.equal(host.metric('switchyard.request.unknown_model.llm') ?? 0, before + 1);
});

test('alias and weighted split from the plugin config: routed to the instances serving the target, body rewritten, the simulator answers 200', async () => {
  // the simulator itself does not know the alias: without the rewrite it would be a 404
  assert.equal((await fetch(`${M.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-4o-mini', prompt: 'x', max_tokens: 1 }) })).status, 404);
  for (let i = 0; i < 5; i++) {
    const s = await sendFull('gpt-4o-mini', { forward: true, id: `a-${i}` });
    assert.deepEqual(endpoint(s.result), [M.addr], debug(s.result));
    assert.equal(s.upstreamModel, 'mistral-7b');
    assert.equal(s.simStatus, 200);
  }
  const routed: Record<string, number> = { 'qwen-7b': 0, 'qwen-7b-v2': 0 };
  for (let i = 0; i < 40; i++) {
    const s = await sendFull('qwen-7b', { forward: true, id: `q-${i}` });
    assert.equal(s.simStatus, 200, `q-${i} as ${s.upstreamModel}`);
    assert.ok(s.upstreamModel! in routed, String(s.upstreamModel));
    routed[s.upstreamModel!]++;
    // qwen-7b only on M, qwen-7b-v2 only on L3
    assert.deepEqual(endpoint(s.result), [s.upstreamModel === 'qwen-7b-v2' ? L3.addr : M.addr], `q-${i}: ${debug(s.result)}`);
    assert.match(debug(s.result), new RegExp(` model=${s.upstreamModel} `));
  }
  assert.ok(routed['qwen-7b-v2'] >= 6 && routed['qwen-7b-v2'] <= 28, `40 % of 40 expected on v2: ${JSON.stringify(routed)}`);
});

test('an adapter goes only to instances that list it, not to any instance with LoRA capacity (another base model\'s server answers 404)', async () => {
  // B serves another base model with its own adapter and has LoRA room; it does not register sql-lora
  const B = await startLlmSim(['--model-name', 'mistral-7b', '--adapters', 'mistral-lora:mistral-7b', '--max-loras', '2']);
  const bed = await startBed([L1, B]);
  try {
    await until(async () => {
      const s = await snapshot(bed.agent);
      return (s.llm ?? []).length === 2 && s.instances!.every((r) => r.healthy) && s.llm!.every((l) => l.models.length >= 2);
    }, 15_000, 'both instances with their model lists');
    await until(async () => endpoint((await sendFull('mistral-lora', { host: bed.host })).result).join() === B.addr, 10_000, 'the filter routes by model');
    const to: string[] = [];
    for (let i = 0; i < 12; i++) {
      const s = await sendFull('sql-lora', { host: bed.host, forward: true, tiny: true });
      to.push(`${endpoint(s.result)[0] === B.addr ? 'B' : 'L1'}:${s.simStatus}`);
    }
    // routing is the point: every request to L1, and none answered 404 (the first may still be in
    // the simulator's adapter load when the host's upstream call returns on a loaded machine)
    assert.ok(to.every((x) => x.startsWith('L1:') && x !== 'L1:404'), `sql-lora is registered on L1 only: ${to}`);
    assert.ok(to.filter((x) => x === 'L1:200').length >= 10, `the simulator answers sql-lora on L1: ${to}`);
  } finally {
    await bed.host.close();
    await bed.agent.stop();
    await B.stop();
  }
});

test('LoRA affinity: the instance with the adapter loaded is preferred; an instance at max-loras with other adapters pinned is avoided', async (t) => {
  // long streaming requests keep adapters running (vLLM's lora_requests_info names adapters of
  // running requests): L1 runs sql-lora, L3 runs chat-lora + code-lora (= max-loras 2: full).
  // Base-model pins make L3 the least loaded instance, so only the adapter capacity keeps it out.
  const aborts: AbortController[] = [];
  const pin = (sim: SimProcess, model: string) => {
    const ac = new AbortController();
    aborts.push(ac);
    fetch(`${sim.url}/v1/completions`, { method: 'POST', signal: ac.signal, headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model, prompt: `pin ${model}`, max_tokens: 5000, stream: true }) })
      .then(async (r) => { for await (const _ of r.body!); }).catch(() => {}); // read until aborted: a disconnect aborts the request
  };
  t.after(() => aborts.forEach((a) => a.abort()));
  // 6 per 4 slots on L1 and L2 (pool pressure 1.5 < standardAt 2: standard requests are not shed), 2 on L3
  pin(L1, 'sql-lora');
  for (let i = 0; i < 5; i++) pin(L1, 'llama-3-8b');
  for (let i = 0; i < 6; i++) pin(L2, 'llama-3-8b');
  pin(L3, 'chat-lora'); pin(L3, 'code-lora');
  const flags = (s: Awaited<ReturnType<typeof snapshot>>, sim: SimProcess, model: string) =>
    s.llm!.find((l) => l.addr === sim.addr)?.models.find((m) => m.name === model)?.flags ?? 0;
  await until(async () => {
    const s = await snapshot();
    return (flags(s, L1, 'sql-lora') & MODEL_LOADED) !== 0 && (flags(s, L3, 'chat-lora') & MODEL_LOADED) !== 0 &&
      (flags(s, L3, 'code-lora') & MODEL_LOADED) !== 0 && (flags(s, L2, 'sql-lora') & MODEL_LOADED) === 0 &&
      s.instances!.find((r) => r.addr === L2.addr)!.queueDepth >= 6 && s.instances!.find((r) => r.addr === L1.addr)!.queueDepth >= 6;
  }, 10_000, 'the agent publishes the running adapters and the pinned load').catch(async (e) => {
    const s = await snapshot();
    throw new Error(`${(e as Error).message}: ${JSON.stringify({ llm: s.llm, q: s.instances!.map((r) => [r.addr, r.queueDepth]) })}`);
  });
  const s = await snapshot();
  assert.equal(s.llm!.find((l) => l.addr === L3.addr)!.maxLoras, 2);
  await new Promise((r) => setTimeout(r, 300)); // the filter's next poll adopts that document

  // the base model (no adapter restriction) goes to L3, the least loaded: the pins load the others
  // (the shipped request picker draws within 10 % of the cheapest: compare the lowest priced cost
  // of each instance's picks, from the debug header, with that tolerance)
  const costs = new Map<string, number>();
  for (let i = 0; i < 20; i++) {
    const r = await sendTiny('llama-3-8b');
    const c = Number(/ cost_ms=([\d.]+)/.exec(debug(r))?.[1]);
    costs.set(endpoint(r)[0], Math.min(c, costs.get(endpoint(r)[0]) ?? Infinity));
  }
  const l3 = costs.get(L3.addr);
  assert.ok(l3 !== undefined && [...costs].every(([a, c]) => a === L3.addr || c >= l3 / 1.1),
    `L3 is the cheapest by load, so the avoidance below is the adapter capacity: ${JSON.stringify([...costs])}`);
  // sql-lora: loaded on L1; L2 would have to load it; L3 has no room
  for (let i = 0; i < 10; i++) {
    const r = await sendTiny('sql-lora');
    assert.deepEqual(endpoint(r), [L1.addr], `sql-lora request ${i}: ${debug(r)}`);
    assert.match(debug(r), / eligible=2 /, 'L3 (full) and M (no adapters) left out');
  }
  // math-lora: loaded nowhere; L1 and L2 have room, L3 is full with pinned adapters
  for (let i = 0; i < 10; i++) {
    const r = await sendTiny('math-lora');
    assert.notEqual(endpoint(r)[0], L3.addr, `math-lora request ${i}: ${debug(r)}`);
    assert.match(debug(r), / eligible=2 /, 'L3 (full) and M (no adapters) left out');
  }
  // chat-lora is running on L3: full, but a loaded adapter needs no slot, so L3 stays a candidate
  const chat: string[] = [];
  for (let i = 0; i < 10; i++) {
    const r = await sendTiny('chat-lora');
    assert.match(debug(r), / eligible=3 /);
    chat.push(endpoint(r)[0]);
  }
  assert.ok(chat.includes(L3.addr), `chat-lora: ${chat}`);
});
