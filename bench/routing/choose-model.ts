// A TypeScript MODEL of the filter's choice (filter/assembly/lib/choose.ts + plugin/loadaware.ts),
// for what-if experiments only: the benchmark's Switchyard figures always come from the compiled
// filter (switchyard.ts). With every switch at 'as-built' this reproduces the filter's
// arithmetic (f32 snapshot values, M/G/1 prior, backlog q + n_now − n_snap at E[S]/c, near-best
// band, skip rules, re-basing n_snap at every snapshot adoption); the switches change one
// ingredient at a time so a suggested filter change can be measured before it is written.
//
// Idealisations vs the filter in the host: one VM (in-flight counts exact, no cross-worker lag)
// and a snapshot is adopted `adoptDelayMs` after its publication (the filter: the long-poll answer
// is delivered at once, other workers read it on their next tick, <= refreshMs).
import type { InstanceRecord } from '../../agent/src/snapshot/codec';
import { mulberry32, type Rng } from '../../sim/inference/prng';
import { AgentModel, type AgentSpec, type Published } from './agent-model';
import { type Answer, type EngineCtx, leastRequestPick, type RoutingPolicy } from './des';
import { START_EPOCH_MS } from './switchyard';

export interface ChooseVariant {
  /**
   * 'as-built': rho·E[S²]/(2(1−rho)) + E[S]  (ms² + ms: the Pollaczek–Khinchine term lacks its 1/E[S])
   * 'pk':       rho·E[S²]/(2·E[S]·(1−rho)) + E[S]   (M/G/1 sojourn time in ms)
   * 'pk-c':     rho·E[S²]/(2·c·E[S]·(1−rho)) + E[S] (M/G/1 with a c-times faster server: the
   *             usual heavy-traffic stand-in for M/G/c; c = slots)
   * 'none':     E[S]                                (no queueing prior; the backlog term alone)
   */
  prior: 'as-built' | 'pk' | 'pk-c' | 'none';
  /**
   * 'adoption' (as built): n_snap = our in-flight count when the snapshot is adopted -- also on
   *   re-publications that carry the same scrape (the agent publishes every 250 ms);
   * 'new-data': n_snap re-based only when the instance's scrape time (generatedAt − dataAgeMs) changed;
   * 'scrape':   n_snap = our in-flight count AT the scrape time (from a short per-instance history).
   */
  rebase: 'adoption' | 'new-data' | 'scrape';
  /** false: backlog = q only (no in-flight feedback between snapshots) */
  feedback: boolean;
  /**
   * 'all' (as built): every request in the instance costs E[S]/c;
   * 'excess': only the ones beyond the free slots, max(0, backlog − c + 1)·E[S]/c.
   */
  backlog: 'all' | 'excess';
  /**
   * 'infinite' (as built, mg1WaitMs): rho >= 1 gives an infinite cost -- the instance is out until
   *   the next scrape even while it sits idle; 'clamp': the prior uses min(rho, 0.99).
   */
  rhoCap: 'infinite' | 'clamp';
  band: number;
  /**
   * 'band' (as built): uniform among the candidates within (1 + band) of the best cost;
   * 'p2c': two eligible candidates drawn uniformly (with replacement), the cheaper one wins --
   *   Envoy's LEAST_REQUEST sampling with the expected-wait cost as the comparison.
   */
  picker?: 'band' | 'p2c';
  /** p2c only: draw the two candidates with probability proportional to capacity c/E[S] (default: uniform) */
  weighted?: boolean;
  /** skip at rho >= this (f32 compare, as built); > 1 disables the rule (not a valid filter setting) */
  maxUtilization: number;
  /**
   * 'hard' (first build): rho >= maxUtilization is out until the next snapshot;
   * 'soft' (the filter now): saturated = rho >= maxUtilization AND backlog >= slots, per request;
   *   skipped while a non-saturated instance has a free slot; all saturated: none eligible.
   */
  saturation?: 'hard' | 'soft';
  stalenessMs: number;
}

export const AS_BUILT: ChooseVariant = { prior: 'as-built', rebase: 'adoption', feedback: true, backlog: 'all', rhoCap: 'infinite', band: 0.1, maxUtilization: 0.95, stalenessMs: 5000 };

const f32 = Math.fround;
const slotsOf = (r: InstanceRecord): number => (f32(r.slots ?? 1) >= 1 ? f32(r.slots ?? 1) : 1);

interface Cand {
  skip: boolean;
  baseWaitMs: number;
  perItemMs: number;
  slots: number;
  queue: number;
  invWeight: number;
  staleAtMs: number;
  nSnap: number;
  scrapeAt: number;
  hot: boolean;
}

function healthScore(p99: number, baseline: number): number {
  if (!(baseline > 0) || !(p99 > 0)) return 1;
  const limit = 3 * baseline;
  return p99 <= limit ? 1 : limit / p99;
}
function weightFor(score: number): number {
  if (score >= 0.8) return 1;
  if (score >= 0.5) return score;
  return 0;
}

export class ChooseModel implements RoutingPolicy {
  readonly name: string;
  agent!: AgentModel;
  private ctx!: EngineCtx;
  private cands: Cand[] = [];
  private inflight!: Int32Array;
  /** per instance: change points of our in-flight count (t, count), for rebase 'scrape' */
  private hist: Array<{ t: number[]; n: number[] }> = [];
  private rng: Rng;
  private lrRng: Rng;
  private mine = new Uint8Array(0);
  fallback = 0;
  routed = 0;

  constructor(
    readonly v: ChooseVariant,
    private readonly opts: {
      agent: AgentSpec; seed: number; name: string; adoptDelayMs?: number;
      /** an agent shared with other proxies (already attached by its owner) */
      sharedAgent?: AgentModel;
    },
  ) {
    this.name = opts.name;
    this.rng = mulberry32(opts.seed ^ 0xc0ffee);
    this.lrRng = mulberry32(opts.seed ^ 0xfa11);
  }

  init(ctx: EngineCtx): void {
    this.ctx = ctx;
    const n = ctx.addrs.length;
    this.inflight = new Int32Array(n);
    this.hist = ctx.addrs.map(() => ({ t: [0], n: [0] }));
    const shared = this.opts.sharedAgent;
    this.agent = shared ?? new AgentModel(this.opts.agent, ctx.addrs, START_EPOCH_MS, this.opts.seed);
    const delay = this.opts.adoptDelayMs ?? 0;
    this.agent.onPublish((p) => {
      if (delay > 0) ctx.at(p.t + delay, () => this.adopt(p));
      else this.adopt(p);
    });
    if (!shared) this.agent.attach(ctx);
    else if (this.agent.current) this.adopt(this.agent.current);
  }

  private countAt(j: number, t: number): number {
    const h = this.hist[j];
    let lo = 0;
    let hi = h.t.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (h.t[mid] <= t) lo = mid;
      else hi = mid - 1;
    }
    return h.n[lo];
  }

  private note(j: number): void {
    const h = this.hist[j];
    const t = this.ctx.now();
    if (h.t[h.t.length - 1] === t) h.n[h.n.length - 1] = this.inflight[j];
    else {
      h.t.push(t);
      h.n.push(this.inflight[j]);
    }
    if (h.t.length > 4096) {
      // keep ~ the last few seconds
      const cut = h.t.length - 2048;
      h.t.splice(0, cut);
      h.n.splice(0, cut);
    }
  }

  private adopt(p: Published): void {
    const v = this.v;
    const snap = p.snapshot;
    const prev = this.cands;
    this.cands = (snap.instances ?? []).map((r: InstanceRecord, j: number): Cand => {
      const rho = f32(r.rho);
      const es = f32(r.esMs) > 0 ? f32(r.esMs) : 0;
      const es2raw = f32(r.es2Ms2);
      const es2 = es2raw > es * es ? es2raw : es * es;
      let base: number;
      if (v.prior === 'none') base = es;
      else if (!(rho < 1) && v.rhoCap === 'infinite') base = Infinity;
      else {
        const rr = rho > 0 ? Math.min(rho, 0.99) : 0;
        if (v.prior === 'as-built') base = (rr * es2) / (2 * (1 - rr)) + es;
        else if (v.prior === 'pk') base = es > 0 ? (rr * es2) / (2 * es * (1 - rr)) + es : es;
        else if (v.prior === 'pk-c') base = es > 0 ? (rr * es2) / (2 * slotsOf(r) * es * (1 - rr)) + es : es;
        else base = es;
      }
      const slots = f32(r.slots ?? 1) >= 1 ? f32(r.slots ?? 1) : 1;
      const weight = weightFor(healthScore(f32(r.p99Ms), f32(r.baselineP99Ms)));
      const hot = !(rho < f32(v.maxUtilization));
      const skip = !r.healthy || (hot && v.saturation !== 'soft') || weight === 0;
      const scrapeAt = snap.generatedAtMs - r.dataAgeMs - START_EPOCH_MS;
      let nSnap = this.inflight[j];
      if (v.rebase === 'new-data' && prev[j] && prev[j].scrapeAt === scrapeAt) nSnap = prev[j].nSnap;
      else if (v.rebase === 'scrape') nSnap = this.countAt(j, scrapeAt);
      return {
        skip, baseWaitMs: base, perItemMs: es / slots, slots, queue: f32(r.queueDepth) > 0 ? f32(r.queueDepth) : 0,
        invWeight: weight > 0 ? 1 / weight : Infinity, staleAtMs: snap.generatedAtMs + v.stalenessMs - r.dataAgeMs - START_EPOCH_MS, nSnap, scrapeAt, hot,
      };
    });
  }

  route(t: number, id: number): number {
    const v = this.v;
    const n = this.cands.length;
    const cost = new Float64Array(n);
    let best = Infinity;
    let eligible = 0;
    const sat = new Uint8Array(n);
    let nSat = 0;
    let freeNonSat = 0;
    for (let i = 0; i < n; i++) {
      const c = this.cands[i];
      if (c.skip || t >= c.staleAtMs) {
        cost[i] = Infinity;
        continue;
      }
      let backlog = c.queue + (v.feedback ? this.inflight[i] - c.nSnap : 0);
      if (backlog < 0) backlog = 0;
      if (c.hot && backlog >= c.slots) {
        sat[i] = 1;
        nSat++;
      } else if (backlog < c.slots) freeNonSat++;
      if (v.backlog === 'excess') backlog = Math.max(0, backlog - c.slots + 1);
      const w = (c.baseWaitMs + backlog * c.perItemMs) * c.invWeight;
      cost[i] = w;
      eligible++;
      if (w < best) best = w;
    }
    if (nSat > 0 && (nSat === eligible || freeNonSat > 0)) {
      best = Infinity;
      for (let i = 0; i < n; i++) {
        if (sat[i]) cost[i] = Infinity;
        else if (cost[i] < best) best = cost[i];
      }
      eligible -= nSat;
    }
    if (this.mine.length <= id) {
      const m = new Uint8Array(Math.max(1024, id * 2));
      m.set(this.mine);
      this.mine = m;
    }
    if (eligible === 0 || best === Infinity) {
      this.fallback++;
      return leastRequestPick(this.ctx.inSystem, this.lrRng, 2);
    }
    if (v.picker === 'p2c') {
      const el: number[] = [];
      for (let i = 0; i < n; i++) if (cost[i] < Infinity) el.push(i);
      let a: number;
      let b: number;
      if (v.weighted) {
        let tot = 0;
        for (const i of el) tot += 1 / this.cands[i].perItemMs;
        const draw = (): number => {
          let x = this.rng() * tot;
          for (const i of el) {
            x -= 1 / this.cands[i].perItemMs;
            if (x < 0) return i;
          }
          return el[el.length - 1];
        };
        a = draw();
        b = draw();
      } else {
        a = el[Math.floor(this.rng() * el.length) % el.length];
        b = el[Math.floor(this.rng() * el.length) % el.length];
      }
      const j = cost[b] < cost[a] ? b : a;
      this.routed++;
      this.mine[id] = 1;
      this.inflight[j]++;
      this.note(j);
      return j;
    }
    const limit = best * (1 + v.band);
    let inBand = 0;
    for (let i = 0; i < n; i++) if (cost[i] <= limit) inBand++;
    let k = Math.floor(this.rng() * inBand);
    if (k >= inBand) k = inBand - 1;
    let pickI = -1;
    for (let i = 0; i < n; i++) {
      if (cost[i] <= limit) {
        if (k === 0) {
          pickI = i;
          break;
        }
        k--;
      }
    }
    this.routed++;
    this.mine[id] = 1;
    this.inflight[pickI]++;
    this.note(pickI);
    return pickI;
  }

  /** an error answer ends the stream at its headers */
  respond(t: number, id: number, inst: number, a: Answer): void {
    if (a.status >= 300) this.complete(t, id, inst);
  }

  complete(_t: number, id: number, inst: number): void {
    if (this.mine[id]) {
      this.inflight[inst]--;
      this.note(inst);
    }
  }
}

/**
 * Several proxies in front of the same fleet, each with its own in-flight counts (the filter's
 * counts are per Envoy process), fed by one agent: arrivals are spread over the proxies at random,
 * uniformly or by `split` (share of the arrivals per proxy, e.g. one ingress carrying most).
 */
export class MultiProxy implements RoutingPolicy {
  private readonly proxies: RoutingPolicy[] = [];
  private owner = new Int8Array(0);
  private rng: Rng;
  /** the agent model feeding the proxies (undefined: none) */
  agent?: AgentModel;
  constructor(
    readonly name: string,
    private readonly make: (k: number, agent: AgentModel | undefined) => RoutingPolicy,
    private readonly k: number,
    private readonly agentOpts: { spec: AgentSpec; seed: number; meshAgents?: number; exchangeMs?: number; exchange?: 'leader' | 'all' } | undefined,
    seed: number,
    private readonly split?: number[],
  ) {
    this.rng = mulberry32(seed ^ 0x9e0);
    if (split) {
      const sum = split.reduce((a, b) => a + b, 0);
      if (split.length !== k || !split.every((x) => x >= 0) || !(sum > 0)) throw new Error(`split must be ${k} shares >= 0 with a positive sum, got [${split.join(', ')}]`);
      this.split = split.map((x) => x / sum);
    }
  }
  private pickProxy(): number {
    const u = this.rng();
    if (!this.split) return Math.floor(u * this.k) % this.k;
    let acc = 0;
    for (let i = 0; i < this.k; i++) {
      acc += this.split[i];
      if (u < acc) return i;
    }
    return this.k - 1;
  }
  init(ctx: EngineCtx): void {
    let agent: AgentModel | undefined;
    if (this.agentOpts) agent = new AgentModel(this.agentOpts.spec, ctx.addrs, START_EPOCH_MS, this.agentOpts.seed);
    if (agent && this.agentOpts?.meshAgents) agent.setMeshAgents(this.agentOpts.meshAgents, 1, this.agentOpts.exchangeMs, this.agentOpts.exchange);
    this.agent = agent;
    for (let i = 0; i < this.k; i++) {
      const p = this.make(i, agent);
      p.init(ctx);
      this.proxies.push(p);
    }
    if (agent) agent.attach(ctx);
  }
  route(t: number, id: number): number {
    const k = this.pickProxy();
    if (this.owner.length <= id) {
      const o = new Int8Array(Math.max(1024, id * 2));
      o.set(this.owner);
      this.owner = o;
    }
    this.owner[id] = k;
    return this.proxies[k].route(t, id);
  }
  respond(t: number, id: number, inst: number, a: Answer): void {
    this.proxies[this.owner[id]].respond?.(t, id, inst, a);
  }
  complete(t: number, id: number, inst: number): void {
    this.proxies[this.owner[id]].complete?.(t, id, inst);
  }
  advanceTo(t: number): void {
    for (const p of this.proxies) p.advanceTo?.(t);
  }
  finish(t: number): void {
    for (const p of this.proxies) p.finish?.(t);
  }
  /** the proxies, for their statistics */
  get members(): readonly RoutingPolicy[] {
    return this.proxies;
  }
}

/** Envoy LEAST_REQUEST (P2C) on THIS proxy's active requests only (several proxies: each sees its own). */
export class LocalLeastRequest implements RoutingPolicy {
  readonly name = 'least-request(local counts)';
  private counts!: Int32Array;
  private mine = new Uint8Array(0);
  private rng: Rng;
  constructor(seed: number) {
    this.rng = mulberry32(seed ^ 0x1ea57);
  }
  init(ctx: EngineCtx): void {
    this.counts = new Int32Array(ctx.addrs.length);
  }
  route(_t: number, id: number): number {
    const j = leastRequestPick(this.counts, this.rng, 2);
    this.counts[j]++;
    if (this.mine.length <= id) {
      const m = new Uint8Array(Math.max(1024, id * 2));
      m.set(this.mine);
      this.mine = m;
    }
    this.mine[id] = 1;
    return j;
  }
  /** an error answer ends the stream at its headers */
  respond(_t: number, id: number, inst: number, a: Answer): void {
    if (a.status >= 300 && this.mine[id]) this.counts[inst]--;
  }
  complete(_t: number, id: number, inst: number): void {
    if (this.mine[id]) this.counts[inst]--;
  }
}
