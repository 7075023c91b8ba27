// Every documented engine end to end: a fixture page per engine (test/fixtures/engines/, written
// from the engine's documented metric names, each file says where they are documented) is served
// from a local HTTP server whose counters and histograms grow at a fixed rate (every cumulative
// value x (1 + GROWTH·t): the ratios the estimates rest on are the page's own, λ = count x GROWTH);
// the real agent scrapes it and publishes the instance routable with the page's numbers, and the
// real filter in the embedded host (allIneligible reject-503, so a route proves it priced the
// instance) routes to it. For the LLM engines the request is a chat body with the fields the size
// estimate now reads (tools, an image part, n, max_tokens written 100.0) under onInvalid
// reject-400, so a body the filter could not read would get a 400.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { startAgent, type AgentHandle } from '../../agent/src';
import { decodeSnapshot, type InstanceRecord } from '../../agent/src/snapshot/codec';
import type { InstanceLlmRecord } from '../../agent/src/snapshot/llm';
import { ProxyWasmHost, type RequestResult } from '../../host/src';
import { header, metricAfterTick, pluginConfig, ROOT, until, WASM } from './helpers';

const FIX = path.join(ROOT, 'test/fixtures/engines');
const AUTH = 'engine.example';
/** cumulative values grow by this fraction of the page per second */
const GROWTH = 0.01;

/**
 * The page with every counter / histogram / summary-count sample scaled by (1 + GROWTH·t), t in s
 * since the server started (gauges as written). Sample names map to their family through the TYPE
 * lines (suffixes _total, _bucket, _sum, _count).
 */
export function grownPage(text: string, t: number): string {
  const types = new Map<string, string>();
  const f = 1 + GROWTH * t;
  return text.split('\n').map((line) => {
    const m = /^# TYPE (\S+) (\S+)/.exec(line);
    if (m) types.set(m[1], m[2]);
    if (line === '' || line.startsWith('#')) return line;
    const name = /^[^{\s]+/.exec(line)![0];
    const fam = [name, name.replace(/_(total|bucket|sum|count)$/, '')].map((n) => types.get(n)).find((x) => x !== undefined);
    const cumulative = fam === 'counter' || fam === 'histogram' || (fam === 'summary' && /_(sum|count)$/.test(name));
    if (!cumulative) return line;
    const i = line.lastIndexOf(' ');
    return `${line.slice(0, i)} ${Number(line.slice(i + 1)) * f}`;
  }).join('\n');
}

interface PageServer {
  addr: string;
  close(): Promise<void>;
  hits: Map<string, number>;
}

/** /metrics: the grown page; other paths: `json` (e.g. /v1/models, Triton's /v2/models/<m>/config). */
async function servePage(page: string, json: Record<string, string> = {}): Promise<PageServer> {
  const text = fs.readFileSync(path.join(FIX, page), 'utf8');
  const t0 = performance.now();
  const hits = new Map<string, number>();
  const srv = http.createServer((req, res) => {
    const url = req.url ?? '';
    hits.set(url, (hits.get(url) ?? 0) + 1);
    if (url === '/metrics') {
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
      res.end(grownPage(text, (performance.now() - t0) / 1000));
    } else if (json[url] !== undefined) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(json[url]);
    } else {
      res.writeHead(404);
      res.end();
    }
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  return { addr: `127.0.0.1:${(srv.address() as AddressInfo).port}`, hits, close: () => new Promise<void>((r) => srv.close(() => r())) };
}

interface Bed {
  agent: AgentHandle;
  host: ProxyWasmHost;
  doc(): Promise<{ inst: InstanceRecord; llm?: InstanceLlmRecord }>;
  details(): Promise<Record<string, unknown>>;
  stop(): Promise<void>;
}

async function bed(service: Record<string, unknown>, addr: string, request?: Record<string, unknown>): Promise<Bed> {
  const agent = await startAgent({
    listen: { host: '127.0.0.1', port: 0 },
    publishIntervalMs: 100,
    link: { peers: [] },
    inference: { scrapeIntervalMs: 100, services: [{ name: 'svc', instances: { static: [addr] }, ...service }] },
  } as any, { logger: pino({ level: 'silent' }), defaultMetrics: false });
  const host = await ProxyWasmHost.create({
    wasm: WASM, workers: 1, logLevel: 'info', allowOnHeadersStopIteration: true,
    clusters: { switchyard_agent: { address: '127.0.0.1', port: agent.port } },
    pluginConfig: pluginConfig({
      loadAware: { services: [{ authorities: [AUTH], service: 'svc', allIneligible: 'reject-503', debug: true,
        ...(request ? { request: { allowOnHeadersStopIteration: true, onInvalid: 'reject-400', ...request } } : {}) }] },
    }, { services: [] }),
  });
  return {
    agent, host,
    doc: async () => {
      const s = decodeSnapshot(Buffer.from(await (await fetch(`${agent.url}/v1/snapshot`)).arrayBuffer()));
      return { inst: s.instances?.[0] as InstanceRecord, llm: s.llm?.[0] };
    },
    details: async () => {
      const r = await fetch(`${agent.url}/v1/instances`);
      return r.ok ? ((await r.json()) as Record<string, unknown>) : {};
    },
    stop: async () => {
      await host.close();
      await agent.stop();
    },
  };
}

/** Within `rel` of `want` (f32 on the wire, λ from wall-clock scrapes). */
function near(got: number, want: number, rel: number, what: string): void {
  assert.ok(Math.abs(got - want) <= rel * Math.abs(want), `${what}: ${got}, want ${want} ±${rel * 100} %`);
}

/** Waits for the instance measured (E[S] from the page) and healthy; returns the record. */
async function measured(b: Bed): Promise<{ inst: InstanceRecord; llm?: InstanceLlmRecord }> {
  let last: unknown;
  await until(async () => {
    const d = await b.doc();
    last = d.inst;
    return d.inst !== undefined && d.inst.healthy && d.inst.esSource === 'measured' && d.inst.lambdaPerS > 0;
  }, 15_000, 'the instance published healthy with measured E[S]').catch((e) => {
    throw new Error(`${(e as Error).message}; last record ${JSON.stringify(last)}`);
  });
  // a few more scrapes: λ over more than one interval
  await new Promise((r) => setTimeout(r, 600));
  return b.doc();
}

const CHAT = (model: string) => JSON.stringify({
  model, n: 2, max_tokens: 100.0,
  tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }],
  messages: [{ role: 'user', content: [{ type: 'text', text: 'What is in this picture, and the weather there?' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=', detail: 'low' } }] }],
}).replace('"max_tokens":100', '"max_tokens":100.0');

async function routesChat(b: Bed, addr: string, model: string): Promise<void> {
  let r: RequestResult | undefined;
  await until(async () => {
    r = await b.host.request({ ':method': 'POST', ':path': '/v1/chat/completions', ':authority': AUTH, ':scheme': 'http', 'content-type': 'application/json' }, { body: CHAT(model) });
    return !r.localReply && header(r.upstreamHeaders, 'x-switchyard-endpoint')[0] === addr;
  }, 10_000, 'the filter routes the chat request to the instance').catch((e) => {
    throw new Error(`${(e as Error).message}: ${JSON.stringify(r?.localReply)}`);
  });
  assert.ok((await metricAfterTick(b.host, 'switchyard.request.parsed.svc')) >= 1, 'the body was read (request-aware), not refused');
  assert.equal(await metricAfterTick(b.host, 'switchyard.request.invalid.svc'), 0);
}

async function routesPlain(b: Bed, addr: string): Promise<void> {
  let r: RequestResult | undefined;
  await until(async () => {
    r = await b.host.request({ ':method': 'POST', ':path': '/v2/models/m/infer', ':authority': AUTH, ':scheme': 'http' });
    return !r.localReply && header(r.upstreamHeaders, 'x-switchyard-endpoint')[0] === addr;
  }, 10_000, 'the filter routes to the instance').catch((e) => {
    throw new Error(`${(e as Error).message}: ${JSON.stringify(r?.localReply)}`);
  });
}

const MODELS = (id: string) => ({ '/v1/models': JSON.stringify({ object: 'list', data: [{ id, object: 'model' }] }) });

test('vLLM V1 page: routable with its numbers (E[S] from request_inference_time, KV from kv_cache_usage_perc, per-token terms from prefill/ITL and the prefix counters)', async () => {
  const page = await servePage('vllm-v1.txt', MODELS('llama-3-8b'));
  const b = await bed({ kind: 'vllm' }, page.addr, {});
  try {
    const { inst, llm } = await measured(b);
    near(inst.esMs, 1200, 1e-4, 'E[S]');
    near(inst.lambdaPerS, 200 * GROWTH, 0.25, 'λ');
    assert.equal(inst.queueDepth, 4);
    assert.equal(inst.slots, 5, 'inferred: 4 running, never queued, + margin');
    assert.ok(inst.rho > 0 && inst.rho < 0.95, `rho ${inst.rho}`);
    near(llm!.kvCacheUsage, 0.25, 1e-6, 'KV use');
    near(llm!.prefillMsPerToken, 0.3125, 1e-3, 'prefill ms/token');
    near(llm!.decodeMsPerToken, 10, 1e-3, 'decode ms/token');
    await routesChat(b, page.addr, 'llama-3-8b');
  } finally {
    await b.stop();
    await page.close();
  }
});

test('vLLM V0 page: the V0 names (gpu_cache_usage_perc, time_per_output_token, the hit-rate gauge, e2e as the service histogram)', async () => {
  const page = await servePage('vllm-v0.txt', MODELS('llama-3-8b'));
  const b = await bed({ kind: 'vllm' }, page.addr, {});
  try {
    const { inst, llm } = await measured(b);
    near(inst.esMs, 1500, 1e-4, 'E[S]');
    near(inst.lambdaPerS, 100 * GROWTH, 0.25, 'λ');
    assert.equal(inst.queueDepth, 2);
    near(llm!.kvCacheUsage, 0.5, 1e-6, 'KV use');
    near(llm!.prefillMsPerToken, 0.46875, 1e-3, 'prefill ms/token (TTFT − queue over the uncached share)');
    near(llm!.decodeMsPerToken, 12, 1e-3, 'decode ms/token');
    await routesChat(b, page.addr, 'llama-3-8b');
  } finally {
    await b.stop();
    await page.close();
  }
});

test('SGLang page: a built-in kind in both sections (queue, slots, KV token_usage, per-token terms, cached tokens)', async () => {
  const page = await servePage('sglang.txt', MODELS('qwen2-7b'));
  const b = await bed({ kind: 'sglang' }, page.addr, {});
  try {
    const { inst, llm } = await measured(b);
    near(inst.esMs, 2000, 1e-4, 'E[S] (e2e)');
    near(inst.lambdaPerS, 300 * GROWTH, 0.25, 'λ');
    assert.equal(inst.queueDepth, 6, 'num_queue_reqs 0 + num_running_reqs 6');
    assert.equal(inst.slots, 16, 'max_running_requests');
    assert.equal(inst.slotsSource, 'exporter');
    assert.ok(llm, 'kind sglang publishes the LLM section by default');
    assert.deepEqual(llm!.models.map((m) => m.name), ['qwen2-7b'], '/v1/models fetched by default');
    near(llm!.kvCacheUsage, 0.3, 1e-6, 'KV use (token_usage)');
    near(llm!.kvSeqs, 20, 1e-6, 'KV capacity: 6 running / 0.3');
    near(llm!.prefillMsPerToken, 0.15, 1e-3, 'prefill ms/token');
    near(llm!.decodeMsPerToken, 15, 1e-3, 'decode ms/token');
    await routesChat(b, page.addr, 'qwen2-7b');
  } finally {
    await b.stop();
    await page.close();
  }
});

test('TGI page: routable with its numbers (a chat body through its Messages API)', async () => {
  const page = await servePage('tgi.txt');
  const b = await bed({ kind: 'tgi' }, page.addr, {});
  try {
    const { inst } = await measured(b);
    near(inst.esMs, 800, 1e-4, 'E[S] (request_inference_duration)');
    near(inst.lambdaPerS, 150 * GROWTH, 0.25, 'λ');
    assert.equal(inst.queueDepth, 4);
    await routesChat(b, page.addr, 'tgi');
  } finally {
    await b.stop();
    await page.close();
  }
});

test('Triton ensemble page without a pending gauge: measured per top-level model, slots from instance_group, queue unknown priced by Little\'s law, routable', async () => {
  const cfg = (m: string) => fs.readFileSync(path.join(FIX, 'triton-config', `${m}.json`), 'utf8');
  const page = await servePage('triton-ensemble.txt', Object.fromEntries(['text_pipeline', 'tokenizer', 'bert'].map((m) => [`/v2/models/${m}/config`, cfg(m)])));
  const b = await bed({ kind: 'triton' }, page.addr);
  try {
    const { inst } = await measured(b);
    near(inst.esMs, 250, 1e-4, 'E[S] of the ensemble alone (request − queue), not averaged with its steps (158 ms)');
    near(inst.lambdaPerS, 1000 * GROWTH, 0.25, 'λ: each request once, not three times');
    assert.equal(inst.slots, 4, 'min(tokenizer 8 CPU instances, bert 2 per GPU x 2 GPUs)');
    assert.equal(inst.slotsSource, 'exporter');
    // queue unknown: λ·(E[S] + E[Wq]) = 10/s x (0.25 + 0.05) s = 3
    near(inst.queueDepth, 1000 * GROWTH * 0.3, 0.25, 'Little stand-in for the queue');
    near(inst.gpuUtil, 0.4, 1e-6, 'Triton\'s own GPU gauges');
    assert.ok(inst.rho < 0.95, `rho ${inst.rho}`);
    assert.ok((page.hits.get('/v2/models/text_pipeline/config') ?? 0) >= 1 && (page.hits.get('/v2/models/bert/config') ?? 0) >= 1);
    await routesPlain(b, page.addr);
  } finally {
    await b.stop();
    await page.close();
  }
});

test('DCGM paired: the GPU exporter\'s utilisation is the inference instance\'s gpuUtil; a failed GPU scrape leaves the instance routable', async () => {
  const page = await servePage('tgi.txt');
  const gpu = await servePage('dcgm.txt');
  // a GPU-only exporter is not an instance of its own: kind dcgm is refused, naming the field
  await assert.rejects(bed({ kind: 'dcgm' }, gpu.addr), /inference\.services\[0\]\.kind/);
  const paired = await bed({ kind: 'tgi', gpu: { static: { [page.addr]: gpu.addr } } }, page.addr);
  try {
    const { inst } = await measured(paired);
    await until(async () => Math.abs((await paired.doc()).inst.gpuUtil - 0.8) < 1e-6, 5000, 'gpuUtil from the paired DCGM page');
    near(inst.esMs, 800, 1e-4, 'E[S] from the inference page');
    assert.ok((gpu.hits.get('/metrics') ?? 0) >= 2, 'the exporter is scraped with the instance');
    await routesPlain(paired, page.addr);
    // the exporter goes away: GPU use unknown, the instance still priced by its load
    await gpu.close();
    await until(async () => Number.isNaN((await paired.doc()).inst.gpuUtil), 5000, 'gpuUtil unknown once the exporter is down');
    const after = (await paired.doc()).inst;
    assert.equal(after.healthy, true);
    await routesPlain(paired, page.addr);
  } finally {
    await paired.stop();
    await page.close();
  }
});
