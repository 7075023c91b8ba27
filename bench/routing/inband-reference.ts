// Reference policies that learn in-band, from this proxy's own responses, implemented as their
// owners define them (issue 9 §4). They are client-side balancers, deployable, unlike the oracle.
//
// * Peak EWMA -- Finagle `com.twitter.finagle.loadbalancer.PeakEwma` (finagle-core, PeakEwma.scala,
//   Metric.observe/get) and tower's `load::peak_ewma` as linkerd2-proxy uses it
//   (linkerd/app/outbound: EWMA_DEFAULT_RTT = 30 ms, EWMA_DECAY = 10 s; Finagle's decayTime
//   default is 10 s too). Per endpoint: `cost`, an EWMA of round-trip times that jumps to any
//   RTT above it (peak-sensitive) and otherwise moves toward the new RTT with weight
//   1 - exp(-Δt/τ), Δt = time since the previous update; reading the load first decays `cost`
//   toward 0 with the elapsed time (an observation of 0), so an endpoint nobody uses becomes cheap
//   again. load = cost × (pending + 1); Finagle's penalty (2^47 + pending) when there is no
//   history but requests are pending; linkerd starts `cost` at the default RTT instead (used here:
//   30 ms). P2C: two distinct endpoints drawn uniformly, the lower load wins (ties: the first).
//   The RTT is measured from the request to its response headers, and `pending` falls at the
//   response headers: tower's CompleteOnResponse / linkerd's PendingUntilFirstData (streaming
//   inference: the first token). Error answers are RTT observations like any other (both
//   record on failure), which is what makes a fast-failing endpoint look cheap.
// * Envoy LEAST_REQUEST -- des.ts `LeastRequest` (unweightedHostPick, choice_count 2).
// * Envoy client-side weighted round robin (envoy.load_balancing_policies.
//   client_side_weighted_round_robin, source/extensions/load_balancing_policies/
//   client_side_weighted_round_robin/client_side_weighted_round_robin_lb.cc + .h; gRFC A58):
//   every ORCA per-request report sets the endpoint's weight = qps / utilization, with
//   utilization = application_utilization if > 0, else (no metric_names_for_computing_utilization
//   configured) cpu_utilization, plus error_utilization_penalty × eps / qps; reports with qps <= 0
//   or utilization <= 0 are ignored. Every weight_update_period (1 s) the main thread applies the
//   weights: a weight is valid once the endpoint has reported for blackout_period (10 s, counted
//   from its first report) and if its last report is younger than weight_expiration_period
//   (180 s; an expired one restarts the blackout); endpoints without a valid weight get the
//   median of the valid weights (upper median, nth_element at size/2), or 1 if none. Host weights
//   are at least 1 (HostImpl::weight). Picking is Envoy's RoundRobinLoadBalancer: plain RR while
//   all weights are equal, earliest-deadline-first by weight otherwise (rebuilt when weights change). error_utilization_penalty:
//   the API documents 1.0 as its default (used here); the .cc reads the wrapper's value(), 0
//   when unset -- configure it explicitly in a real Envoy.
import { mulberry32, type Rng } from '../../sim/inference/prng';
import type { Answer, EngineCtx, RoutingPolicy } from './des';

// ---------------------------------------------------------------- ORCA TEXT

export interface OrcaReport {
  cpu_utilization?: number;
  application_utilization?: number;
  mem_utilization?: number;
  rps_fractional?: number;
  eps?: number;
  named_metrics: Record<string, number>;
}

const ORCA_FIELDS = new Set(['cpu_utilization', 'application_utilization', 'mem_utilization', 'rps_fractional', 'eps']);

/**
 * The TEXT form of Envoy's `endpoint-load-metrics` response header:
 * `TEXT key=value,key=value,named_metrics.NAME=value` (whitespace around entries ignored).
 * Bad input throws naming the entry.
 */
export function parseOrcaText(header: string): OrcaReport {
  const m = /^TEXT\s+(.*)$/s.exec(header.trim());
  if (!m) throw new Error(`endpoint-load-metrics: expected the TEXT format, got ${JSON.stringify(header.slice(0, 40))}`);
  const out: OrcaReport = { named_metrics: {} };
  for (const raw of m[1].split(',')) {
    const e = raw.trim();
    if (!e) continue;
    const eq = e.indexOf('=');
    if (eq <= 0) throw new Error(`endpoint-load-metrics: entry ${JSON.stringify(e)} is not key=value`);
    const key = e.slice(0, eq).trim();
    const v = Number(e.slice(eq + 1).trim());
    if (!Number.isFinite(v)) throw new Error(`endpoint-load-metrics: ${key} is not a finite number`);
    if (key.startsWith('named_metrics.') && key.length > 'named_metrics.'.length) out.named_metrics[key.slice('named_metrics.'.length)] = v;
    else if (ORCA_FIELDS.has(key)) (out as unknown as Record<string, number>)[key] = v;
    else throw new Error(`endpoint-load-metrics: unknown field ${key}`);
  }
  return out;
}

// ---------------------------------------------------------------- Peak EWMA

export interface PeakEwmaSpec {
  /** τ of the decay (ms): linkerd EWMA_DECAY / Finagle decayTime, 10 s */
  decayMs: number;
  /** initial cost of an endpoint without history (ms): linkerd EWMA_DEFAULT_RTT, 30 ms */
  defaultRttMs: number;
}

export const LINKERD_PEAK_EWMA: PeakEwmaSpec = { decayMs: 10_000, defaultRttMs: 30 };

/** Finagle's penalty for an endpoint with pending requests and no latency history (Long.MaxValue >> 16). */
const PENALTY = 2 ** 47;

/** One endpoint's peak-EWMA state (Finagle PeakEwma.Metric). */
export class PeakEwmaMetric {
  cost: number;
  pending = 0;
  private stamp: number;
  constructor(private readonly tauMs: number, initialCostMs: number, now: number) {
    this.cost = initialCostMs;
    this.stamp = now;
  }
  observe(now: number, rttMs: number): void {
    const td = Math.max(now - this.stamp, 0);
    const w = Math.exp(-td / this.tauMs);
    if (rttMs > this.cost) this.cost = rttMs;
    else this.cost = this.cost * w + rttMs * (1 - w);
    this.stamp = now;
  }
  load(now: number): number {
    this.observe(now, 0);
    if (this.cost === 0 && this.pending !== 0) return PENALTY + this.pending;
    return this.cost * (this.pending + 1);
  }
}

export class PeakEwma implements RoutingPolicy {
  readonly name: string;
  metrics: PeakEwmaMetric[] = [];
  private rng: Rng;
  private sentAt = new Map<number, number>();
  constructor(seed: number, private readonly spec: PeakEwmaSpec = LINKERD_PEAK_EWMA, name = 'peak-ewma') {
    this.rng = mulberry32(seed ^ 0xe3a);
    this.name = name;
  }
  init(ctx: EngineCtx): void {
    this.metrics = ctx.addrs.map(() => new PeakEwmaMetric(this.spec.decayMs, this.spec.defaultRttMs, ctx.now()));
  }
  route(t: number, id: number): number {
    const n = this.metrics.length;
    let a = 0;
    if (n > 1) {
      // two distinct endpoints, uniformly (tower's sample_floyd2, Finagle's P2C)
      a = Math.floor(this.rng() * n) % n;
      let b = Math.floor(this.rng() * (n - 1)) % (n - 1);
      if (b >= a) b++;
      if (this.metrics[b].load(t) < this.metrics[a].load(t)) a = b;
    }
    this.metrics[a].pending++;
    this.sentAt.set(id, t);
    return a;
  }
  respond(t: number, id: number, inst: number): void {
    const t0 = this.sentAt.get(id);
    if (t0 === undefined) return;
    this.sentAt.delete(id);
    const m = this.metrics[inst];
    m.pending--;
    m.observe(t, t - t0);
  }
}

// ---------------------------------------------------------------- Envoy client-side WRR

export interface WrrSpec {
  blackoutPeriodMs: number;
  weightExpirationPeriodMs: number;
  weightUpdatePeriodMs: number;
  errorUtilizationPenalty: number;
}

/** Envoy's defaults (ClientSideWeightedRoundRobinLbConfig; penalty: the documented 1.0). */
export const ENVOY_WRR_DEFAULTS: WrrSpec = { blackoutPeriodMs: 10_000, weightExpirationPeriodMs: 180_000, weightUpdatePeriodMs: 1000, errorUtilizationPenalty: 1.0 };

/** calculateWeightFromOrcaReport: undefined where Envoy returns an error status (report ignored). */
export function wrrWeight(r: OrcaReport, penalty: number): number | undefined {
  const qps = r.rps_fractional ?? 0;
  if (!(qps > 0)) return undefined;
  let u = r.application_utilization ?? 0;
  if (!(u > 0)) u = r.cpu_utilization ?? 0;
  u += (penalty * (r.eps ?? 0)) / qps;
  if (!(u > 0)) return undefined;
  return Math.min(qps / u, 0xffffffff);
}

interface WrrHost {
  weight: number;
  nonEmptySince: number;
  lastUpdate: number;
}

export class ClientSideWrr implements RoutingPolicy {
  readonly name: string;
  hosts: WrrHost[] = [];
  /** weights in use by the picker (updated every weightUpdatePeriod) */
  applied: number[] = [];
  /** reports received / ignored (qps or utilization not positive) */
  reports = 0;
  ignored = 0;
  private ctx!: EngineCtx;
  private rr = 0;
  private deadline: number[] = [];
  private edfNow = 0;
  private readonly picks: number;
  constructor(seed: number, readonly spec: WrrSpec = ENVOY_WRR_DEFAULTS, name = 'envoy-wrr (ORCA)') {
    this.name = name;
    this.picks = Math.floor(mulberry32(seed ^ 0x3d7)() * 0xffffffff) % 429496729;
  }
  init(ctx: EngineCtx): void {
    this.ctx = ctx;
    this.hosts = ctx.addrs.map(() => ({ weight: 1, nonEmptySince: Infinity, lastUpdate: -Infinity }));
    this.applied = ctx.addrs.map(() => 1);
    this.rebuild();
    const tick = (): void => {
      this.updateWeights(ctx.now());
      ctx.at(ctx.now() + this.spec.weightUpdatePeriodMs, tick);
    };
    ctx.at(ctx.now() + this.spec.weightUpdatePeriodMs, tick);
  }
  /** updateWeightsOnHosts */
  updateWeights(now: number): void {
    const maxNonEmptySince = now - this.spec.blackoutPeriodMs;
    const minLastUpdate = now - this.spec.weightExpirationPeriodMs;
    const valid: number[] = [];
    const w: Array<number | undefined> = this.hosts.map((h) => {
      if (maxNonEmptySince < h.nonEmptySince) return undefined;
      if (h.lastUpdate < minLastUpdate) {
        h.nonEmptySince = Infinity;
        return undefined;
      }
      valid.push(h.weight);
      return h.weight;
    });
    let def = 1;
    if (valid.length) def = [...valid].sort((a, b) => a - b)[Math.floor(valid.length / 2)];
    const next = w.map((x) => Math.max(1, x ?? def));
    if (next.every((x, i) => x === this.applied[i])) return;
    this.applied = next;
    this.rebuild();
  }
  /**
   * A new EDF schedule, as RoundRobinLoadBalancer builds it when host weights change:
   * EdfScheduler::createWithPicks(hosts, weight, seed_) = the state after `seed_` picks from a
   * fresh start (seed_ drawn once per LB; % 429496729). After P picks the virtual time is
   * T = P / Σw and host i's next deadline is (floor(T·w_i) + 1) / w_i -- computed directly. It
   * matters: starting every rebuild from zero would starve a weight-1 host for good when weights
   * change every second.
   */
  private rebuild(): void {
    const W = this.applied.reduce((a, b) => a + b, 0);
    const T = this.picks / W;
    this.edfNow = T;
    this.deadline = this.applied.map((w) => (Math.floor(T * w) + 1) / w);
  }
  onReport(now: number, inst: number, header: string): void {
    this.reports++;
    const wt = wrrWeight(parseOrcaText(header), this.spec.errorUtilizationPenalty);
    if (wt === undefined) {
      this.ignored++;
      return;
    }
    const h = this.hosts[inst];
    h.weight = Math.floor(wt);
    h.lastUpdate = now;
    if (h.nonEmptySince === Infinity) h.nonEmptySince = now;
  }
  route(): number {
    const n = this.applied.length;
    if (this.applied.every((w) => w === this.applied[0])) return this.rr++ % n;
    let best = 0;
    for (let j = 1; j < n; j++) if (this.deadline[j] < this.deadline[best]) best = j;
    this.edfNow = this.deadline[best];
    this.deadline[best] = this.edfNow + 1 / this.applied[best];
    return best;
  }
  respond(t: number, _id: number, inst: number, a: Answer): void {
    if (a.orca === undefined) throw new Error(`${this.name} needs ORCA reports: run with RunOptions.orca`);
    this.onReport(t, inst, a.orca);
  }
}
