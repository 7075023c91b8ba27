// Simulated inference server: a real FIFO queue with c slots that holds HTTP requests for a
// sampled service time (real time), and exposes /metrics in vLLM, Triton or TGI style,
// computed from the actual queue state.
//
//   tsx sim/inference-server.ts --port 9201 --kind vllm --concurrency 4 --dist lognormal \
//       --mean-ms 80 --sigma 1.0 --speed 1.0 --seed 1
//
// HTTP:
//   GET  /metrics            Prometheus text (style per --kind)
//   GET  /healthz            200 ok
//   GET  /admin/stats        JSON stats
//   POST /admin/speed?factor=F   change the speed factor at run time (F > 0; 0.25 = 4x slower)
//   anything else            an inference request: queued FIFO, answered after its service
//                            time with JSON {id, instance, queuedMs, serviceMs, e2eMs}.
//                            Header x-sim-service-ms: N forces this request's service time.
// Programmatic: startInferenceServer(opts) -> { url, port, stop(), stats(), setSpeed() };
// the queue model and distributions (sim/inference/*) are importable for virtual time.
//
// --mode llm (opt-in; the default mode is the queue above): a token-level LLM engine with
// continuous batching, a prefix-caching KV cache and LoRA adapters behind OpenAI endpoints and
// vLLM metrics (sim/inference/llm/*, docs/inference-sim.md):
//   tsx sim/inference-server.ts --mode llm --port 9301 --model-name llama-3-8b \
//       --adapters sql-lora:llama-3-8b,chat-lora:llama-3-8b --max-loras 2 --num-blocks 4096
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { type DistSpec, makeDistribution } from './inference/distributions';
import { mulberry32 } from './inference/prng';
import { FifoQueueModel, type QueueJob, TGI_DURATION_BUCKETS, VLLM_FINE_BUCKETS, VLLM_REQUEST_LATENCY_BUCKETS } from './inference/queue';
import { render, type SimKind } from './inference/render';
import { DEFAULT_LLM_CONFIG, type LlmEngineConfig } from './inference/llm/engine';
import { type LlmServerOptions, startLlmServer } from './inference/llm/server';

export type BucketSpec = 'vllm' | 'vllm-fine' | 'tgi' | number[];

export interface InferenceServerOptions {
  port?: number;
  host?: string;
  kind?: SimKind;
  concurrency?: number;
  dist?: DistSpec;
  /** service time divided by speed (2 = twice as fast) */
  speed?: number;
  seed?: number;
  /**
   * latency histogram buckets (seconds). 'vllm' = vLLM's real e2e buckets (first bound
   * 0.3 s, too coarse for sub-second simulated services), 'vllm-fine' (default for vllm) =
   * vLLM's TTFT bounds below 0.3 s + the e2e buckets, 'tgi' = TGI's 1.5x ladder (default for tgi)
   */
  buckets?: BucketSpec;
  modelName?: string;
  /** vLLM style: also print DCGM_FI_DEV_GPU_UTIL */
  gpuMetrics?: boolean;
  /** label for logs / responses */
  name?: string;
}

export interface InferenceServerStats {
  name: string;
  kind: SimKind;
  concurrency: number;
  speed: number;
  waiting: number;
  running: number;
  arrived: number;
  completed: number;
  cancelled: number;
  gpuUtil: number;
  meanServiceMs: number;
  meanE2eMs: number;
}

export interface InferenceServerHandle {
  url: string;
  port: number;
  /** "127.0.0.1:PORT" */
  addr: string;
  stop(): Promise<void>;
  stats(): InferenceServerStats;
  setSpeed(f: number): void;
  model: FifoQueueModel<Pending>;
}

interface Pending {
  res: http.ServerResponse;
  timer?: NodeJS.Timeout;
  done: boolean;
}

function resolveBuckets(b: BucketSpec | undefined, kind: SimKind): number[] {
  if (Array.isArray(b)) return b.slice().sort((x, y) => x - y);
  const spec = b ?? (kind === 'tgi' ? 'tgi' : 'vllm-fine');
  return spec === 'vllm' ? VLLM_REQUEST_LATENCY_BUCKETS : spec === 'tgi' ? TGI_DURATION_BUCKETS : VLLM_FINE_BUCKETS;
}

export async function startInferenceServer(opts: InferenceServerOptions = {}): Promise<InferenceServerHandle> {
  const kind = opts.kind ?? 'vllm';
  const c = opts.concurrency ?? 1;
  const dist = makeDistribution(opts.dist ?? { kind: 'exponential', meanMs: 80 });
  const rng = mulberry32(opts.seed ?? 1);
  let speed = opts.speed ?? 1;
  const model = new FifoQueueModel<Pending>({ concurrency: c, bucketsS: resolveBuckets(opts.buckets, kind) });
  const name = opts.name ?? `sim-${kind}`;
  const gpuUuid = `GPU-${(opts.seed ?? 1).toString(16).padStart(8, '0')}-5151-4d1d-9c1e-000000000000`;
  const now = (): number => performance.now();
  const pendings = new Set<Pending>();

  const begin = (job: QueueJob<Pending>): void => {
    const p = job.payload as Pending;
    p.timer = setTimeout(() => finish(job), job.serviceMs);
  };
  const finish = (job: QueueJob<Pending>): void => {
    const t = now();
    const next = model.complete(t, job);
    const p = job.payload as Pending;
    p.done = true;
    pendings.delete(p);
    if (!p.res.writableEnded && !p.res.destroyed) {
      const body = JSON.stringify({
        id: job.id,
        instance: name,
        queuedMs: (job.startedAt as number) - job.arrivedAt,
        serviceMs: t - (job.startedAt as number),
        e2eMs: t - job.arrivedAt,
      });
      p.res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      p.res.end(body);
    }
    for (const j of next) begin(j);
  };

  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    if (req.method === 'GET' && url.pathname === '/metrics') {
      const text = render(kind, { model, modelName: opts.modelName ?? 'sim-model', gpuUtil: model.utilization(now(), 1000), gpuMetrics: !!opts.gpuMetrics, gpuUuid });
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
      res.end(text);
      return;
    }
    if (url.pathname === '/healthz') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('ok');
      return;
    }
    if (url.pathname === '/admin/stats') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(stats()));
      return;
    }
    if (req.method === 'POST' && url.pathname === '/admin/speed') {
      const f = Number(url.searchParams.get('factor'));
      if (!(f > 0)) {
        res.writeHead(400).end('factor must be > 0');
        return;
      }
      speed = f;
      res.writeHead(200).end(`speed ${f}`);
      return;
    }
    // an inference request: drain the body, then queue
    req.resume();
    req.on('end', () => {
      const forced = Number(req.headers['x-sim-service-ms']);
      const serviceMs = Number.isFinite(forced) && forced >= 0 && req.headers['x-sim-service-ms'] !== undefined ? forced : dist.sample(rng) / speed;
      const p: Pending = { res, done: false };
      pendings.add(p);
      const job = model.arrive(now(), serviceMs, p);
      if (job.startedAt !== undefined) begin(job);
      res.on('close', () => {
        // client went away while waiting: drop it from the queue (as vLLM aborts it)
        if (!p.done && job.startedAt === undefined && model.cancel(job)) pendings.delete(p);
      });
    });
  });
  server.keepAliveTimeout = 30_000;

  const stats = (): InferenceServerStats => ({
    name,
    kind,
    concurrency: c,
    speed,
    waiting: model.waiting,
    running: model.running,
    arrived: model.arrived,
    completed: model.completed,
    cancelled: model.cancelled,
    gpuUtil: model.utilization(now(), 1000),
    meanServiceMs: model.serviceTime.count ? (model.serviceTime.sum / model.serviceTime.count) * 1000 : NaN,
    meanE2eMs: model.e2e.count ? (model.e2e.sum / model.e2e.count) * 1000 : NaN,
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const host = opts.host ?? '127.0.0.1';
  return {
    url: `http://${host}:${port}`,
    port,
    addr: `${host}:${port}`,
    model,
    stats,
    setSpeed: (f: number) => {
      if (!(f > 0)) throw new RangeError('speed must be > 0');
      speed = f;
    },
    stop: async () => {
      for (const p of pendings) {
        if (p.timer) clearTimeout(p.timer);
        if (!p.res.writableEnded) p.res.writeHead(503).end('shutting down');
      }
      pendings.clear();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}

// ---------------------------------------------------------------- CLI

function parseRaw(argv: string[]): Record<string, string> {
  const a: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    if (!k.startsWith('--')) throw new Error(`unexpected argument ${k}`);
    const eq = k.indexOf('=');
    if (eq > 0) a[k.slice(2, eq)] = k.slice(eq + 1);
    else if (i + 1 < argv.length && !argv[i + 1].startsWith('--')) a[k.slice(2)] = argv[++i];
    else a[k.slice(2)] = 'true';
  }
  return a;
}

const LLM_FLAGS: Record<string, keyof LlmEngineConfig> = {
  'block-size': 'blockSize',
  'num-blocks': 'numBlocks',
  'max-num-batched-tokens': 'maxNumBatchedTokens',
  'max-num-seqs': 'maxNumSeqs',
  'max-loras': 'maxLoras',
  'lora-load-ms': 'loraLoadMs',
  'step-ms': 'stepBaseMs',
  'prefill-ms-per-token': 'prefillMsPerToken',
  'decode-ms-per-seq': 'decodeMsPerSeq',
};

/** --mode llm options (LLM engine flags; --speed divides every cost). */
export function parseLlmArgs(argv: string[]): LlmServerOptions {
  const a = parseRaw(argv);
  const llmKnown = new Set(['mode', 'port', 'host', 'name', 'model-name', 'adapters', 'prefix-caching', 'bytes-per-token', 'default-max-tokens', 'max-body-bytes', 'speed', ...Object.keys(LLM_FLAGS)]);
  for (const k of Object.keys(a)) if (!llmKnown.has(k)) throw new Error(`unknown option --${k} (in --mode llm)`);
  const num = (k: string): number | undefined => {
    if (a[k] === undefined) return undefined;
    const v = Number(a[k]);
    if (!Number.isFinite(v)) throw new Error(`--${k}: not a number`);
    return v;
  };
  const engine: Partial<LlmEngineConfig> = {};
  for (const [flag, key] of Object.entries(LLM_FLAGS)) {
    const v = num(flag);
    if (v !== undefined) (engine as Record<string, number>)[key] = v;
  }
  const speed = num('speed') ?? 1;
  if (!(speed > 0)) throw new Error('--speed: must be > 0');
  for (const k of ['stepBaseMs', 'prefillMsPerToken', 'decodeMsPerSeq', 'loraLoadMs'] as const) engine[k] = (engine[k] ?? DEFAULT_LLM_CONFIG[k]) / speed;
  const models = (a['model-name'] ?? DEFAULT_LLM_CONFIG.models.join(',')).split(',').filter(Boolean);
  engine.models = models;
  if (a.adapters) {
    engine.adapters = {};
    for (const spec of a.adapters.split(',').filter(Boolean)) {
      const [name, base = models[0]] = spec.split(':');
      engine.adapters[name] = base;
    }
  }
  if (a['prefix-caching'] !== undefined) {
    if (a['prefix-caching'] !== 'true' && a['prefix-caching'] !== 'false') throw new Error('--prefix-caching: true | false');
    engine.enablePrefixCaching = a['prefix-caching'] === 'true';
  }
  return {
    port: num('port') ?? 9301,
    host: a.host ?? '127.0.0.1',
    name: a.name,
    engine,
    bytesPerToken: num('bytes-per-token'),
    defaultMaxTokens: num('default-max-tokens'),
    maxBodyBytes: num('max-body-bytes'),
  };
}

function parseArgs(argv: string[]): InferenceServerOptions {
  const a = parseRaw(argv);
  const num = (k: string, d: number): number => {
    if (a[k] === undefined) return d;
    const v = Number(a[k]);
    if (!Number.isFinite(v)) throw new Error(`--${k}: not a number`);
    return v;
  };
  const known = new Set(['mode', 'port', 'host', 'kind', 'concurrency', 'dist', 'mean-ms', 'sigma', 'alpha', 'min-ms', 'max-ms', 'speed', 'seed', 'buckets', 'model-name', 'gpu-metrics', 'name']);
  for (const k of Object.keys(a)) if (!known.has(k)) throw new Error(`unknown option --${k}`);
  if (a.mode !== undefined && a.mode !== 'queue') throw new Error('--mode: queue | llm');
  const kind = (a.kind ?? 'vllm') as SimKind;
  if (!['vllm', 'triton', 'tgi'].includes(kind)) throw new Error('--kind: vllm | triton | tgi');
  const meanMs = num('mean-ms', 80);
  const d = a.dist ?? 'exponential';
  let dist: DistSpec;
  if (d === 'fixed' || d === 'exponential') dist = { kind: d, meanMs };
  else if (d === 'lognormal') dist = { kind: d, meanMs, sigma: num('sigma', 1) };
  else if (d === 'pareto') dist = { kind: d, meanMs, alpha: num('alpha', 2.5) };
  else if (d === 'bounded-pareto') dist = { kind: d, alpha: num('alpha', 1.5), minMs: num('min-ms', 10), maxMs: num('max-ms', 10000) };
  else throw new Error('--dist: fixed | exponential | lognormal | pareto | bounded-pareto');
  let buckets: BucketSpec | undefined;
  if (a.buckets) buckets = ['vllm', 'vllm-fine', 'tgi'].includes(a.buckets) ? (a.buckets as BucketSpec) : a.buckets.split(',').map(Number);
  return {
    port: num('port', 9201),
    host: a.host ?? '127.0.0.1',
    kind,
    concurrency: num('concurrency', 1),
    dist,
    speed: num('speed', 1),
    seed: num('seed', 1),
    buckets,
    modelName: a['model-name'],
    gpuMetrics: a['gpu-metrics'] === 'true',
    name: a.name,
  };
}

function mainLlm(argv: string[]): void {
  let opts: LlmServerOptions;
  try {
    opts = parseLlmArgs(argv);
  } catch (e) {
    process.stderr.write(`inference-server: ${(e as Error).message}\n`);
    process.exit(2);
  }
  startLlmServer(opts).then(
    (h) => {
      const c = h.engine.cfg;
      process.stdout.write(`inference-server llm models=${c.models.join(',')} adapters=${Object.keys(c.adapters).join(',') || '-'} blocks=${c.numBlocks}x${c.blockSize} budget=${c.maxNumBatchedTokens} seqs=${c.maxNumSeqs} listening on ${h.url}\n`);
      const bye = (): void => {
        void h.stop().then(() => process.exit(0));
      };
      process.on('SIGINT', bye);
      process.on('SIGTERM', bye);
    },
    (e) => {
      process.stderr.write(`inference-server: ${(e as Error).message}\n`);
      process.exit(1);
    },
  );
}

if (require.main === module && process.argv.slice(2).some((x, i, all) => x === '--mode=llm' || (x === '--mode' && all[i + 1] === 'llm'))) {
  mainLlm(process.argv.slice(2));
} else if (require.main === module) {
  let opts: InferenceServerOptions;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`inference-server: ${(e as Error).message}\n`);
    process.exit(2);
  }
  startInferenceServer(opts).then(
    (h) => {
      process.stdout.write(`inference-server ${opts.kind} c=${opts.concurrency} ${JSON.stringify(opts.dist)} speed=${opts.speed} listening on ${h.url}\n`);
      const bye = (): void => {
        void h.stop().then(() => process.exit(0));
      };
      process.on('SIGINT', bye);
      process.on('SIGTERM', bye);
    },
    (e) => {
      process.stderr.write(`inference-server: ${(e as Error).message}\n`);
      process.exit(1);
    },
  );
}
