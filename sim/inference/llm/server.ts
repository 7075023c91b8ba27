// Real-time HTTP front of the LLM engine: OpenAI /v1/completions and /v1/chat/completions
// (JSON, or SSE with the first chunk at time-to-first-token), GET /v1/models, vLLM-style
// /metrics. The engine runs one step at a time; a step's events are delivered when the wall
// clock reaches the step's end.
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { LlmEngine, type LlmEngineConfig, type LlmRequest, type StepResult } from './engine';
import { BadRequest, parseOpenAiRequest } from './openai';
import { renderLlmVllm } from './render';
import { DEFAULT_BYTES_PER_TOKEN } from './tokens';

export interface LlmServerOptions {
  port?: number;
  host?: string;
  name?: string;
  engine?: Partial<LlmEngineConfig>;
  bytesPerToken?: number;
  /** max_tokens when the body has none */
  defaultMaxTokens?: number;
  /** request bodies above this are answered 413 */
  maxBodyBytes?: number;
}

export interface LlmServerStats {
  name: string;
  waiting: number;
  running: number;
  finished: number;
  aborted: number;
  kvUsage: number;
  cachedBlocks: number;
  prefixHitRate: number;
  loadedAdapters: string[];
  preemptions: number;
  adapterLoads: number;
}

export interface LlmServerHandle {
  url: string;
  port: number;
  addr: string;
  engine: LlmEngine;
  stats(): LlmServerStats;
  stop(): Promise<void>;
}

interface Pending {
  res: http.ServerResponse;
  stream: boolean;
  api: 'completions' | 'chat';
  created: number;
  req: LlmRequest;
}

const TOKEN_TEXT = 'tok ';

export async function startLlmServer(opts: LlmServerOptions = {}): Promise<LlmServerHandle> {
  const engine = new LlmEngine(opts.engine);
  const name = opts.name ?? 'sim-llm';
  const bpt = opts.bytesPerToken ?? DEFAULT_BYTES_PER_TOKEN;
  const defaultMaxTokens = opts.defaultMaxTokens ?? 16;
  const maxBody = opts.maxBodyBytes ?? 4 * 1024 * 1024;
  const now = (): number => performance.now();
  engine.idleUntil(now());
  const pendings = new Map<LlmRequest, Pending>();
  let timer: NodeJS.Timeout | null = null;
  let stopped = false;

  const sse = (p: Pending, obj: unknown): void => {
    if (!p.res.writableEnded && !p.res.destroyed) p.res.write(`data: ${JSON.stringify(obj)}\n\n`);
  };
  const chunk = (p: Pending, text: string, finish: string | null): unknown =>
    p.api === 'chat'
      ? { id: p.req.id, object: 'chat.completion.chunk', created: p.created, model: p.req.model, choices: [{ index: 0, delta: p.req.generated <= 1 ? { role: 'assistant', content: text } : { content: text }, finish_reason: finish }] }
      : { id: p.req.id, object: 'text_completion', created: p.created, model: p.req.model, choices: [{ index: 0, text, finish_reason: finish }] };

  const deliver = (s: StepResult): void => {
    for (const r of [...s.firstTokens, ...s.tokens]) {
      const p = pendings.get(r);
      if (p?.stream && r.phase !== 'finished') sse(p, chunk(p, TOKEN_TEXT, null));
    }
    for (const r of s.finished) {
      const p = pendings.get(r);
      if (!p) continue;
      pendings.delete(r);
      const sim = { instance: name, queuedMs: (r.firstScheduledMs as number) - r.arrivalMs, ttftMs: (r.firstTokenMs as number) - r.arrivalMs, e2eMs: (r.finishedMs as number) - r.arrivalMs, cachedTokens: r.cachedTokens, preemptions: r.preemptions };
      const usage = { prompt_tokens: r.promptTokens.length, completion_tokens: r.generated, total_tokens: r.promptTokens.length + r.generated, prompt_tokens_details: { cached_tokens: r.cachedTokens } };
      if (p.res.writableEnded || p.res.destroyed) continue;
      if (p.stream) {
        sse(p, chunk(p, TOKEN_TEXT, 'length'));
        sse(p, { ...(chunk(p, '', null) as object), choices: [], usage, sim });
        p.res.end('data: [DONE]\n\n');
      } else {
        const text = TOKEN_TEXT.repeat(r.generated);
        const body = JSON.stringify(
          p.api === 'chat'
            ? { id: r.id, object: 'chat.completion', created: p.created, model: r.model, choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'length' }], usage, sim }
            : { id: r.id, object: 'text_completion', created: p.created, model: r.model, choices: [{ index: 0, text, finish_reason: 'length' }], usage, sim },
        );
        p.res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
        p.res.end(body);
      }
    }
  };

  const kick = (): void => {
    if (timer || stopped || !engine.hasWork()) return;
    engine.idleUntil(now());
    const s = engine.step();
    if (!s) return;
    timer = setTimeout(
      () => {
        timer = null;
        deliver(s);
        kick();
      },
      Math.max(0, s.endMs - now()),
    );
  };

  const json = (res: http.ServerResponse, status: number, obj: unknown): void => {
    const body = JSON.stringify(obj);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  };
  const oaiError = (res: http.ServerResponse, status: number, message: string): void => json(res, status, { error: { message, type: status === 404 ? 'NotFoundError' : 'BadRequestError', code: status } });

  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    if (req.method === 'GET' && url.pathname === '/metrics') {
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
      res.end(renderLlmVllm({ engine, modelName: engine.cfg.models[0], nowS: Date.now() / 1000 }));
      return;
    }
    if (url.pathname === '/healthz' || url.pathname === '/health') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      return;
    }
    if (url.pathname === '/admin/stats') return json(res, 200, stats());
    if (req.method === 'GET' && url.pathname === '/v1/models') {
      const created = 0;
      const data = [
        ...engine.cfg.models.map((id) => ({ id, object: 'model', created, owned_by: 'vllm', root: id, parent: null, max_model_len: engine.cfg.numBlocks * engine.cfg.blockSize })),
        ...Object.entries(engine.cfg.adapters).map(([id, base]) => ({ id, object: 'model', created, owned_by: 'vllm', root: id, parent: base })),
      ];
      return json(res, 200, { object: 'list', data });
    }
    const api = url.pathname === '/v1/completions' ? 'completions' : url.pathname === '/v1/chat/completions' ? 'chat' : null;
    if (!api) return oaiError(res, 404, `no route ${url.pathname}`);
    if (req.method !== 'POST') return oaiError(res, 405, `${url.pathname}: POST only`);
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > maxBody) tooLarge = true;
      else chunks.push(c);
    });
    req.on('end', () => {
      if (tooLarge) return oaiError(res, 413, `body larger than ${maxBody} bytes`);
      let r: LlmRequest;
      let stream: boolean;
      try {
        const p = parseOpenAiRequest(api, Buffer.concat(chunks).toString('utf8'), bpt, defaultMaxTokens);
        if (!engine.resolveModel(p.model)) return oaiError(res, 404, `model: ${JSON.stringify(p.model)} does not exist`);
        stream = p.stream;
        r = engine.submit({ model: p.model, promptTokens: p.promptTokens, maxTokens: p.maxTokens }, now());
      } catch (e) {
        if (e instanceof BadRequest || e instanceof RangeError) return oaiError(res, 400, e.message);
        throw e;
      }
      const p: Pending = { res, stream, api, created: Math.floor(Date.now() / 1000), req: r };
      pendings.set(r, p);
      if (stream) res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.on('close', () => {
        if (pendings.has(r)) {
          pendings.delete(r);
          engine.abort(r);
        }
      });
      kick();
    });
  });
  server.keepAliveTimeout = 30_000;

  const stats = (): LlmServerStats => ({
    name,
    waiting: engine.waiting.length,
    running: engine.running.length,
    finished: engine.stats.finished,
    aborted: engine.stats.aborted,
    kvUsage: engine.kvUsage(),
    cachedBlocks: engine.cachedBlocks(),
    prefixHitRate: engine.stats.prefixQueries ? engine.stats.prefixHits / engine.stats.prefixQueries : 0,
    loadedAdapters: engine.loadedAdapters(),
    preemptions: engine.stats.preemptions,
    adapterLoads: engine.stats.adapterLoads,
  });

  const host = opts.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://${host}:${port}`,
    port,
    addr: `${host}:${port}`,
    engine,
    stats,
    stop: async () => {
      stopped = true;
      if (timer) clearTimeout(timer);
      for (const p of pendings.values()) if (!p.res.writableEnded && !p.res.headersSent) p.res.writeHead(503).end('shutting down');
      for (const p of pendings.values()) if (!p.res.writableEnded) p.res.end();
      pendings.clear();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
