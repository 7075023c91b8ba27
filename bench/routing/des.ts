// Routing-quality benchmark: a discrete-event simulation in VIRTUAL time.
//
// A heterogeneous fleet of FIFO c-slot servers (sim/inference/queue.ts FifoQueueModel) fed by
// Poisson arrivals; a routing policy picks the instance of every request. All policies of one
// (load, seed) see the SAME sample path (common random numbers): the arrival times and each
// request's base service time X (at speed 1) are drawn once; on instance j the request takes
// X / speed_j. Policies only differ in where requests go.
//
// Time: t = ms since the start of the run (0 = the manual clock's start epoch of the embedded
// host, see switchyard.ts). Nothing sleeps; the event loop is synchronous except that it awaits
// a macrotask after a policy asks for it (the agent's long-poll answers are promises).
import { makeDistribution } from '../../sim/inference/distributions';
import { mulberry32, openUniform, type Rng } from '../../sim/inference/prng';
import { FifoQueueModel } from '../../sim/inference/queue';
import { MinHeap } from '../../host/src/heap';

// ---------------------------------------------------------------- fleet and sample paths

export interface FleetSpec {
  /** relative speed of each instance (service time = base / speed) */
  speeds: number[];
  /** slots c per instance (FIFO queue, c servers) */
  slots: number;
  /** mean service time at speed 1 (ms) */
  meanMs: number;
  /** lognormal sigma of the base service time */
  sigma: number;
}

export const DEFAULT_FLEET: FleetSpec = {
  speeds: [1, 1, 1, 0.8, 0.8, 0.6, 0.5, 0.35],
  slots: 4,
  meanMs: 80,
  sigma: 1.1,
};

/**
 * A fleet that mixes GPU generations: 2 instances of the newest (speed 1), 4 of the previous one
 * (0.55) and 2 small inference GPUs (0.2). Illustrative ratios, not measurements of particular
 * cards. DEFAULT_FLEET's spread (1 to 0.35, most of the capacity in near-equal instances) is the
 * hard case for a latency-aware router; this is the case it is built for.
 */
export const MIXED_FLEET: FleetSpec = {
  speeds: [1, 1, 0.55, 0.55, 0.55, 0.55, 0.2, 0.2],
  slots: 4,
  meanMs: 80,
  sigma: 1.1,
};

/** Fleet capacity in requests/s: Σ c·speed / E[S]. */
export function capacityPerS(f: FleetSpec): number {
  return (f.slots * f.speeds.reduce((a, b) => a + b, 0)) / (f.meanMs / 1000);
}

export function instanceAddrs(f: FleetSpec): string[] {
  return f.speeds.map((_, i) => `10.0.0.${i + 1}:8000`);
}

/** Rate multiplier over an interval (a burst), on top of the base Poisson rate. */
export interface Burst {
  atMs: number;
  durationMs: number;
  /** arrival rate during the burst = factor × base rate */
  factor: number;
}

export interface SamplePath {
  rho: number;
  lambdaPerS: number;
  /** arrival times (ms), ascending */
  arrivals: Float64Array;
  /** base service time at speed 1 (ms) */
  baseService: Float64Array;
  /** index of the first measured request, and how many are measured */
  firstMeasured: number;
  measured: number;
  warmupMs: number;
  bursts: Burst[];
}

/**
 * Arrivals: unit-rate exponential gaps mapped through the inverse of the cumulative rate
 * Λ(t) (piecewise constant: base λ, factor·λ inside bursts), so the same seed gives the same
 * "shape" at every load. Service: lognormal(meanMs, sigma) from an independent stream.
 */
export function makeSamplePath(fleet: FleetSpec, opts: { rho: number; seed: number; warmupMs: number; measured: number; bursts?: Burst[]; tail?: number }): SamplePath {
  const lambdaPerS = opts.rho * capacityPerS(fleet);
  const lam = lambdaPerS / 1000; // per ms
  const bursts = [...(opts.bursts ?? [])].sort((a, b) => a.atMs - b.atMs);
  const arrRng = mulberry32(opts.seed * 2 + 1);
  const svcRng = mulberry32(opts.seed * 2 + 2);
  const dist = makeDistribution({ kind: 'lognormal', meanMs: fleet.meanMs, sigma: fleet.sigma });
  // rate at time t and the next change point
  const rateAt = (t: number): { r: number; until: number } => {
    for (const b of bursts) {
      if (t < b.atMs) return { r: lam, until: b.atMs };
      if (t < b.atMs + b.durationMs) return { r: lam * b.factor, until: b.atMs + b.durationMs };
    }
    return { r: lam, until: Infinity };
  };
  const arr: number[] = [];
  let t = 0;
  let firstMeasured = -1;
  const tail = opts.tail ?? Math.max(2000, Math.round(opts.measured * 0.1));
  for (;;) {
    // one unit-rate exponential gap, spread over rate segments
    let e = -Math.log(openUniform(arrRng));
    for (;;) {
      const { r, until } = rateAt(t);
      const dt = e / r;
      if (t + dt <= until) {
        t += dt;
        break;
      }
      e -= (until - t) * r;
      t = until;
    }
    arr.push(t);
    if (firstMeasured < 0 && t >= opts.warmupMs) firstMeasured = arr.length - 1;
    if (firstMeasured >= 0 && arr.length >= firstMeasured + opts.measured + tail) break;
  }
  const baseService = new Float64Array(arr.length);
  for (let i = 0; i < arr.length; i++) baseService[i] = dist.sample(svcRng);
  return { rho: opts.rho, lambdaPerS, arrivals: Float64Array.from(arr), baseService, firstMeasured, measured: opts.measured, warmupMs: opts.warmupMs, bursts };
}

// ---------------------------------------------------------------- event heap

interface Ev {
  t: number;
  seq: number;
  /** 0: end of stream (instance, job), 1: timer (fn), 2: response headers (instance, job), 3: error answer (instance, request id) */
  kind: 0 | 1 | 2 | 3;
  inst: number;
  job: unknown;
  fn: (() => void) | null;
}

/** The event queue: time order, then insertion order. */
class Heap {
  private readonly q = new MinHeap<Ev>((a, b) => a.t < b.t || (a.t === b.t && a.seq < b.seq));
  private seq = 0;
  get size(): number {
    return this.q.size;
  }
  peek(): Ev | undefined {
    return this.q.peek();
  }
  push(t: number, kind: Ev['kind'], inst: number, job: unknown, fn: (() => void) | null): void {
    this.q.push({ t, seq: this.seq++, kind, inst, job, fn });
  }
  pop(): Ev | undefined {
    return this.q.pop();
  }
}

// ---------------------------------------------------------------- policies

/** What a policy may read and do. */
export interface EngineCtx {
  readonly fleet: FleetSpec;
  readonly addrs: string[];
  readonly servers: FifoQueueModel<number>[];
  /** requests at each instance (waiting + running): Envoy's rq_active when this proxy is the only client */
  readonly inSystem: Int32Array;
  /** schedules fn at time t (ms) */
  at(t: number, fn: () => void): void;
  /** the loop awaits one macrotask before the next event (promise-based answers settle) */
  requestSettle(): void;
  now(): number;
}

export interface RoutingPolicy {
  readonly name: string;
  init(ctx: EngineCtx): void;
  /** called with the time of every event before it is processed */
  advanceTo?(t: number): void;
  /** instance index for request `id` arriving now */
  route(t: number, id: number): number;
  /**
   * The response headers of request `id` arrive from instance `inst`: when the instance starts
   * answering (time to first token, `RunOptions.ttftFraction`), or at once with an error status
   * (an error answer ends the stream: `complete` is not called for it).
   */
  respond?(t: number, id: number, inst: number, answer: Answer): void;
  /** request `id` finished at instance `inst` (end of stream of a 2xx answer) */
  complete?(t: number, id: number, inst: number): void;
  /** the run is over (all measured requests done) */
  finish?(t: number): void;
}

/** Envoy ROUND_ROBIN with equal weights. */
export class RoundRobin implements RoutingPolicy {
  readonly name = 'round-robin';
  private i = 0;
  private n = 0;
  init(ctx: EngineCtx): void {
    this.n = ctx.addrs.length;
  }
  route(): number {
    return this.i++ % this.n;
  }
}

/** Envoy RANDOM. */
export class RandomPolicy implements RoutingPolicy {
  readonly name = 'random';
  private n = 0;
  private rng: Rng;
  constructor(seed: number) {
    this.rng = mulberry32(seed ^ 0x5eed);
  }
  init(ctx: EngineCtx): void {
    this.n = ctx.addrs.length;
  }
  route(): number {
    return Math.floor(this.rng() * this.n) % this.n;
  }
}

/**
 * Envoy LEAST_REQUEST with all weights equal: LeastRequestLoadBalancer::unweightedHostPick(N
 * choices) -- choice_count (default 2) hosts drawn uniformly WITH replacement, the one with
 * strictly fewer rq_active wins, the first drawn keeps ties. rq_active is the host's
 * process-wide active-request gauge (exact across workers).
 */
export function leastRequestPick(inSystem: Int32Array, rng: Rng, choiceCount = 2): number {
  const n = inSystem.length;
  let cand = -1;
  for (let k = 0; k < choiceCount; k++) {
    const j = Math.floor(rng() * n) % n;
    if (cand < 0 || inSystem[j] < inSystem[cand]) cand = j;
  }
  return cand;
}

export class LeastRequest implements RoutingPolicy {
  readonly name: string;
  private rng: Rng;
  private ctx!: EngineCtx;
  constructor(seed: number, private readonly choiceCount = 2) {
    this.rng = mulberry32(seed ^ 0x1ea57);
    this.name = choiceCount === 2 ? 'least-request' : `least-request(c=${choiceCount})`;
  }
  init(ctx: EngineCtx): void {
    this.ctx = ctx;
  }
  route(): number {
    return leastRequestPick(this.ctx.inSystem, this.rng, this.choiceCount);
  }
}

// ---------------------------------------------------------------- the run

/** What the instance answers: the response headers a proxy sees. */
export interface Answer {
  status: number;
  /**
   * The instance's ORCA per-request load report, the value of the `endpoint-load-metrics` response
   * header in Envoy's TEXT format (only with `RunOptions.orca`).
   */
  orca?: string;
}

/**
 * Something wrong with one instance for a while, with no change in the offered load.
 * `slow`: a request whose service STARTS in [fromMs, toMs) takes `factor` times as long (a
 * degraded GPU, a noisy neighbour); `error`: every request routed to it in [fromMs, toMs) is
 * answered `status` after `errorMs`, without queueing (a "black hole": it looks idle).
 */
export interface Episode {
  /** 'stall': the instance stops answering in [fromMs, toMs) (a hung engine, a "slow hole"):
   *  service makes no progress inside the window, so every answer due in it comes after toMs;
   *  requests still arrive and queue, and it looks busy but never finishes anything. */
  kind: 'slow' | 'error' | 'stall';
  inst: number;
  fromMs: number;
  toMs: number;
  /** slow: service time multiplier */
  factor?: number;
  /** error: time to the error answer (ms, default 2) */
  errorMs?: number;
  /** error: the status (default 503) */
  status?: number;
}

export interface RunOptions {
  episodes?: Episode[];
  /**
   * Response headers at service start + ttftFraction × service time (streaming inference: time
   * to first token; 1 = headers with the last byte). Default 0.1.
   */
  ttftFraction?: number;
  /** attach an ORCA `endpoint-load-metrics` header to every answer (default off) */
  orca?: boolean;
}

/** ORCA report window: rps_fractional, eps and application_utilization over the last second. */
const ORCA_WINDOW_MS = 1000;

/**
 * The load report a simulated instance would attach (TEXT format of Envoy's
 * `endpoint-load-metrics`): application_utilization = busy slot-time / capacity over the last
 * second, rps_fractional / eps = answers / error answers per second over the last second,
 * named_metrics.queue = requests waiting now.
 */
export function orcaText(m: { utilization: number; rps: number; eps: number; queue: number }): string {
  return `TEXT application_utilization=${m.utilization.toFixed(4)},rps_fractional=${m.rps.toFixed(3)},eps=${m.eps.toFixed(3)},named_metrics.queue=${m.queue}`;
}

/** Answer times (ms) of one instance over a trailing window (bounded by the window's answers). */
class RateWindow {
  private t: number[] = [];
  private head = 0;
  add(now: number): void {
    this.t.push(now);
  }
  count(now: number, w: number): number {
    while (this.head < this.t.length && this.t[this.head] <= now - w) this.head++;
    if (this.head > 4096) {
      this.t = this.t.slice(this.head);
      this.head = 0;
    }
    return this.t.length - this.head;
  }
}

export interface RunResult {
  policy: string;
  rho: number;
  /** response times (queue + service, ms; error answers: time to the error) of the measured requests, in arrival order */
  responseMs: Float64Array;
  /** status of every measured request's answer (200 or an episode's error status) */
  status: Uint16Array;
  /** instance chosen for every request (all, not only measured) */
  choice: Int8Array;
  arrivals: Float64Array;
  /** measured requests per instance */
  perInstance: number[];
  /** error answers among all requests (not only measured) */
  errors: number;
  /** requests whose answer ended (2xx end of stream or error), all requests */
  finished: number;
  /** response headers delivered to the policy, all requests */
  responded: number;
  /** virtual time simulated (ms) */
  virtualMs: number;
  wallMs: number;
}

/**
 * Runs one policy over one sample path. Extra event sources (the agent's scrapes and
 * publications) are scheduled by the policy in init() through ctx.at(). Every request's stream
 * lifecycle reaches the policy as a proxy sees it: route() at arrival (request headers),
 * respond() at the response headers, complete() at the end of a 2xx stream.
 */
export async function runPolicy(fleet: FleetSpec, path: SamplePath, policy: RoutingPolicy, opts: RunOptions = {}): Promise<RunResult> {
  const wall0 = performance.now();
  const n = fleet.speeds.length;
  const addrs = instanceAddrs(fleet);
  const servers = fleet.speeds.map(() => new FifoQueueModel<number>({ concurrency: fleet.slots }));
  const inSystem = new Int32Array(n);
  const heap = new Heap();
  const ttft = opts.ttftFraction ?? 0.1;
  if (!(ttft > 0 && ttft <= 1)) throw new Error(`ttftFraction must be in (0, 1], got ${ttft}`);
  const episodes = opts.episodes ?? [];
  for (const e of episodes) {
    if (!(e.inst >= 0 && e.inst < n)) throw new Error(`episode.inst ${e.inst} is not an instance of the fleet`);
    if (!(e.toMs > e.fromMs)) throw new Error(`episode.toMs ${e.toMs} must be after fromMs ${e.fromMs}`);
    if (e.kind === 'slow' && !((e.factor ?? 0) > 0)) throw new Error('episode.factor must be > 0 for a slow episode');
  }
  const answers = fleet.speeds.map(() => new RateWindow());
  const errorAnswers = fleet.speeds.map(() => new RateWindow());
  let now = 0;
  let settle = false;
  const ctx: EngineCtx = {
    fleet,
    addrs,
    servers,
    inSystem,
    at: (t, fn) => heap.push(Math.max(t, now), 1, -1, null, fn),
    requestSettle: () => {
      settle = true;
    },
    now: () => now,
  };
  policy.init(ctx);
  const A = path.arrivals;
  const S = path.baseService;
  const total = A.length;
  const choice = new Int8Array(total).fill(-1);
  const responseMs = new Float64Array(path.measured);
  const status = new Uint16Array(path.measured);
  const perInstance = new Array(n).fill(0);
  const m0 = path.firstMeasured;
  const m1 = m0 + path.measured;
  let measuredLeft = path.measured;
  let errors = 0;
  let finished = 0;
  let responded = 0;
  let ai = 0;
  const episodeAt = (inst: number, t: number, kind: Episode['kind']): Episode | undefined =>
    episodes.find((e) => e.kind === kind && e.inst === inst && t >= e.fromMs && t < e.toMs);
  const answer = (inst: number, st: number): Answer => {
    if (!opts.orca) return { status: st };
    const w = ORCA_WINDOW_MS;
    return {
      status: st,
      orca: orcaText({
        utilization: servers[inst].utilization(now, w),
        rps: answers[inst].count(now, w) / (w / 1000),
        eps: errorAnswers[inst].count(now, w) / (w / 1000),
        queue: servers[inst].waiting,
      }),
    };
  };
  const stalls = episodes.filter((e) => e.kind === 'stall').sort((a, b) => a.fromMs - b.fromMs);
  /** when `work` ms of service started at `s` on `inst` ends: no progress inside its stall windows */
  const progressEnd = (inst: number, s: number, work: number): number => {
    let t = s;
    let left = work;
    for (const e of stalls) {
      if (e.inst !== inst || e.toMs <= t) continue;
      if (t + left <= e.fromMs) break;
      if (t < e.fromMs) left -= e.fromMs - t;
      t = e.toMs;
    }
    return t + left;
  };
  const startJob = (inst: number, job: { id: number; serviceMs: number; payload?: number }): void => {
    const slow = episodeAt(inst, now, 'slow');
    if (slow) job.serviceMs *= slow.factor!;
    let hdrAt = now + ttft * job.serviceMs;
    if (stalls.length) {
      hdrAt = progressEnd(inst, now, ttft * job.serviceMs);
      job.serviceMs = progressEnd(inst, now, job.serviceMs) - now; // the slot is held through the stall
    }
    // headers first: at ttftFraction 1 both events share the time and the heap keeps insertion order
    heap.push(hdrAt, 2, inst, job, null);
    heap.push(now + job.serviceMs, 0, inst, job, null);
  };
  const finish = (id: number, arrivedAt: number, st: number): void => {
    finished++;
    if (id >= m0 && id < m1) {
      responseMs[id - m0] = now - arrivedAt;
      status[id - m0] = st;
      measuredLeft--;
    }
  };
  while (measuredLeft > 0) {
    const ev = heap.peek();
    const ta = ai < total ? A[ai] : Infinity;
    if (!ev && ta === Infinity) throw new Error(`${policy.name}: event queue ran dry with ${measuredLeft} measured requests unfinished`);
    if (ev && ev.t <= ta) {
      heap.pop();
      now = ev.t;
      policy.advanceTo?.(now);
      if (ev.kind === 1) {
        ev.fn!();
      } else if (ev.kind === 2) {
        const job = ev.job as { payload?: number };
        responded++;
        policy.respond?.(now, job.payload as number, ev.inst, answer(ev.inst, 200));
      } else if (ev.kind === 3) {
        const { id, arrivedAt, st } = ev.job as { id: number; arrivedAt: number; st: number };
        const inst = ev.inst;
        inSystem[inst]--;
        errors++;
        if (opts.orca) {
          answers[inst].add(now);
          errorAnswers[inst].add(now);
        }
        finish(id, arrivedAt, st);
        responded++;
        policy.respond?.(now, id, inst, answer(inst, st));
      } else {
        const inst = ev.inst;
        const job = ev.job as Parameters<FifoQueueModel<number>['complete']>[1];
        const started = servers[inst].complete(now, job);
        inSystem[inst]--;
        if (opts.orca) answers[inst].add(now);
        for (const s of started) startJob(inst, s);
        const id = job.payload as number;
        finish(id, job.arrivedAt, 200);
        policy.complete?.(now, id, inst);
      }
    } else {
      now = ta;
      policy.advanceTo?.(now);
      const id = ai++;
      const inst = policy.route(now, id);
      if (!(inst >= 0 && inst < n)) throw new Error(`${policy.name}: route() gave ${inst}`);
      choice[id] = inst;
      if (id >= m0 && id < m1) perInstance[inst]++;
      inSystem[inst]++;
      const bad = episodeAt(inst, now, 'error');
      if (bad) {
        heap.push(now + (bad.errorMs ?? 2), 3, inst, { id, arrivedAt: now, st: bad.status ?? 503 }, null);
      } else {
        const job = servers[inst].arrive(now, S[id] / fleet.speeds[inst], id);
        if (job.startedAt !== undefined) startJob(inst, job);
      }
    }
    if (settle) {
      settle = false;
      await new Promise((r) => setImmediate(r));
    }
  }
  policy.finish?.(now);
  return { policy: policy.name, rho: path.rho, responseMs, status, choice, arrivals: A, perInstance, errors, finished, responded, virtualMs: now, wallMs: performance.now() - wall0 };
}

// ---------------------------------------------------------------- statistics

export function quantile(sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return NaN;
  // nearest-rank on the sorted sample (no interpolation)
  const k = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[k];
}

export interface Summary {
  n: number;
  meanMs: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  p999Ms: number;
  maxMs: number;
}

export function summarize(rt: Float64Array): Summary {
  const s = Float64Array.from(rt).sort();
  let sum = 0;
  for (const v of s) sum += v;
  return { n: s.length, meanMs: sum / s.length, p50Ms: quantile(s, 0.5), p90Ms: quantile(s, 0.9), p99Ms: quantile(s, 0.99), p999Ms: quantile(s, 0.999), maxMs: s[s.length - 1] };
}
