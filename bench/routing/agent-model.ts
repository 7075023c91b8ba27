// The agent, in virtual time: scrapes every simulated instance the way the collector does
// (agent/src/inference/collector.ts), through the REAL exposition parser, vLLM mappings and
// InstanceEstimator, and publishes snapshots the way the publisher does
// (agent/src/snapshot/publisher.ts + agent.ts): every publishIntervalMs, at once when an
// instance's health flips, each carrying the last scrape's values with their dataAgeMs.
// The bodies are the real encodeSnapshot() output.
//
// Differences from the live collector, all deliberate: scrapes take no time; the first scrape
// of each instance is at a seeded random phase in [0, min(100, interval)) ms (the collector uses
// Math.random()); the render -> parse path replaces HTTP.
import { BaselineTracker, type EstimatorState, InstanceEstimator } from '../../agent/src/inference/estimator';
import { buildInstanceRecord, imputeFrom, priorFrom } from '../../agent/src/inference/collector';
import { parseExposition } from '../../agent/src/inference/exposition';
import { extractSignals, hasLoadSignal, resolveMappings } from '../../agent/src/inference/mappings';
import { InflightAggregator } from '../../agent/src/mesh/inflight';
import { InflightExchange } from '../../agent/src/mesh/inflight-exchange';
import type { NatsConnection } from 'nats';
import { INFLIGHT_DEFAULTS } from '../../agent/src/mesh/inflight-schema';
import { encodeSnapshot, type InstanceRecord, type PeerRecord, type Snapshot } from '../../agent/src/snapshot/codec';
import { mulberry32 } from '../../sim/inference/prng';
import type { FifoQueueModel } from '../../sim/inference/queue';
import { renderVllm } from '../../sim/inference/render';
import type { EngineCtx } from './des';

export interface AgentSpec {
  /** inference.scrapeIntervalMs (agent default 1000) */
  scrapeIntervalMs: number;
  /** publishIntervalMs (agent default 250) */
  publishIntervalMs: number;
  /** inference.windowS × 1000 (default 10 000) */
  windowMs: number;
  /** inference.services[].concurrency; undefined = inferred by the estimator */
  concurrency?: number;
  /** inference.staleAfterMs (default 5000) */
  staleAfterMs: number;
  /** inference.baselineWindowS × 1000 (default 300 000) */
  baselineWindowMs: number;
  /** inference.baselineScope (agent default 'instance') */
  baselineScope: 'instance' | 'service';
  /**
   * 'periodic': the agent as built (publish every publishIntervalMs and on health flips).
   * 'on-scrape': what-if -- publish right after every scrape round (used only by model policies).
   */
  publishMode: 'periodic' | 'on-scrape';
}

export const DEFAULT_AGENT: AgentSpec = {
  scrapeIntervalMs: 1000,
  publishIntervalMs: 250,
  windowMs: 10_000,
  concurrency: 4,
  staleAfterMs: 5000,
  baselineWindowMs: 300_000,
  baselineScope: 'instance',
  publishMode: 'periodic',
};

export const SERVICE = 'llm';

export interface Published {
  snapshot: Snapshot;
  binary: Buffer;
  /** virtual time (ms) of the publication */
  t: number;
}

interface InstRt {
  est: InstanceEstimator;
  goodScrapes: number;
  lastOkAt?: number;
  state?: EstimatorState;
  lastHealthy?: boolean;
}

/** One row per scrape, for the lag analysis (estimate vs truth at that instant). */
export interface ScrapeRow {
  t: number;
  inst: number;
  rho: number;
  lambdaPerS: number;
  queueDepth: number;
  esMs: number;
  es2Ms2: number;
  slots: number;
  /** truth at the scrape instant: busy fraction of the slots over the last second, requests in the instance */
  util1s: number;
  inSystem: number;
  running: number;
}

export class AgentModel {
  private readonly mappings = resolveMappings('vllm');
  private readonly inst: InstRt[];
  private readonly baseline: BaselineTracker;
  private seq: number;
  current!: Published;
  private listeners: Array<(p: Published) => void> = [];
  private nextPeriodic = Infinity;
  private periodicToken = 0;
  readonly scrapes: ScrapeRow[] = [];
  publications = 0;
  private ctx!: EngineCtx;
  private aggs: InflightAggregator[] = [];
  private exchanges: InflightExchange[] = [];
  /** mesh in-flight across agents: how many agents' aggregations, and the NATS hop (ms) */
  private meshAgents = 1;
  private natsHopMs = 1;

  constructor(
    readonly spec: AgentSpec,
    readonly addrs: string[],
    /** epoch ms of virtual time 0 */
    readonly epoch0: number,
    private readonly seed: number,
  ) {
    // prior: the collector's (collector.ts) -- the median E[S]/E[S²] of the service's other
    // instances with completions in their window, which older completions fade toward.
    this.inst = addrs.map((_, i) => ({
      est: new InstanceEstimator({
        windowMs: spec.windowMs, concurrency: spec.concurrency, baselineWindowMs: spec.baselineWindowMs,
        prior: () => priorFrom(this.inst.filter((_x, j) => j !== i).map((x) => x.state)),
      }),
      goodScrapes: 0,
    }));
    this.baseline = new BaselineTracker(spec.baselineWindowMs, 0.1);
    this.seq = epoch0 * 1000 - 1;
  }

  /**
   * The agent's mesh in-flight aggregation (agent/src/mesh/inflight.ts, the agent's defaults) on
   * the virtual clock: every proxy fed by this agent reports to it and is answered from it.
   */
  inflight(group = 0): InflightAggregator {
    if (this.aggs.length === 0) {
      const known = new Set(this.addrs);
      for (let g = 0; g < this.meshAgents; g++) {
        this.aggs.push(new InflightAggregator({
          maxProxies: INFLIGHT_DEFAULTS.maxProxies, maxInstances: INFLIGHT_DEFAULTS.maxInstances, expireReports: INFLIGHT_DEFAULTS.expireReports,
          isInstance: (a) => known.has(a), now: () => this.epoch0 + this.ctx.now(),
        }));
      }
    }
    return this.aggs[group % this.aggs.length];
  }

  /**
   * Several agents (e.g. one per node), each aggregating its own proxies' reports, linked by the
   * real exchange (agent/src/mesh/inflight-exchange.ts, shipped inflight defaults) over an
   * in-process NATS that delivers each message `hopMs` after it is published. The pool state stays
   * this one model's (as subscribers serve the leader's). Call before attach().
   */
  setMeshAgents(m: number, hopMs = 1, exchangeMs?: number, exchangeMode?: 'leader' | 'all'): void {
    this.meshAgents = Math.max(1, Math.floor(m));
    this.natsHopMs = hopMs;
    this.exchangeMs = exchangeMs;
    this.exchangeMode = exchangeMode;
  }
  /** inflight.exchange (undefined: the agent's default, leader) */
  private exchangeMode?: 'leader' | 'all';
  /** NATS traffic of the exchanges (messages and bytes delivered to subscribers, published) */
  readonly nats = { published: 0, publishedBytes: 0, delivered: 0, deliveredBytes: 0 };
  /** inflight.exchangeMs (undefined: the agent's default) */
  private exchangeMs?: number;

  private startExchanges(): void {
    if (this.meshAgents <= 1) return;
    this.inflight();
    const ctx = this.ctx;
    const subs = new Map<string, Array<(data: Uint8Array) => void>>();
    const nc = {
      subscribe(subject: string, opts: { callback: (err: unknown, msg: { data: Uint8Array }) => void }) {
        const list = subs.get(subject) ?? [];
        const fn = (data: Uint8Array): void => opts.callback(null, { data });
        list.push(fn);
        subs.set(subject, list);
        return { unsubscribe() { list.splice(list.indexOf(fn), 1); } };
      },
      publish: (subject: string, data: Uint8Array): void => {
        const copy = Uint8Array.from(data);
        this.nats.published++;
        this.nats.publishedBytes += copy.length;
        ctx.at(ctx.now() + this.natsHopMs, () => {
          for (const f of subs.get(subject) ?? []) {
            this.nats.delivered++;
            this.nats.deliveredBytes += copy.length;
            f(copy);
          }
        });
      },
      flush: async () => undefined,
      // the round trip to the server: two hops
      rtt: async () => 2 * this.natsHopMs,
    } as unknown as NatsConnection;
    const cfg = { ...INFLIGHT_DEFAULTS, ...(this.exchangeMs !== undefined ? { exchangeMs: this.exchangeMs } : {}), ...(this.exchangeMode ? { exchange: this.exchangeMode } : {}) };
    const known = new Set(this.addrs);
    this.exchanges = this.aggs.map((agg, g) => new InflightExchange(agg, cfg, {
      id: g + 1, subjectPrefix: 'switchyard.pool', connection: () => nc, pools: [{ peer: '', service: SERVICE }],
      poolOf: (a) => (known.has(a) ? `_/${SERVICE}` : undefined), now: () => this.epoch0 + ctx.now(),
      // leader mode (the shipped inflight.exchange): agent 0 leads the pool, as a collector would
      isLeader: () => g === 0,
    }));
    // each agent's exchange timer, at its own phase
    this.exchanges.forEach((x, g) => {
      const tick = (): void => {
        x.tick();
        ctx.at(ctx.now() + cfg.exchangeMs, tick);
      };
      ctx.at((g * cfg.exchangeMs) / this.exchanges.length, tick);
    });
  }

  onPublish(fn: (p: Published) => void): void {
    this.listeners.push(fn);
  }

  /** Starts scraping and publishing on the engine's clock. */
  attach(ctx: EngineCtx): void {
    this.ctx = ctx;
    const rng = mulberry32(this.seed ^ 0xa9e47);
    const I = this.spec.scrapeIntervalMs;
    this.publish(0); // 'initial'
    this.startExchanges();
    if (this.spec.publishMode === 'periodic') this.arm(0);
    // each instance on its own timer, first at a random phase (collector.schedule)
    for (let i = 0; i < this.inst.length; i++) {
      const phase = rng() * Math.min(100, I);
      const tick = (): void => {
        this.scrape(i, ctx.now());
        ctx.at(ctx.now() + I, tick);
      };
      ctx.at(phase, tick);
    }
    if (this.spec.publishMode === 'on-scrape') {
      // one publication per scrape round, just after the last instance's scrape (phases < 100 ms)
      const round = (): void => {
        this.publish(ctx.now());
        ctx.at(ctx.now() + I, round);
      };
      ctx.at(Math.min(100, I) + 0.001, round);
    }
  }

  private arm(t: number): void {
    const token = ++this.periodicToken;
    this.nextPeriodic = t + this.spec.publishIntervalMs;
    this.ctx.at(this.nextPeriodic, () => {
      if (token !== this.periodicToken) return; // re-armed by an earlier publication
      this.publish(this.ctx.now());
      this.arm(this.ctx.now());
    });
  }

  private scrape(i: number, t: number): void {
    const server: FifoQueueModel<number> = this.ctx.servers[i];
    const text = renderVllm({ model: server, modelName: 'sim-llm', gpuUtil: NaN, gpuMetrics: false, gpuUuid: '' });
    const signals = extractSignals(parseExposition(text), this.mappings);
    const rt = this.inst[i];
    if (!hasLoadSignal(signals)) throw new Error('simulated vLLM exposition without load signals');
    const at = this.epoch0 + t;
    rt.goodScrapes++;
    rt.lastOkAt = at;
    rt.state = rt.est.observe(at, signals);
    if (rt.state.windowCompletions > 0 && Number.isFinite(rt.state.p99Ms)) this.baseline.add(at, rt.state.p99Ms);
    const st = rt.state;
    this.scrapes.push({
      t, inst: i, rho: st.rho, lambdaPerS: st.lambdaPerS, queueDepth: st.queueDepth, esMs: st.esMs, es2Ms2: st.es2Ms2, slots: st.concurrency,
      util1s: server.utilization(t, 1000), inSystem: server.waiting + server.running, running: server.running,
    });
    // collector.afterScrape: a health flip is published at once (agent.ts 'health' listener)
    const rec = this.record(i, at);
    if (rt.lastHealthy !== rec.healthy) {
      rt.lastHealthy = rec.healthy;
      if (this.spec.publishMode === 'periodic') {
        this.publish(t);
        this.arm(t);
      }
    }
  }

  /** collector.detail() -> record(): the INSTANCES record of instance i at epoch time `now`. */
  record(i: number, now: number): InstanceRecord {
    const rt = this.inst[i];
    let reason: InstanceRecord['reason'] = 'ok';
    if (rt.goodScrapes < 2) reason = 'no_data';
    else if (rt.lastOkAt !== undefined && now - rt.lastOkAt > this.spec.staleAfterMs) reason = 'stale';
    return buildInstanceRecord({
      service: SERVICE, addr: this.addrs[i], peer: '', reason, state: rt.state,
      imputed: () => imputeFrom(this.inst.map((x) => x.state)),
      baselineMs: this.spec.baselineScope === 'service' ? this.baseline.value(now) : rt.est.baseline.value(now), lastOkAt: rt.lastOkAt, now, concurrency: this.spec.concurrency,
    }).record;
  }

  private publish(t: number): void {
    this.seq += 1;
    const at = this.epoch0 + t;
    const peers: PeerRecord[] = [{ name: 'cloud-b', state: 'normal', lastRttMs: 3, avgRttMs: 3, recoverStreak: 100, lastSampleAtMs: at }];
    const snapshot: Snapshot = { seq: this.seq, generatedAtMs: Math.floor(at), peers, instances: this.inst.map((_, i) => this.record(i, at)) };
    this.current = { snapshot, binary: encodeSnapshot(snapshot), t };
    this.publications++;
    for (const l of this.listeners) l(this.current);
  }
}

