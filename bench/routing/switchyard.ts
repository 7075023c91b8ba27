// Switchyard policy: the compiled filter (build/switchyard.wasm) running in the embedded
// Proxy-Wasm host makes every routing decision.
//
// Per arrival: the host's manual clock is advanced to the arrival's virtual time (ticks,
// snapshot polls and their answers fire in order), then a stream is started through the
// filter with `:authority` of the load-aware service; the upstream side (our UpstreamHandler)
// reads the `x-switchyard-endpoint` the filter set. The stream stays OPEN (waiting for its
// upstream response) while the request is queued/served in the simulation. Its response arrives
// as Envoy's router would deliver it: the response headers (`:status`, and with the run's ORCA
// option the instance's `endpoint-load-metrics` header) when the instance starts answering
// (time to first token), then the end of stream when the service ends (on_response_body with
// end_of_stream, on_log, on_done -> the filter's in-flight count goes down). An error answer is
// headers-only with end of stream, a few ms after the request.
//
// Host API used: ProxyWasmHost.startStream(headers, body, ended, sink, upstream, worker, onDone)
// (public; the library request()/requestSync() complete the stream before returning, so they
// cannot hold a request open), HttpStream.onUpstreamHeaders(headers, endStream) and
// HttpStream.onUpstreamData(chunk, endStream).
//
// The agent cluster `switchyard_agent` is an in-process handler serving /v1/snapshot with the
// agent's long-poll semantics (publisher.wait): an answer at once if the client's seq differs,
// else a promise resolved at the next publication or after waitMs.
//
// No endpoint (all instances ineligible, e.g. before the first usable snapshot): the filter
// forwards with `x-degraded: true`, which the route table sends to the regular cluster
// (`inference_default`, LEAST_REQUEST): modelled with the same P2C as the LEAST_REQUEST policy.
import { createHash } from 'node:crypto';
import { appendFileSync, readFileSync } from 'node:fs';
import { HeaderMap, ProxyWasmHost, type ClusterRequest, type ClusterResponse, type HttpStream } from '../../host/src';
import { CONTENT_TYPE } from '../../agent/src/snapshot/codec';
import { INFLIGHT_CONTENT_TYPE } from '../../agent/src/mesh/inflight';
import { mulberry32, type Rng } from '../../sim/inference/prng';
import { AgentModel, type AgentSpec, SERVICE, type Published } from './agent-model';
import { type Answer, type EngineCtx, leastRequestPick, type RoutingPolicy } from './des';

/** The instance the filter chose, read as the upstream sees the request: its index in `addrIndex`,
 *  -1 forwarded degraded (no endpoint, `x-degraded: true`), -3 neither. */
export function choiceOf(headers: HeaderMap, addrIndex: Map<string, number>): number {
  const ep = headers.get('x-switchyard-endpoint');
  if (ep === undefined) return headers.get('x-degraded') === 'true' ? -1 : -3;
  const j = addrIndex.get(ep);
  if (j === undefined) throw new Error(`filter chose unknown endpoint ${ep}`);
  return j;
}

export const START_EPOCH_MS = 1_700_000_000_000;
export const AUTHORITY = 'inference.prod.svc.cluster.local';

export interface FilterTuning {
  model?: 'conditional' | 'mg1';
  picker?: 'p2c' | 'band';
  band?: number;
  maxUtilization?: number;
  stalenessMs?: number;
  refreshMs?: number;
  /** agent.longPollMs (0 = plain polling every pollMs) */
  longPollMs?: number;
  pollMs?: number;
  /** loadAware.services[].debug (the debug response header) */
  debug?: boolean;
  /** loadAware.services[].inband (docs/contracts.md), e.g. { enabled: false } for the in-band-off comparison */
  inband?: Record<string, unknown>;
  /** loadAware.meshReportMs (undefined: the filter's default; 0: mesh in-flight off, each proxy knows its own requests) */
  meshReportMs?: number;
}

export function pluginConfig(t: FilterTuning = {}): Record<string, unknown> {
  const longPollMs = t.longPollMs ?? 500;
  const svc: Record<string, unknown> = { authorities: [AUTHORITY], service: SERVICE, allIneligible: 'forward-degraded' };
  if (t.model !== undefined) svc.model = t.model;
  if (t.picker !== undefined) svc.picker = t.picker;
  if (t.band !== undefined) svc.band = t.band;
  if (t.maxUtilization !== undefined) svc.maxUtilization = t.maxUtilization;
  if (t.stalenessMs !== undefined) svc.stalenessMs = t.stalenessMs;
  if (t.debug !== undefined) svc.debug = t.debug;
  if (t.inband !== undefined) svc.inband = t.inband;
  return {
    agent: { cluster: 'switchyard_agent', authority: 'switchyard-agent', path: '/v1/snapshot', pollMs: t.pollMs ?? 50, longPollMs, timeoutMs: longPollMs + 1000 },
    refreshMs: t.refreshMs ?? 20,
    leaseMs: 1000,
    link: { header: 'x-cross-cloud-status', stalenessMs: 1000, failMode: 'degraded', services: [{ authorities: ['payment-service.prod.svc.cluster.local'], peer: 'cloud-b' }] },
    loadAware: { services: [svc], ...(t.meshReportMs !== undefined ? { meshReportMs: t.meshReportMs } : {}) },
  };
}

let wasmCache: { path: string; bytes: Buffer; sha256: string } | undefined;
/** The module bytes, read once per process (a concurrent rebuild cannot mix two builds into one run). */
export function wasmBytes(path: string): { bytes: Buffer; sha256: string } {
  if (!wasmCache || wasmCache.path !== path) {
    const bytes = readFileSync(path);
    wasmCache = { path, bytes, sha256: createHash('sha256').update(bytes).digest('hex') };
  }
  return wasmCache;
}

const SINK = { headers(): void {}, data(): void {}, reset(): void {} };

interface Waiter {
  resolve: (r: ClusterResponse) => void;
  done: boolean;
}

export interface SwitchyardStats {
  /** requests the filter routed (endpoint header set) */
  filterRouted: number;
  /** requests forwarded without endpoint (x-degraded), routed by the fallback P2C */
  fallback: number;
  /** Σ switchyard.lb.choice.* in the host after the run */
  choiceMetric: number;
  allIneligibleMetric: number;
  skipMetrics: Record<string, number>;
  snapshotUpdates: number;
  polls: number;
  /** mesh in-flight reports the agent answered (POST /v1/inflight) */
  meshReports: number;
  publications: number;
  vmFailures: number;
  /** fallback count among measured requests */
  fallbackMeasured: number;
  /**
   * Measured decisions at which the agent's current snapshot put at least one instance out by
   * its rho (rho >= maxUtilization, or rho >= 1: infinite M/G/1 cost) while that instance had a
   * free slot at that instant -- capacity the filter could not use; and the free slots so lost
   * (mean per measured decision).
   */
  rhoExcludedWithFreeSlot: number;
  freeSlotsExcludedPerDecision: number;
}

export class SwitchyardPolicy implements RoutingPolicy {
  readonly name: string;
  host!: ProxyWasmHost;
  agent!: AgentModel;
  private ctx!: EngineCtx;
  private addrIndex = new Map<string, number>();
  private streams: Array<HttpStream | undefined> = [];
  private waiters: Waiter[] = [];
  private rng: Rng;
  private lastChoice = -2;
  private readonly upstream = {
    send: (_s: HttpStream, headers: HeaderMap): void => {
      this.lastChoice = choiceOf(headers, this.addrIndex);
    },
  };
  readonly stats: SwitchyardStats = {
    filterRouted: 0, fallback: 0, choiceMetric: 0, allIneligibleMetric: 0, skipMetrics: {}, snapshotUpdates: 0, polls: 0, meshReports: 0, publications: 0, vmFailures: 0, fallbackMeasured: 0,
    rhoExcludedWithFreeSlot: 0, freeSlotsExcludedPerDecision: 0,
  };
  /** fallback flag per request id */
  fallbackIds: Uint8Array = new Uint8Array(0);

  constructor(
    private readonly opts: {
      wasmPath: string; agent: AgentSpec; tuning?: FilterTuning; workers?: number; seed: number; name?: string; measuredRange?: [number, number];
      /** an agent shared with other proxies (its owner attaches it to the engine) */
      sharedAgent?: AgentModel;
      /** which of the shared agent model's mesh in-flight aggregations (agents) this proxy reports to */
      inflightGroup?: number;
    },
  ) {
    this.name = opts.name ?? 'switchyard';
    this.rng = mulberry32(opts.seed ^ 0xfa11);
  }

  init(ctx: EngineCtx): void {
    this.ctx = ctx;
    ctx.addrs.forEach((a, i) => this.addrIndex.set(a, i));
    this.agent = this.opts.sharedAgent ?? new AgentModel(this.opts.agent, ctx.addrs, START_EPOCH_MS, this.opts.seed);
    this.agent.onPublish((p) => this.wake(p));
    const { bytes } = wasmBytes(this.opts.wasmPath);
    this.host = ProxyWasmHost.createSync({
      wasm: bytes,
      vmId: 'switchyard', rootId: 'switchyard', pluginName: 'switchyard',
      pluginConfig: JSON.stringify(pluginConfig(this.opts.tuning)),
      workers: this.opts.workers ?? 2,
      clock: 'manual',
      startTimeMs: START_EPOCH_MS,
      clusters: { switchyard_agent: { handler: (req) => this.serve(req) } },
      logLevel: 'warn',
      // SY_DBG=<file>: appends the filter's "SYDBG ..." log lines (a temporarily instrumented build's) to the file
      ...(process.env.SY_DBG ? { onLog: (e: { message: string }) => { if (e.message.startsWith('SYDBG')) appendFileSync(process.env.SY_DBG!, `${this.opts.name}|${e.message}\n`); } } : {}),
    });
    if (!this.opts.sharedAgent) this.agent.attach(ctx);
  }

  /** GET /v1/snapshot?after=SEQ&waitMs=N, as agent.ts + publisher.wait answer it. */
  private serve(req: ClusterRequest): ClusterResponse | Promise<ClusterResponse> {
    const u = new URL(req.path, 'http://agent');
    if (u.pathname === '/v1/inflight') {
      // POST /v1/inflight as agent/src/api/inflight.ts answers it, from the agent's aggregation
      if (req.method !== 'POST') return { status: 405, body: 'method not allowed\n' };
      const r = this.agent.inflight(this.opts.inflightGroup ?? 0).report(req.body);
      if (!r.ok) return { status: r.status, body: `${r.error}\n` };
      this.stats.meshReports++;
      return { status: 200, headers: { 'content-type': INFLIGHT_CONTENT_TYPE }, body: r.answer };
    }
    this.stats.polls++;
    if (u.pathname !== '/v1/snapshot') return { status: 404, body: 'not found\n' };
    const after = u.searchParams.get('after') ?? undefined;
    const waitMs = Number(u.searchParams.get('waitMs') ?? 0);
    const cur = this.agent.current;
    if (after === undefined || String(cur.snapshot.seq) !== after || !(waitMs > 0)) return answer(cur);
    return new Promise<ClusterResponse>((resolve) => {
      const w: Waiter = { resolve, done: false };
      this.waiters.push(w);
      this.ctx.at(this.ctx.now() + Math.min(waitMs, 30_000), () => {
        if (w.done) return;
        w.done = true;
        this.waiters = this.waiters.filter((x) => x !== w);
        w.resolve(answer(this.agent.current));
        this.ctx.requestSettle();
      });
    });
  }

  private wake(p: Published): void {
    if (!this.waiters.length) return;
    const ws = this.waiters;
    this.waiters = [];
    for (const w of ws) {
      if (w.done) continue;
      w.done = true;
      w.resolve(answer(p));
    }
    // the host delivers a handler's promise answer once it settles (a microtask), then at the
    // next advance of the manual clock: let the loop yield once
    this.ctx.requestSettle();
  }

  advanceTo(t: number): void {
    const target = START_EPOCH_MS + t;
    const d = target - this.host.now();
    if (d > 0) this.host.advanceSync(d);
  }

  private freeSlotsLost = 0;
  private measuredDecisions = 0;

  /** See SwitchyardStats.rhoExcludedWithFreeSlot (the filter's own view may lag this by a tick). */
  private noteExclusions(): void {
    const recs = this.agent.current.snapshot.instances ?? [];
    const maxU = Math.fround(this.opts.tuning?.maxUtilization ?? 0.95);
    const c = this.ctx.fleet.slots;
    let lost = 0;
    for (let j = 0; j < recs.length; j++) {
      const r = recs[j];
      const rho = Math.fround(r.rho);
      if (r.healthy && !(rho < maxU && rho < 1)) {
        const free = c - this.ctx.servers[j].running;
        if (free > 0) lost += free;
      }
    }
    this.measuredDecisions++;
    if (lost > 0) this.stats.rhoExcludedWithFreeSlot++;
    this.freeSlotsLost += lost;
  }

  route(_t: number, id: number): number {
    this.lastChoice = -2;
    const mr = this.opts.measuredRange;
    if (mr && id >= mr[0] && id < mr[1]) this.noteExclusions();
    const headers = new HeaderMap('request', [
      [':method', 'POST'], [':path', '/v1/completions'], [':authority', AUTHORITY], [':scheme', 'http'],
      ['content-type', 'application/json'],
    ]);
    const { stream } = this.host.startStream(headers, null, true, SINK, this.upstream, undefined, () => {});
    const c = this.lastChoice;
    if (c === -2) throw new Error(`request ${id}: the filter did not forward the request (local reply ${stream.localReply?.status ?? '-'} ${stream.localReply?.details ?? ''}, vm failure ${stream.vmFailure ?? '-'})`);
    if (c === -3) throw new Error(`request ${id}: forwarded with neither an endpoint nor x-degraded`);
    if (this.streams.length <= id) this.streams.length = id + 1;
    this.streams[id] = stream;
    if (this.fallbackIds.length <= id) {
      const n = new Uint8Array(Math.max(1024, id * 2));
      n.set(this.fallbackIds);
      this.fallbackIds = n;
    }
    if (c >= 0) {
      this.stats.filterRouted++;
      return c;
    }
    this.stats.fallback++;
    this.fallbackIds[id] = 1;
    const r = this.opts.measuredRange;
    if (r && id >= r[0] && id < r[1]) this.stats.fallbackMeasured++;
    return leastRequestPick(this.ctx.inSystem, this.rng, 2);
  }

  /**
   * Response headers as Envoy's router hands them to the filter chain: `:status`, and the
   * instance's ORCA `endpoint-load-metrics` when the run has it. A 2xx answer keeps the stream
   * open (the body streams until complete()); an error answer is headers-only, end of stream.
   */
  respond(_t: number, id: number, _inst: number, a: Answer): void {
    const s = this.streams[id];
    if (!s) return;
    const pairs: Array<[string, string]> = [[':status', String(a.status)]];
    if (a.orca !== undefined) pairs.push(['endpoint-load-metrics', a.orca]);
    const end = a.status >= 300;
    if (end) {
      pairs.push(['content-length', '0']);
      this.streams[id] = undefined;
    }
    s.onUpstreamHeaders(new HeaderMap('response', pairs), end);
    if (end && !s.done) throw new Error(`request ${id}: stream did not complete after its ${a.status} answer (state ${s.state})`);
  }

  /** End of stream of a 2xx answer: the last (empty) body chunk; on_log and on_done follow. */
  complete(_t: number, id: number): void {
    const s = this.streams[id];
    if (!s) return;
    this.streams[id] = undefined;
    s.onUpstreamData(Buffer.alloc(0), true);
    if (!s.done) throw new Error(`request ${id}: stream did not complete after its response (state ${s.state})`);
  }

  finish(): void {
    // one more refresh period so request-path counters flushed on the tick are visible
    this.host.advanceSync(200);
    let choice = 0;
    const skips: Record<string, number> = {};
    for (const m of this.host.metrics()) {
      if (m.name.startsWith('switchyard.lb.choice.')) choice += m.value;
      else if (m.name.startsWith('switchyard.lb.skip.')) skips[m.name.slice('switchyard.lb.skip.'.length)] = m.value;
    }
    this.stats.choiceMetric = choice;
    this.stats.skipMetrics = skips;
    this.stats.allIneligibleMetric = this.host.metric('switchyard.lb.all_ineligible') ?? 0;
    this.stats.snapshotUpdates = this.host.metric('switchyard.snapshot.updates') ?? 0;
    this.stats.publications = this.agent.publications;
    this.stats.vmFailures = this.host.failures.length;
    if (this.measuredDecisions > 0) {
      this.stats.freeSlotsExcludedPerDecision = this.freeSlotsLost / this.measuredDecisions;
      this.stats.rhoExcludedWithFreeSlot /= this.measuredDecisions;
    }
    // close: open streams (requests past the measured ones) are reset
    this.host.closeSync();
  }
}

function answer(p: Published): ClusterResponse {
  return { status: 200, headers: { 'content-type': CONTENT_TYPE, 'x-switchyard-seq': String(p.snapshot.seq) }, body: p.binary };
}
