// The `switchyard-filter` policy: the compiled filter (build/switchyard.wasm) in the embedded
// Proxy-Wasm host (host/) makes every decision, on a manual clock advanced to virtual time.
//
// Per request: a stream is started with the client's headers (`:path` /v1/completions or
// /v1/chat/completions, `content-type`, `content-length`, `x-request-id`, the trusted
// criticality header) and its JSON body (`"stream": true`) in 16 KiB chunks, as Envoy's
// connection manager hands a body to the filter chain; the filter holds the headers
// (StopIteration, allow_on_headers_stop_iteration as Envoy >= 1.35), buffers the body, chooses
// when it is complete, sets `x-switchyard-endpoint` (or answers 429 when it sheds) and the
// upstream side here reads the header. The stream stays open while the simulated vLLM instance
// serves the request: the response headers (200, text/event-stream) and the first SSE chunk
// reach the filter at the first token, the end of stream at the last one (Envoy's router
// delivering a streamed response), so the filter's in-flight counts and in-band learning see
// what they would see in Envoy.
//
// The agent is the real agent code (agent.ts), fed the simulator's /metrics page at each of the
// driver's scrapes; it publishes every publishIntervalMs and at once when an instance's health
// flips. The cluster `switchyard_agent` is served in-process with the agent's long-poll semantics
// (publisher.wait): an answer at once when the client's seq differs, else at the next
// publication or after waitMs. The held poll is answered synchronously at the publication's
// virtual time: the handler returns a thenable whose callbacks the host registers at once
// (host.ts calls `.then` on the handler's answer), so no event-loop turn is needed and the run
// stays a synchronous loop like the other policies.
//
// No endpoint (before the first usable snapshot): the filter forwards with `x-degraded: true`,
// which the route table sends to the regular cluster (Envoy LEAST_REQUEST, two choices over
// this proxy's active requests).
import { HeaderMap, ProxyWasmHost, type ClusterRequest, type ClusterResponse, type HttpStream } from '../../host/src';
import { CONTENT_TYPE } from '../../agent/src/snapshot/codec';
import { LlmEngine, type LlmEngineConfig } from '../../sim/inference/llm/engine';
import { mulberry32, type Rng } from '../../sim/inference/prng';
import { choiceOf, wasmBytes } from '../routing/switchyard';
import { DEFAULT_LLM_AGENT, LLM_SERVICE, LlmAgentModel, type LlmAgentSpec, modelsAnswer } from './agent';
import type { PolicyCtx, RouteRequest, RoutingPolicy } from './fleet';

export const START_EPOCH_MS = 1_700_000_000_000;
export const AUTHORITY = 'llm.prod.svc.cluster.local';
export const CRITICALITY_HEADER = 'x-switchyard-criticality';
const CHUNK_BYTES = 16 * 1024;

export interface FilterPolicyOpts {
  wasmPath?: string;
  agent?: Partial<LlmAgentSpec>;
  /** Envoy worker threads (one VM each) */
  workers?: number;
  /** loadAware.services[0] keys merged over the defaults (e.g. picker, request.shedding) */
  service?: Record<string, unknown>;
  /** request block keys merged over the defaults */
  request?: Record<string, unknown>;
  /** engine settings of the fleet this filter routes to (e.g. vLLM --scheduling-policy priority) */
  engine?: Partial<LlmEngineConfig>;
  name?: string;
  /** the agent's POST /v1/inflight (mesh in-flight, docs/mesh.md), answered in-process at the
   *  filter's virtual time `nowMs`; absent: 404, as an agent with `inflight.enabled: false` (the
   *  filter then prices its own in-flight only) */
  inflight?: (req: ClusterRequest, nowMs: number) => ClusterResponse;
  /** bench tracing: called with each response's debug header (set `service: { debug: true }`) */
  onDebug?: (idx: number, value: string) => void;
}

export function llmPluginConfig(o: FilterPolicyOpts = {}): Record<string, unknown> {
  const longPollMs = 500;
  return {
    agent: { cluster: 'switchyard_agent', authority: 'switchyard-agent', path: '/v1/snapshot', pollMs: 50, longPollMs, timeoutMs: longPollMs + 1000 },
    refreshMs: 20,
    leaseMs: 1000,
    // no cross-cloud link in this fleet (the section is required; no service uses it)
    link: { header: 'x-cross-cloud-status', stalenessMs: 1000, failMode: 'degraded', services: [] },
    loadAware: {
      services: [{
        authorities: [AUTHORITY], service: LLM_SERVICE, allIneligible: 'forward-degraded', ...o.service,
        request: { allowOnHeadersStopIteration: true, criticalityHeader: CRITICALITY_HEADER, ...o.request },
      }],
    },
  };
}

const SINK = { headers(): void {}, data(): void {}, reset(): void {} };

interface Waiter {
  deadline: number;
  resolve: (r: ClusterResponse) => void;
  done: boolean;
}

export interface FilterPolicyStats {
  routed: number;
  shed429: number;
  degraded: number;
  publications: number;
  polls: number;
  vmFailures: number;
  metrics: Record<string, number>;
}

export class SwitchyardFilterPolicy implements RoutingPolicy {
  readonly name: string;
  readonly scrapeMs: number;
  readonly engine?: Partial<LlmEngineConfig>;
  private host!: ProxyWasmHost;
  private agent!: LlmAgentModel;
  private ctx!: PolicyCtx;
  private readonly spec: LlmAgentSpec;
  private addrIndex = new Map<string, number>();
  private streams = new Map<number, HttpStream>();
  private waiters: Waiter[] = [];
  private current!: { seq: number; binary: Buffer };
  private nextPublish = 0;
  private health: boolean[] = [];
  private inflight: number[] = [];
  private rng!: Rng;
  private lastChoice = -2;
  private lastBody = '';
  private lastPriority: number | undefined;
  readonly stats: FilterPolicyStats = { routed: 0, shed429: 0, degraded: 0, publications: 0, polls: 0, vmFailures: 0, metrics: {} };

  constructor(private readonly opts: FilterPolicyOpts = {}) {
    this.spec = { ...DEFAULT_LLM_AGENT, ...opts.agent };
    this.scrapeMs = this.spec.scrapeIntervalMs;
    this.name = opts.name ?? `switchyard-filter (${this.scrapeMs} ms)`;
    this.engine = opts.engine;
  }

  private readonly upstream = {
    send: (_s: HttpStream, headers: HeaderMap, body: Buffer): void => {
      this.lastBody = body.toString('utf8');
      this.lastChoice = choiceOf(headers, this.addrIndex);
    },
  };

  init(ctx: PolicyCtx): void {
    this.ctx = ctx;
    this.rng = mulberry32(ctx.seed ^ 0xf117e4);
    const addrs = ctx.instances.map((_, i) => `10.0.${Math.floor(i / 250)}.${(i % 250) + 1}:8000`);
    addrs.forEach((a, i) => this.addrIndex.set(a, i));
    this.inflight = addrs.map(() => 0);
    const models = ctx.instances.map((s) => modelsAnswer(new LlmEngine(s.cfg)));
    this.agent = new LlmAgentModel(this.spec, addrs, models, START_EPOCH_MS);
    this.current = this.agent.publish(0); // 'initial'
    this.health = addrs.map(() => false);
    this.nextPublish = this.spec.publishIntervalMs;
    const { bytes } = wasmBytes(this.opts.wasmPath ?? 'build/switchyard.wasm');
    this.host = ProxyWasmHost.createSync({
      wasm: bytes,
      vmId: 'switchyard', rootId: 'switchyard', pluginName: 'switchyard',
      pluginConfig: JSON.stringify(llmPluginConfig(this.opts)),
      workers: this.opts.workers ?? 1,
      clock: 'manual',
      startTimeMs: START_EPOCH_MS,
      allowOnHeadersStopIteration: true,
      clusters: { switchyard_agent: { handler: (req) => this.serve(req) } },
      logLevel: 'warn',
    });
  }

  /** GET /v1/snapshot?after=SEQ&waitMs=N, as agent.ts + publisher.wait answer it. */
  private serve(req: ClusterRequest): ClusterResponse | Promise<ClusterResponse> {
    this.stats.polls++;
    const u = new URL(req.path, 'http://agent');
    if (u.pathname === '/v1/inflight' && this.opts.inflight) return this.opts.inflight(req, this.host.now() - START_EPOCH_MS);
    if (u.pathname !== '/v1/snapshot') return { status: 404, body: 'not found\n' };
    const after = u.searchParams.get('after') ?? undefined;
    const waitMs = Number(u.searchParams.get('waitMs') ?? 0);
    if (after === undefined || String(this.current.seq) !== after || !(waitMs > 0)) return this.answer();
    const w: Waiter = { deadline: this.host.now() - START_EPOCH_MS + Math.min(waitMs, 30_000), resolve: () => {}, done: false };
    this.waiters.push(w);
    // a thenable the host subscribes to synchronously (host.ts: `r.then(onReply, onError)`, then
    // clock.track on the result); it settles when wake() calls w.resolve
    const thenable = {
      then: (onReply?: (r: ClusterResponse) => unknown): unknown => {
        const settled: Array<() => void> = [];
        w.resolve = (r) => {
          onReply?.(r);
          for (const f of settled) f();
        };
        return { then: (a?: () => void): void => { if (a) settled.push(a); } };
      },
    };
    return thenable as unknown as Promise<ClusterResponse>;
  }

  private answer(): ClusterResponse {
    return { status: 200, headers: { 'content-type': CONTENT_TYPE, 'x-switchyard-seq': String(this.current.seq) }, body: this.current.binary };
  }

  private hostTo(t: number): void {
    const d = START_EPOCH_MS + t - this.host.now();
    if (d > 0) this.host.advanceSync(d);
  }

  private publish(t: number): void {
    this.hostTo(t);
    this.current = this.agent.publish(t);
    this.stats.publications++;
    this.nextPublish = t + this.spec.publishIntervalMs;
    this.wake(() => true);
  }

  private wake(which: (w: Waiter) => boolean): void {
    const keep: Waiter[] = [];
    let woke = false;
    for (const w of this.waiters) {
      if (w.done) continue;
      if (!which(w)) { keep.push(w); continue; }
      w.done = true;
      woke = true;
      w.resolve(this.answer());
    }
    this.waiters = keep;
    // the answers were posted at this instant: deliver them now
    if (woke) this.host.advanceSync(0);
  }

  /** Moves the host and the agent's publisher to virtual time t, in time order. */
  private sync(t: number): void {
    for (;;) {
      let next = this.nextPublish;
      for (const w of this.waiters) if (!w.done && w.deadline < next) next = w.deadline;
      if (next > t) break;
      if (next === this.nextPublish) this.publish(next);
      else {
        this.hostTo(next);
        this.wake((w) => w.deadline <= next);
      }
    }
    this.hostTo(t);
  }

  /** this proxy's shared data under the filter's vm_id (proxies.ts --share reads and writes the
   *  prefix-share document between ticks, when no VM runs) */
  shared(key: string): { value: Buffer; cas: number } | undefined {
    return this.host.process.sharedData.get(this.host.vmId, key);
  }

  setShared(key: string, value: Buffer): void {
    this.host.process.sharedData.set(this.host.vmId, key, value, 0);
  }

  /** the host and the agent's publisher moved to virtual time t (K proxies kept in step, proxies.ts) */
  advance(t: number): void {
    this.sync(t);
  }

  onMetrics(t: number, i: number, text: string): void {
    this.sync(t);
    this.agent.scrape(i, t, text);
    if (i === this.ctx.instances.length - 1) {
      // collector.afterScrape: a health flip is published at once (agent.ts 'health' listener)
      const h = this.agent.healthAt(t);
      if (h.some((x, j) => x !== this.health[j])) {
        this.health = h;
        this.publish(t);
      }
    }
  }

  route(t: number, r: RouteRequest): number {
    this.sync(t);
    this.lastChoice = -2;
    const { path, body } = r.wire();
    const bytes = Buffer.from(body, 'utf8');
    const headers = new HeaderMap('request', [
      [':method', 'POST'], [':path', path], [':authority', AUTHORITY], [':scheme', 'http'],
      ['content-type', 'application/json'], ['content-length', String(bytes.length)],
      ['x-request-id', `req-${r.idx}`], [CRITICALITY_HEADER, r.criticality],
    ]);
    const chunks: Buffer[] = [];
    for (let o = 0; o < bytes.length; o += CHUNK_BYTES) chunks.push(bytes.subarray(o, Math.min(bytes.length, o + CHUNK_BYTES)));
    const onDebug = this.opts.onDebug;
    const sink = onDebug ? { ...SINK, headers: (h: HeaderMap): void => { const d = h.get('x-switchyard-debug'); if (d !== undefined && d !== null) onDebug(r.idx, String(d)); } } : SINK;
    const { stream } = this.host.startStream(headers, chunks, true, sink, this.upstream, undefined, () => {});
    const c = this.lastChoice;
    if (c === -2) {
      const lr = stream.localReply;
      if (lr?.status === 429) {
        this.stats.shed429++;
        return -1;
      }
      throw new Error(`request ${r.idx}: the filter did not forward it (local reply ${lr?.status ?? '-'} ${lr?.details ?? ''} ${lr?.body.toString() ?? ''}, vm failure ${stream.vmFailure ?? '-'})`);
    }
    if (c === -3) throw new Error(`request ${r.idx}: forwarded with neither an endpoint nor x-degraded`);
    // the upstream gets the body as the filter left it: unchanged, or with its vLLM `priority`
    // appended (request.priority), which vLLM's JSON parser takes as the last duplicate
    const sent = JSON.parse(this.lastBody) as { priority?: number };
    this.lastPriority = sent.priority;
    const stripped = this.lastBody.replace(/,"priority":-?\d+}$/, '}');
    if (stripped !== body && this.lastBody !== body) throw new Error(`request ${r.idx}: the body reached the upstream changed beyond its priority`);
    this.streams.set(r.idx, stream);
    let inst = c;
    if (c >= 0) this.stats.routed++;
    else {
      this.stats.degraded++;
      inst = this.leastRequest(this.ctx.candidates(r.model));
    }
    this.inflight[inst]++;
    return inst;
  }

  priorityOf(): number | undefined {
    return this.lastPriority;
  }

  /** Envoy LEAST_REQUEST (2 choices, equal weights) over this proxy's active requests. */
  private leastRequest(cands: number[]): number {
    let best = cands[Math.floor(this.rng() * cands.length)];
    const b = cands[Math.floor(this.rng() * cands.length)];
    if (this.inflight[b] < this.inflight[best]) best = b;
    return best;
  }

  onFirstToken(t: number, _inst: number, r: RouteRequest): void {
    this.sync(t);
    const s = this.streams.get(r.idx);
    if (!s) return;
    s.onUpstreamHeaders(new HeaderMap('response', [[':status', '200'], ['content-type', 'text/event-stream']]), false);
    s.onUpstreamData(Buffer.from('data: {"choices":[{"text":"x"}]}\n\n'), false);
  }

  onComplete(t: number, inst: number, r: RouteRequest): void {
    this.sync(t);
    this.inflight[inst]--;
    const s = this.streams.get(r.idx);
    if (!s) return;
    this.streams.delete(r.idx);
    s.onUpstreamData(Buffer.from('data: [DONE]\n\n'), true);
    if (!s.done) throw new Error(`request ${r.idx}: stream did not complete after its response (state ${s.state})`);
  }

  finish(t: number): void {
    this.sync(t + 200);
    for (const m of this.host.metrics()) if (m.name.startsWith('switchyard.request.') || m.name.startsWith('switchyard.lb.') || m.name.startsWith('switchyard.mesh.prefix_')) this.stats.metrics[m.name] = m.value;
    this.stats.vmFailures = this.host.failures.length;
    this.host.closeSync();
    if (this.stats.vmFailures) throw new Error(`${this.name}: ${this.stats.vmFailures} VM failures`);
  }
}
