// InferenceCollector: discovery + periodic scraping + estimation for every configured
// inference service; snapshot() gives the INSTANCES section records.
//
// Health / reason of a record (contracts.md reason codes):
//   - `failuresToUnhealthy` consecutive failed scrapes -> the failure's reason
//     (unreachable: connect error / reset / timeout; http_error: non-2xx or oversized body;
//     parse_error: malformed exposition or broken histogram -- the last good values are kept)
//   - no good scrape with load signals yet, or fewer than two (no interval delta yet), or the
//     last good exposition carried none of the mapped metrics -> no_data
//   - last good scrape older than staleAfterMs -> stale
//   - no utilisation estimate possible from the exported metrics (rho NaN) -> no_data
//   - else healthy, reason ok.
// Health SCORE (a diagnostic in details(), not on the wire: the filter computes its own from
//   p99Ms/baselineP99Ms): healthScore(p99, baseline) with the filter's factor 3 -- see estimator.ts.
// E[S]/E[S²] of an instance that has not completed any request yet are imputed with the
// median over the service's instances that have them, local and remote (so a fresh instance gets traffic).
import { EventEmitter } from 'node:events';
import * as promClient from 'prom-client';
import { Discovery, type DnsResolver, type DiscoveryChange, systemResolver } from './discovery';
import { BaselineTracker, type EstimatorState, healthScore, InstanceEstimator } from './estimator';
import { type InstanceReason, type InstanceRecord } from './encode';
import { extractSignals, GPU_GENERIC, hasLoadSignal, mappedSampleFilter, type MetricMappings, resolveMappings } from './mappings';
import type { Exposition } from './exposition';
import { MAX_CONFIG_BODY_BYTES, modelsOnPage, parseTritonModelConfig, planTriton, tritonHttpAddr, withoutModels, type TritonModelConfig, type TritonPlan } from './triton';
import { type InferenceConfig, type InferenceServiceConfig, resolveInferenceConfig } from './schema';
import { makeAgents, scrapeOnce } from './scraper';
import { fetchText } from './fetch-text';
import { extractLlmSignals, fetchModels, llmSampleFilter, llmSeriesOf, LlmTermEstimator, modelList, type LlmSeries, type LlmSignals, type LlmTerms, type ServedModels } from './llm';
import type { EsSource } from '../snapshot/codec';
import type { InstanceLlmRecord } from '../snapshot/llm';
import { KvCapacity } from './kv-capacity';

export interface Logger {
  warn(obj: unknown, msg?: string): void;
  info?(obj: unknown, msg?: string): void;
  debug?(obj: unknown, msg?: string): void;
}

export interface CollectorOptions {
  /** prom-client registry for the collector's own metrics (default: prom-client's global one) */
  registry?: promClient.Registry;
  resolver?: DnsResolver;
  /** wall clock in ms (default Date.now) */
  now?: () => number;
  logger?: Logger;
}

export interface InstanceDetail extends InstanceRecord {
  healthScore: number;
  imputedService: boolean;
  /** LLM services: the learned terms and the last model-list fetch */
  llm?: { terms: LlmTerms; modelsError?: string; modelsFetchedAt?: number; modelsDropped: number };
  lastError?: string;
  /** kind triton: the last failed model-configuration fetch (the last good configurations are kept) */
  tritonError?: string;
  /** the Triton plan: models left out (called by an ensemble) and the slots from instance_group */
  triton?: { excluded: string[]; slots?: number; models: string[] };
  /** paired GPU exporter: its address and last failure */
  gpu?: { addr: string; error?: string };
  consecutiveFailures: number;
  scrapesOk: number;
  scrapesFailed: number;
  estimator?: EstimatorState;
}

interface ScrapedInstance {
  svc: ScrapedService;
  addr: string;
  est: InstanceEstimator;
  goodScrapes: number;
  lastOkAt?: number;
  noData: boolean;
  consecutiveFailures: number;
  lastFailure?: { reason: 'unreachable' | 'http_error' | 'parse_error'; message: string; at: number };
  state?: EstimatorState;
  scrapesOk: number;
  scrapesFailed: number;
  timer?: NodeJS.Timeout;
  inFlight: boolean;
  llm?: InstanceLlmRt;
  /** kind triton: the model configurations fetched, and what they say about the page */
  triton?: { configs: Map<string, TritonModelConfig>; fetchedAt?: number; error?: string; plan?: TritonPlan; failedAt: Map<string, number> };
  /** paired GPU exporter (service `gpu`): its address and the last failure */
  gpu?: { addr: string; error?: string };
  removed: boolean;
  lastRecord?: InstanceRecord;
}

interface InstanceLlmRt {
  est: LlmTermEstimator;
  /** sequences the KV cache holds (kv-capacity.ts) */
  kv: KvCapacity;
  terms?: LlmTerms;
  signals?: LlmSignals;
  served?: ServedModels;
  modelsError?: string;
  modelsFetchedAt?: number;
  modelsTimer?: NodeJS.Timeout;
  modelsInFlight: boolean;
}

interface ScrapedService {
  /** publish the instances in the LLM section */
  llm: boolean;
  /** the engine's LLM metric names */
  llmSeries: LlmSeries;
  cfg: InferenceServiceConfig;
  mappings: MetricMappings;
  /** the parser stores only the samples the mappings read */
  keep: (sampleName: string) => boolean;
  discovery: Discovery;
  instances: Map<string, ScrapedInstance>;
  baseline: BaselineTracker;
}

/** a paired GPU exporter's page: only the GPU series are read */
const GPU_ONLY: MetricMappings = { ...resolveMappings('custom'), ...structuredClone(GPU_GENERIC) };
const GPU_KEEP = mappedSampleFilter(GPU_ONLY);

const RESULTS = ['ok', 'unreachable', 'http_error', 'parse_error', 'no_data'] as const;

function getOrCreate<T extends promClient.Metric<string>>(reg: promClient.Registry, name: string, make: () => T): T {
  return (reg.getSingleMetric(name) as T | undefined) ?? make();
}

/** Record equality ignoring dataAgeMs (which changes continuously). */
function sameRecord(a: InstanceRecord | undefined, b: InstanceRecord): boolean {
  if (!a) return false;
  const keys: Array<keyof InstanceRecord> = ['healthy', 'reason', 'rho', 'esMs', 'es2Ms2', 'lambdaPerS', 'queueDepth', 'p50Ms', 'p99Ms', 'baselineP99Ms', 'gpuUtil', 'slots', 'slotsSource', 'esSource', 'slotsFloor', 'queueGrowing'];
  return keys.every((k) => Object.is(a[k], b[k]) || (typeof a[k] === 'number' && Math.fround(a[k] as number) === Math.fround(b[k] as number)));
}

function median(xs: number[]): number {
  const v = xs.filter(Number.isFinite).sort((a, b) => a - b);
  if (v.length === 0) return NaN;
  const n = v.length;
  return n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/**
 * Events:
 *  - 'change' (records: InstanceRecord[]) after scrapes or a discovery update that changed any
 *    record (dataAgeMs excluded); coalesced per event-loop turn. Values move at every scrape,
 *    so the periodic publication carries them; publish at once on 'health' instead;
 *  - 'health' ({service, addr, healthy, reason}) when an instance's healthy/reason flips
 *    (also once per new instance);
 *  - 'scrapeError' ({service, addr, reason, message});
 *  - 'instances' ({service, added, removed, current}).
 */
export class InferenceCollector extends EventEmitter {
  readonly config: InferenceConfig;
  private services: ScrapedService[] = [];
  private readonly now: () => number;
  private readonly resolver: DnsResolver;
  private readonly log?: Logger;
  private readonly agents = makeAgents();
  private started = false;
  private readonly m: {
    scrapes: promClient.Counter<'service' | 'result'>;
    dropped: promClient.Counter<'service'>;
    duration: promClient.Histogram<'service'>;
    rho: promClient.Gauge<'service' | 'instance'>;
    queue: promClient.Gauge<'service' | 'instance'>;
    p99: promClient.Gauge<'service' | 'instance'>;
    lambda: promClient.Gauge<'service' | 'instance'>;
    healthy: promClient.Gauge<'service' | 'instance'>;
    instances: promClient.Gauge<'service'>;
    dns: promClient.Counter<'service' | 'result'>;
    models: promClient.Counter<'service' | 'result'>;
    modelsDropped: promClient.Gauge<'service' | 'instance'>;
  };

  constructor(config: unknown, opts: CollectorOptions = {}) {
    super();
    this.config = resolveInferenceConfig(config);
    this.now = opts.now ?? Date.now;
    this.resolver = opts.resolver ?? systemResolver;
    this.log = opts.logger;
    const reg = opts.registry ?? promClient.register;
    const r = [reg];
    this.m = {
      scrapes: getOrCreate(reg, 'switchyard_inference_scrapes_total', () => new promClient.Counter({ name: 'switchyard_inference_scrapes_total', help: 'Scrapes of inference instances by result (ok, unreachable, http_error, parse_error, no_data).', labelNames: ['service', 'result'], registers: r })),
      dropped: getOrCreate(reg, 'switchyard_inference_dropped_samples_total', () => new promClient.Counter({ name: 'switchyard_inference_dropped_samples_total', help: 'Mapped samples of instance pages not stored because a page exceeded a bound (buckets per histogram family, samples per page), counted up to the chunk where the bound was crossed: the rest of such a page is not read, and the scrape is refused (parse_error).', labelNames: ['service'], registers: r })),
      duration: getOrCreate(reg, 'switchyard_inference_scrape_duration_seconds', () => new promClient.Histogram({ name: 'switchyard_inference_scrape_duration_seconds', help: 'Duration of instance scrapes (HTTP + parse).', labelNames: ['service'], buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5], registers: r })),
      rho: getOrCreate(reg, 'switchyard_inference_rho', () => new promClient.Gauge({ name: 'switchyard_inference_rho', help: 'Estimated utilisation rho of an instance.', labelNames: ['service', 'instance'], registers: r })),
      queue: getOrCreate(reg, 'switchyard_inference_queue_depth', () => new promClient.Gauge({ name: 'switchyard_inference_queue_depth', help: 'Requests waiting at an instance (last scrape).', labelNames: ['service', 'instance'], registers: r })),
      p99: getOrCreate(reg, 'switchyard_inference_p99_seconds', () => new promClient.Gauge({ name: 'switchyard_inference_p99_seconds', help: 'P99 latency of an instance over the estimation window.', labelNames: ['service', 'instance'], registers: r })),
      lambda: getOrCreate(reg, 'switchyard_inference_arrival_rate', () => new promClient.Gauge({ name: 'switchyard_inference_arrival_rate', help: 'Estimated arrival rate (requests/s) of an instance.', labelNames: ['service', 'instance'], registers: r })),
      healthy: getOrCreate(reg, 'switchyard_inference_healthy', () => new promClient.Gauge({ name: 'switchyard_inference_healthy', help: '1 if the instance is healthy in the snapshot.', labelNames: ['service', 'instance'], registers: r })),
      instances: getOrCreate(reg, 'switchyard_inference_instances', () => new promClient.Gauge({ name: 'switchyard_inference_instances', help: 'Discovered instances per service.', labelNames: ['service'], registers: r })),
      models: getOrCreate(reg, 'switchyard_inference_models_fetches_total', () => new promClient.Counter({ name: 'switchyard_inference_models_fetches_total', help: 'GET /v1/models of LLM instances by result (ok, error: the last good list is kept).', labelNames: ['service', 'result'], registers: r })),
      modelsDropped: getOrCreate(reg, 'switchyard_inference_models_dropped', () => new promClient.Gauge({ name: 'switchyard_inference_models_dropped', help: 'Model names of an instance left out of the snapshot (longer than 255 bytes, or beyond 64 per instance).', labelNames: ['service', 'instance'], registers: r })),
      dns: getOrCreate(reg, 'switchyard_inference_dns_resolutions_total', () => new promClient.Counter({ name: 'switchyard_inference_dns_resolutions_total', help: 'DNS discovery resolutions by result.', labelNames: ['service', 'result'], registers: r })),
    };
  }

  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    for (const cfg of this.config.services) {
      const mappings = resolveMappings(cfg.kind, cfg.mappings);
      const llm = cfg.llm ?? (cfg.kind === 'vllm' || cfg.kind === 'sglang' || (cfg.models?.length ?? 0) > 0);
      const mapped = mappedSampleFilter(mappings);
      const svc: ScrapedService = {
        llm,
        llmSeries: llmSeriesOf(cfg.kind),
        cfg,
        mappings,
        keep: llm ? (n: string) => mapped(n) || llmSampleFilter(n) : mapped,
        discovery: new Discovery(cfg.instances, this.resolver),
        instances: new Map(),
        baseline: new BaselineTracker(this.config.baselineWindowS * 1000, this.config.baselineTrim),
      };
      for (const res of RESULTS) this.m.scrapes.inc({ service: cfg.name, result: res }, 0);
      if (llm && this.fetchesModels(cfg)) for (const res of ['ok', 'error']) this.m.models.inc({ service: cfg.name, result: res }, 0);
      svc.discovery.on('change', (ch: DiscoveryChange) => this.onDiscovery(svc, ch));
      svc.discovery.on('resolveError', (e: { message: string }) => {
        this.m.dns.inc({ service: cfg.name, result: 'error' });
        this.log?.warn({ service: cfg.name, err: e.message }, 'inference discovery failed; keeping the previous instances');
      });
      this.services.push(svc);
    }
    await Promise.all(this.services.map((s) => s.discovery.start()));
  }

  async stop(): Promise<void> {
    this.started = false;
    for (const svc of this.services) {
      svc.discovery.stop();
      for (const inst of svc.instances.values()) {
        inst.removed = true;
        if (inst.timer) clearTimeout(inst.timer);
        if (inst.llm?.modelsTimer) clearTimeout(inst.llm.modelsTimer);
      }
    }
    this.agents.http.destroy();
    this.agents.https.destroy();
  }

  private onDiscovery(svc: ScrapedService, ch: DiscoveryChange): void {
    if ('dns' in svc.cfg.instances) this.m.dns.inc({ service: svc.cfg.name, result: 'ok' });
    for (const addr of ch.removed) {
      const inst = svc.instances.get(addr);
      if (!inst) continue;
      inst.removed = true;
      if (inst.timer) clearTimeout(inst.timer);
      if (inst.llm?.modelsTimer) clearTimeout(inst.llm.modelsTimer);
      svc.instances.delete(addr);
      this.m.modelsDropped.remove({ service: svc.cfg.name, instance: addr });
      for (const g of [this.m.rho, this.m.queue, this.m.p99, this.m.lambda, this.m.healthy]) g.remove({ service: svc.cfg.name, instance: addr });
    }
    for (const addr of ch.added) {
      if (svc.instances.has(addr)) continue;
      const inst: ScrapedInstance = {
        svc,
        addr,
        est: new InstanceEstimator({
          windowMs: this.config.windowS * 1000,
          concurrency: svc.cfg.concurrency,
          assumedScv: this.config.assumedScv,
          rhoCombine: this.config.rhoCombine,
          baselineWindowMs: this.config.baselineWindowS * 1000,
          baselineTrim: this.config.baselineTrim,
          minMomentCompletions: this.config.minMomentCompletions,
          prior: () => priorFrom([...svc.instances.values()].filter((i) => i.addr !== addr).map((i) => i.state)),
        }),
        goodScrapes: 0,
        noData: false,
        consecutiveFailures: 0,
        scrapesOk: 0,
        scrapesFailed: 0,
        inFlight: false,
        removed: false,
        llm: svc.llm ? { est: new LlmTermEstimator({ windowS: this.config.windowS }), kv: new KvCapacity(), modelsInFlight: false } : undefined,
        triton: svc.cfg.kind === 'triton' && svc.cfg.triton?.modelConfig !== false ? { configs: new Map(), failedAt: new Map() } : undefined,
        gpu: svc.cfg.gpu ? { addr: svc.cfg.gpu.static?.[addr] ?? (svc.cfg.gpu.port !== undefined ? tritonHttpAddr(addr, svc.cfg.gpu.port) : addr) } : undefined,
      };
      svc.instances.set(addr, inst);
      this.schedule(inst, Math.random() * Math.min(100, this.config.scrapeIntervalMs));
      if (inst.llm && this.fetchesModels(svc.cfg)) void this.refreshModels(inst);
    }
    // One service name may be configured once per peer (local fleet + a remote one): the gauge is
    // per name, so it counts every fleet of that name, not the last one discovered.
    let n = 0;
    for (const s of this.services) if (s.cfg.name === svc.cfg.name) n += s.instances.size;
    this.m.instances.set({ service: svc.cfg.name }, n);
    this.emit('instances', { service: svc.cfg.name, ...ch });
    if (ch.added.length || ch.removed.length) this.changed();
  }

  private schedule(inst: ScrapedInstance, delayMs: number): void {
    if (inst.removed || !this.started) return;
    inst.timer = setTimeout(() => {
      void this.scrape(inst).finally(() => this.schedule(inst, this.config.scrapeIntervalMs));
    }, delayMs);
    inst.timer.unref?.();
  }

  /** One scrape of one instance (exposed for tests through scrapeAll). */
  private async scrape(inst: ScrapedInstance): Promise<void> {
    if (inst.inFlight) return;
    inst.inFlight = true;
    const svc = inst.svc;
    const service = svc.cfg.name;
    const endTimer = this.m.duration.startTimer({ service });
    try {
      const out = await scrapeOnce(
        { addr: inst.addr, path: svc.cfg.metricsPath, scheme: svc.cfg.scheme },
        {
          timeoutMs: this.config.scrapeTimeoutMs,
          maxBodyBytes: this.config.maxBodyBytes,
          agent: svc.cfg.scheme === 'https' ? this.agents.https : this.agents.http,
          parse: { keep: svc.keep },
        },
      );
      if (inst.removed) return;
      const t = this.now();
      if (!out.ok) {
        this.fail(inst, out.reason, out.message, t);
        return;
      }
      if (out.exposition.dropped) this.m.dropped.inc({ service }, out.exposition.dropped);
      let signals;
      let exposition = out.exposition;
      try {
        if (inst.triton) {
          await this.refreshTriton(inst, exposition);
          if (inst.removed) return;
          if (inst.triton.plan) exposition = withoutModels(exposition, inst.triton.plan.exclude);
        }
        signals = extractSignals(exposition, svc.mappings, svc.cfg.labels);
        // Triton's slot count from the model configuration, when the page names none
        if (signals.slots === undefined && inst.triton?.plan?.slots !== undefined) signals.slots = inst.triton.plan.slots;
        if (inst.gpu) {
          const g = await this.scrapeGpu(inst);
          if (inst.removed) return;
          signals.gpuUtil = g;
        }
      } catch (e) {
        this.fail(inst, 'parse_error', `malformed exposition: ${(e as Error).message}`, t);
        return;
      }
      inst.consecutiveFailures = 0;
      inst.scrapesOk++;
      if (!hasLoadSignal(signals)) {
        inst.noData = true;
        this.m.scrapes.inc({ service, result: 'no_data' });
        inst.lastFailure = { reason: 'parse_error', message: `no mapped metric found (kind ${svc.cfg.kind})`, at: t };
      } else {
        inst.noData = false;
        inst.lastFailure = undefined;
        inst.goodScrapes++;
        inst.lastOkAt = t;
        const llmSignals = inst.llm ? extractLlmSignals(exposition, svc.cfg.labels, svc.llmSeries) : undefined;
        // the server's own sequence cap, where it exports one, is its slot count (a capacity, not a floor)
        if (signals.slots === undefined && llmSignals?.maxNumSeqs !== undefined) signals.slots = llmSignals.maxNumSeqs;
        inst.state = inst.est.observe(t, signals);
        if (inst.llm && llmSignals) {
          inst.llm.signals = llmSignals;
          inst.llm.terms = inst.llm.est.observe(t, inst.llm.signals);
          inst.llm.kv.observe(signals.running, inst.llm.signals.kvCacheUsage);
        }
        if (inst.state.windowCompletions > 0 && Number.isFinite(inst.state.p99Ms)) svc.baseline.add(t, inst.state.p99Ms);
        this.m.scrapes.inc({ service, result: 'ok' });
      }
    } finally {
      endTimer();
      inst.inFlight = false;
      if (!inst.removed) this.afterScrape(inst);
    }
  }

  private fetchesModels(cfg: InferenceServiceConfig): boolean {
    return cfg.fetchModels ?? (cfg.kind === 'vllm' || cfg.kind === 'sglang');
  }

  /**
   * Kind triton: the configuration of every model on the page not fetched yet, and all of them
   * again every modelsIntervalMs (awaited: the scrape is measured with the plan it implies). A
   * failed fetch keeps what was known; a model without a configuration is summed and has no slots.
   */
  private async refreshTriton(inst: ScrapedInstance, exp: Exposition): Promise<void> {
    const tr = inst.triton!;
    const cfg = inst.svc.cfg;
    const onPage = modelsOnPage(exp, inst.svc.mappings.completions.concat(inst.svc.mappings.waiting, inst.svc.mappings.serviceTimeSum.map((r) => r.name)));
    const now = this.now();
    const due = tr.fetchedAt === undefined || now - tr.fetchedAt >= this.config.modelsIntervalMs;
    // a model whose fetch failed is retried every modelsIntervalMs, not at every scrape (an
    // endpoint that does not answer would otherwise delay each scrape by modelsTimeoutMs)
    const missing = onPage.filter((m) => !tr.configs.has(m) && !(now - (tr.failedAt.get(m) ?? -Infinity) < this.config.modelsIntervalMs));
    if (due || missing.length > 0) {
      const want = due ? onPage : missing;
      // nested ensembles: the steps' configurations too (bounded by MAX_TRITON_MODELS in all)
      const queue = [...want];
      const seen = new Set<string>();
      const addr = tritonHttpAddr(inst.addr, cfg.triton?.httpPort);
      let error: string | undefined;
      while (queue.length > 0 && seen.size < 64) {
        const batch = queue.splice(0, queue.length).filter((m) => !seen.has(m));
        batch.forEach((m) => seen.add(m));
        const got = await Promise.all(batch.map(async (m) => {
          try {
            return parseTritonModelConfig(await fetchText(addr, `/v2/models/${encodeURIComponent(m)}/config`, cfg.scheme, this.config.modelsTimeoutMs, MAX_CONFIG_BODY_BYTES, cfg.scheme === 'https' ? this.agents.https : this.agents.http), m);
          } catch (e) {
            error = `inference instance ${cfg.name}/${inst.addr}: triton ${(e as Error).message}`;
            if (tr.failedAt.size >= 256) tr.failedAt.clear();
            tr.failedAt.set(m, this.now());
            return undefined;
          }
        }));
        for (const c of got) {
          if (!c) continue;
          tr.configs.set(c.name, c);
          tr.failedAt.delete(c.name);
          for (const st of c.steps) if (!seen.has(st) && !tr.configs.has(st)) queue.push(st);
        }
      }
      if (tr.configs.size > 4 * 64) tr.configs.clear(); // bounded: a repository churning through model names
      if (error && tr.error === undefined) this.log?.warn({ service: cfg.name, instance: inst.addr }, error);
      tr.error = error;
      if (due) tr.fetchedAt = this.now();
    }
    tr.plan = planTriton(onPage, tr.configs, cfg.triton?.ensembles ?? 'top-level');
  }

  /** The paired GPU exporter's utilisation (NaN when its scrape fails: GPU use unknown, the instance unaffected). */
  private async scrapeGpu(inst: ScrapedInstance): Promise<number | undefined> {
    const g = inst.svc.cfg.gpu!;
    const out = await scrapeOnce(
      { addr: inst.gpu!.addr, path: g.metricsPath, scheme: g.scheme },
      { timeoutMs: this.config.scrapeTimeoutMs, maxBodyBytes: this.config.maxBodyBytes, agent: g.scheme === 'https' ? this.agents.https : this.agents.http, parse: { keep: GPU_KEEP } },
    );
    if (!out.ok) {
      if (inst.gpu!.error === undefined) this.log?.warn({ service: inst.svc.cfg.name, instance: inst.addr, gpu: inst.gpu!.addr }, out.message);
      inst.gpu!.error = `gpu exporter ${inst.gpu!.addr}: ${out.message}`;
      return undefined;
    }
    inst.gpu!.error = undefined;
    return extractSignals(out.exposition, GPU_ONLY, g.labels).gpuUtil;
  }

  /** One GET of the instance's model list, then the next one modelsIntervalMs later. */
  private async refreshModels(inst: ScrapedInstance): Promise<void> {
    const l = inst.llm;
    if (!l || l.modelsInFlight || inst.removed) return;
    l.modelsInFlight = true;
    const service = inst.svc.cfg.name;
    try {
      l.served = await fetchModels(inst.addr, inst.svc.cfg.modelsPath, inst.svc.cfg.scheme, this.config.modelsTimeoutMs, inst.svc.cfg.scheme === 'https' ? this.agents.https : this.agents.http);
      l.modelsError = undefined;
      l.modelsFetchedAt = this.now();
      this.m.models.inc({ service, result: 'ok' });
    } catch (e) {
      const first = l.modelsError === undefined;
      l.modelsError = `inference instance ${service}/${inst.addr}: ${(e as Error).message}`;
      this.m.models.inc({ service, result: 'error' });
      if (first) this.log?.warn({ service, instance: inst.addr }, l.modelsError);
    } finally {
      l.modelsInFlight = false;
      if (!inst.removed && this.started) {
        l.modelsTimer = setTimeout(() => void this.refreshModels(inst), this.config.modelsIntervalMs);
        l.modelsTimer.unref?.();
      }
    }
  }

  private fail(inst: ScrapedInstance, reason: 'unreachable' | 'http_error' | 'parse_error', message: string, t: number): void {
    const service = inst.svc.cfg.name;
    inst.consecutiveFailures++;
    inst.scrapesFailed++;
    const full = `inference instance ${service}/${inst.addr}: ${message}`;
    inst.lastFailure = { reason, message: full, at: t };
    this.m.scrapes.inc({ service, result: reason });
    this.emit('scrapeError', { service, addr: inst.addr, reason, message: full });
    if (inst.consecutiveFailures === 1 || inst.consecutiveFailures % 60 === 0) this.log?.warn({ service, instance: inst.addr, reason, failures: inst.consecutiveFailures }, full);
  }

  private afterScrape(inst: ScrapedInstance): void {
    const t = this.now();
    const rec = this.record(inst, t);
    const labels = { service: inst.svc.cfg.name, instance: inst.addr };
    this.m.healthy.set(labels, rec.healthy ? 1 : 0);
    if (Number.isFinite(rec.rho)) this.m.rho.set(labels, rec.rho);
    if (Number.isFinite(rec.queueDepth)) this.m.queue.set(labels, rec.queueDepth);
    if (Number.isFinite(rec.p99Ms)) this.m.p99.set(labels, rec.p99Ms / 1000);
    this.m.lambda.set(labels, rec.lambdaPerS);
    const prev = inst.lastRecord;
    inst.lastRecord = rec;
    if (!prev || prev.healthy !== rec.healthy || prev.reason !== rec.reason) {
      this.emit('health', { service: rec.service, addr: rec.addr, healthy: rec.healthy, reason: rec.reason });
    }
    if (!sameRecord(prev, rec)) this.changed();
  }

  private changePending = false;
  /** coalesces the changes of one event-loop turn (many scrapes finish together) into one event */
  private changed(): void {
    if (this.changePending) return;
    this.changePending = true;
    setImmediate(() => {
      this.changePending = false;
      if (this.started) this.emit('change', this.snapshot());
    });
  }

  /**
   * Over every instance of the service name, whatever its peer: a remote fleet that gets no
   * traffic while its link is degraded would otherwise keep E[S] unknown, which the snapshot
   * contract publishes as invalid_data (docs/contracts.md, Snapshot values), and never come back.
   */
  private imputed(svc: ScrapedService): { es: number; es2: number } {
    const states: (EstimatorState | undefined)[] = [];
    for (const s of this.services) if (s.cfg.name === svc.cfg.name) for (const i of s.instances.values()) states.push(i.state);
    return imputeFrom(states);
  }

  /** The largest queue depth read from gauges over every instance of the service name (NaN: none). */
  private knownQueueMax(svc: ScrapedService): number {
    let m = NaN;
    for (const s of this.services) {
      if (s.cfg.name !== svc.cfg.name) continue;
      for (const i of s.instances.values()) {
        const q = i.state?.queueDepth;
        if (i.state?.queueSource === 'gauges' && q !== undefined && Number.isFinite(q) && !(q <= m)) m = q;
      }
    }
    return m;
  }

  /** Cold start: the configured prior E[S] of the service, E[S²] from the assumed SCV. */
  private prior(svc: ScrapedService): { es: number; es2: number } {
    const es = svc.cfg.priorServiceMs ?? 1000;
    return { es, es2: (1 + this.config.assumedScv) * es * es };
  }


  private detail(inst: ScrapedInstance, now: number): InstanceDetail {
    const svc = inst.svc;
    const cfg = this.config;
    let reason: InstanceReason = 'ok';
    if (inst.consecutiveFailures >= cfg.failuresToUnhealthy && inst.lastFailure) reason = inst.lastFailure.reason;
    else if (inst.noData || inst.goodScrapes < 2) reason = 'no_data';
    else if (inst.lastOkAt !== undefined && now - inst.lastOkAt > cfg.staleAfterMs) reason = 'stale';
    const st = inst.state;
    const baseline = cfg.baselineScope === 'service' ? svc.baseline.value(now) : (st ? inst.est.baseline.value(now) : NaN);
    const { record, imputedService } = buildInstanceRecord({
      service: svc.cfg.name, addr: inst.addr, peer: svc.cfg.peer ?? '', reason, state: st, imputed: () => this.imputed(svc), prior: () => this.prior(svc),
      baselineMs: baseline, lastOkAt: inst.lastOkAt, now, concurrency: svc.cfg.concurrency,
      knownQueueMax: () => this.knownQueueMax(svc),
    });
    return {
      ...record,
      healthScore: healthScore(record.p99Ms, baseline),
      imputedService,
      lastError: inst.lastFailure?.message ?? (st?.invalid ? `inference instance ${svc.cfg.name}/${inst.addr}: ${st.invalid}` : undefined),
      tritonError: inst.triton?.error,
      triton: inst.triton ? { excluded: [...(inst.triton.plan?.exclude ?? [])].sort(), slots: inst.triton.plan?.slots, models: [...inst.triton.configs.keys()].sort() } : undefined,
      gpu: inst.gpu ? { ...inst.gpu } : undefined,
      consecutiveFailures: inst.consecutiveFailures,
      scrapesOk: inst.scrapesOk,
      scrapesFailed: inst.scrapesFailed,
      estimator: st,
      llm: inst.llm ? { terms: inst.llm.est.current(), modelsError: inst.llm.modelsError, modelsFetchedAt: inst.llm.modelsFetchedAt, modelsDropped: this.llmRecord(inst).dropped } : undefined,
    };
  }

  private record(inst: ScrapedInstance, now: number): InstanceRecord {
    const d = this.detail(inst, now);
    return {
      service: d.service,
      addr: d.addr,
      peer: d.peer,
      healthy: d.healthy,
      reason: d.reason,
      rho: d.rho,
      esMs: d.esMs,
      es2Ms2: d.es2Ms2,
      lambdaPerS: d.lambdaPerS,
      queueDepth: d.queueDepth,
      p50Ms: d.p50Ms,
      p99Ms: d.p99Ms,
      baselineP99Ms: d.baselineP99Ms,
      gpuUtil: d.gpuUtil,
      dataAgeMs: d.dataAgeMs,
      slots: d.slots,
      slotsSource: d.slotsSource,
      esSource: d.esSource,
    };
  }

  private llmRecord(inst: ScrapedInstance): { record: InstanceLlmRecord; dropped: number } {
    const l = inst.llm as InstanceLlmRt;
    const { models, dropped } = modelList(inst.svc.cfg.models ?? [], l.served, l.signals?.lora);
    this.m.modelsDropped.set({ service: inst.svc.cfg.name, instance: inst.addr }, dropped);
    const lora = l.signals?.lora;
    return {
      dropped,
      record: {
        service: inst.svc.cfg.name,
        addr: inst.addr,
        prefillMsPerToken: l.terms?.prefillMsPerToken ?? NaN,
        decodeMsPerToken: l.terms?.decodeMsPerToken ?? NaN,
        decodeIdleMs: l.terms?.decodeIdleMs ?? NaN,
        decodeMsPerSeq: l.terms?.decodeMsPerSeq ?? NaN,
        kvCacheUsage: l.signals?.kvCacheUsage ?? NaN,
        kvSeqs: l.kv.value(),
        kvTokens: l.signals?.kvTokens ?? NaN,
        maxLoras: lora && Number.isFinite(lora.maxLora) ? lora.maxLora : 0,
        models,
      },
    };
  }

  /** Records for the LLM section (services with llm on), sorted by service then address. */
  llmRecords(): InstanceLlmRecord[] {
    return this.all().filter((i) => i.llm).map((i) => this.llmRecord(i).record);
  }

  /** Whether any configured service publishes LLM records (the section is written only then). */
  hasLlm(): boolean {
    return this.services.some((s) => s.llm);
  }

  private all(): ScrapedInstance[] {
    const out: ScrapedInstance[] = [];
    for (const s of this.services) out.push(...s.instances.values());
    return out.sort((a, b) => (a.svc.cfg.name === b.svc.cfg.name ? (a.addr < b.addr ? -1 : a.addr > b.addr ? 1 : 0) : a.svc.cfg.name < b.svc.cfg.name ? -1 : 1));
  }

  /** Records for the INSTANCES section, sorted by service then address. */
  snapshot(now = this.now()): InstanceRecord[] {
    return this.all().map((i) => this.record(i, now));
  }

  /** Records plus diagnostics (health score, last error, estimator internals). */
  details(now = this.now()): InstanceDetail[] {
    return this.all().map((i) => this.detail(i, now));
  }

  /** Scrape every instance once now (awaits them); for tests and tools. */
  async scrapeAll(): Promise<void> {
    await Promise.all(this.all().map((i) => this.scrape(i)));
  }

  /** Re-resolve DNS-discovered services now; for tests and tools. */
  async refreshDiscovery(): Promise<void> {
    await Promise.all(this.services.map((s) => s.discovery.refresh()));
  }
}

export interface RecordInputs {
  service: string;
  addr: string;
  peer: string;
  /** health decided from scrape outcomes (failures, no data, stale) */
  reason: InstanceReason;
  state: EstimatorState | undefined;
  /** E[S], E[S²] of the service's other instances, for an instance that has none of its own yet */
  imputed: () => { es: number; es2: number };
  /** cold start: the configured prior when no instance of the service has an estimate (absent: E[S] stays unknown) */
  prior?: () => { es: number; es2: number };
  baselineMs: number;
  lastOkAt: number | undefined;
  now: number;
  concurrency: number | undefined;
  /**
   * Queue unknown (estimator queueSource 'little'): the largest queueDepth the service's instances
   * with queue gauges publish, NaN when none has one. Unknown is never cheaper than known.
   */
  knownQueueMax?: () => number;
}

/**
 * The INSTANCES record of one instance from its estimator state: the one definition the agent and
 * the routing benchmark's agent model both use.
 */
export function buildInstanceRecord(x: RecordInputs): { record: InstanceRecord; imputedService: boolean } {
  const st = x.state;
  let reason = x.reason;
  // broken exporter data (NaN/negative counters or gauges, repeated counter drops): never priced
  if (reason === 'ok' && st?.invalid) reason = 'parse_error';
  // the filter skips an instance whose rho is not < its limit, NaN included: say why
  if (reason === 'ok' && !(st && Number.isFinite(st.rho))) reason = 'no_data';
  let es = st?.esMs ?? NaN;
  let es2 = st?.es2Ms2 ?? NaN;
  let imputedService = false;
  let esSource: EsSource = 'measured';
  if (!Number.isFinite(es)) {
    const imp = x.imputed();
    if (Number.isFinite(imp.es)) {
      es = imp.es;
      es2 = imp.es2;
      imputedService = true;
      esSource = 'service-median';
    } else if (x.prior) {
      const p = x.prior();
      es = p.es;
      es2 = p.es2;
      esSource = 'prior';
    }
  }
  // Queue unknown (no waiting/running gauge): Little's law from the instance's own counters
  // (E[S] imputed above when it has none), raised to the largest known queue of the service, so an
  // instance is never cheaper for exporting less (docs/contracts.md, "Queue unknown")
  let queueDepth = st?.queueDepth ?? NaN;
  if (st?.queueSource === 'little') {
    const own = Number.isFinite(queueDepth) ? queueDepth : (st.lambdaPerS * es) / 1000;
    const known = x.knownQueueMax?.() ?? NaN;
    queueDepth = Math.max(Number.isFinite(own) ? own : 0, Number.isFinite(known) ? known : 0);
  }
  return {
    imputedService,
    record: {
      service: x.service,
      addr: x.addr,
      peer: x.peer,
      healthy: reason === 'ok',
      reason,
      rho: st?.rho ?? NaN,
      esMs: es,
      es2Ms2: es2,
      lambdaPerS: st?.lambdaPerS ?? 0,
      queueDepth,
      p50Ms: st?.p50Ms ?? NaN,
      p99Ms: st?.p99Ms ?? NaN,
      baselineP99Ms: x.baselineMs,
      gpuUtil: st?.gpuUtil ?? NaN,
      dataAgeMs: x.lastOkAt === undefined ? 0xffffffff : Math.max(0, Math.min(0xffffffff, Math.round(x.now - x.lastOkAt))),
      slots: Math.max(1, st?.concurrency ?? x.concurrency ?? 1),
      slotsSource: st?.slotsSource ?? (x.concurrency !== undefined ? 'configured' : 'inferred'),
      esSource,
      // capacity unknown: the filter does not shed on a floor (docs/contracts.md, flags bit 5)
      ...((st ? st.slotsFloor : x.concurrency === undefined) ? { slotsFloor: true } : {}),
      ...(st?.queueGrowing ? { queueGrowing: true } : {}),
    },
  };
}

/** Median E[S] and E[S²] over the instances with completions in their current window (the estimator's prior). */
export function priorFrom(states: (EstimatorState | undefined)[]): { es: number; es2: number } {
  return imputeFrom(states.filter((s) => s !== undefined && s.windowCompletions > 0));
}

/** Median E[S] and E[S²] over the instances that have them. */
export function imputeFrom(states: (EstimatorState | undefined)[]): { es: number; es2: number } {
  const ok = states.filter((s): s is EstimatorState => s !== undefined && Number.isFinite(s.esMs));
  return { es: median(ok.map((s) => s.esMs)), es2: median(ok.map((s) => s.es2Ms2)) };
}
