// The request-aware scoring pass (request-aware services, once the body is read): the stale and
// static filters as in score.ts, the model filter, and one price in ms built on the request's own
// size (docs/inference-llm.md, "One price in ms"). Where the snapshot has an LLM section:
//   cost_i = rest_i + (P_i + modelCost_i)/weight_i + O·d(b_i)/weight_i + max(0, b_i + 1 − cap_i)·E[S]_i/cap_i/weight_i
//            + (q_i + own_i·(n_i + r_i))/weight_i   (q_i = max(0, ahead_i − shared_i): the wait; own_i·(n_i + r_i): the
//              delay its prefill adds to the n_i requests ahead, counted one by one by PendingPrefill.requestsIn, and to
//              the r_i expected to arrive behind it over its time to first token (q_i + own_i), at the rate of this VM's
//              sends within one whole prefill, in the share of the prefill it sent to i, this request's included
//              (recent-sends.ts arrivalsAt); for a prompt held nowhere while this VM's sends within one
//              prefill are at least the prefixes it started, in the share of those prefixes instead
//              (scorer-holds.ts))
//   P_i = uncached prompt tokens × the pool's prefill ms/token (plan-llm.ts poolTerms; none measured:
//         request.fallbackPrefillMsPerToken), d(b) = the pool's decode line idle + perSeq·(1 + b)
//         (no line: the occupancy rule on the pool's time per token, occupancy 1 while slots is only a
//         floor; none measured: 0 for all),
//   cap_i = a known capacity (slots while the server queued, or the KV cache's kvSeqs), unknown: no slot wait,
//   ahead_i = the prefill this proxy (every worker VM) sent to i and not done yet (lib/pending-prefill.ts),
//         plus the other proxies' sends to i within the last P·a ms (mesh in-flight counts,
//         Inflight.meshRecent), each this request's uncached prefill there; unknown counts: none,
//   shared_i = the part of it that computes the request's own leading blocks (lib/shared-prefill.ts)
// and the chosen instance's pending prefill grows by P_i (RequestCost.charge). No LLM section
// (a request-aware service that is no LLM): the body-blind form with the request's service time
// (scorer-size.ts): cost_i = rest_i + (S_i(request) + modelCost_i)/weight_i + b_i·E[S]_i/c_i/weight_i
// It also gives each candidate's pressure for shedding (lib/choose-request.ts judges it where the
// request would go): where the agent publishes the instance's KV capacity (kvSeqs), the backlog
// as a share of it; else the backlog per slot (0 while slots is only a floor: capacity unknown),
// a KV cache near full counting 1 and a full one 2;
// and the pool's: the summed backlog over the summed KV capacity of the eligible candidates.
import { Plan, Scan } from "./plan";
import { LlmPlan } from "./plan-llm";
import { anyStale, leftOutAt } from "./filter-stale";
import { modelCostMs } from "./filter-model";
import { serviceMs } from "./scorer-size";
import { cachedTokens } from "./scorer-prefix";
import { ptr, f64At, setF64At, i32At } from "./flat";
import { PendingPrefill } from "../pending-prefill";
import { ShedAt, loadAt } from "../criticality";
import { OverloadShares, growthEvidence } from "../overload";
import { AdapterStreams, streamedCostMs, mayHaveDrained } from "./adapter-streams";
import { Inflight } from "../inflight";
import { RecentSends, arrivalsAt } from "../recent-sends";
import { PrefixHolds, shareByHolds } from "./scorer-holds";

/** The request's side of the cost, filled per request (reused: nothing allocated per request). */
export class RequestCost {
  /** Model column in the LlmPlan, -1: no restriction. */
  modelCol: i32 = -1;
  promptTokens: f64 = 0;
  outTokens: f64 = 0;
  /** Per candidate: leading prompt blocks it was sent (PrefixIndex). */
  cachedBlocks: StaticArray<i32> = new StaticArray<i32>(0);
  /** Result: the least eligible pressure (+Inf: none eligible). */
  pressure: f64 = Infinity;
  /** Result: the least eligible pressure as a multiple of its sheddable threshold (+Inf: none eligible). */
  poolShedLoad: f64 = Infinity;
  /** Result: the eligible candidates' backlog as a share of their summed KV capacity, over those whose capacity is known (NaN: none). */
  poolPressure: f64 = NaN;
  /** Result: eligible candidates whose server reports a growing queue (snapshot flag queueGrowing; lib/overload.ts). */
  growing: i32 = 0;
  /** Result: whether they are evidence of sustained excess for the request's pool (lib/overload.ts growthEvidence). */
  evidence: bool = false;
  /** Per model pool: the overload state and the share of its non-critical requests shed lately (kept across requests). */
  overload: OverloadShares = new OverloadShares();
  /** Result: the eligible candidate with the longest remembered prefix (-1: none). */
  affinity: i32 = -1;
  /** Result: candidates the model filter left out. */
  modelExcluded: i32 = 0;
  /** Scratch, per candidate: its pressure (backlog per KV capacity; else per slot, a KV cache near full counting 1, full 2). */
  pressureOf: StaticArray<f64> = new StaticArray<f64>(0);
  /** Scratch, per candidate: its pressure as a multiple of its sheddable / standard threshold (criticality.ts loadAt). */
  shedLoadOf: StaticArray<f64> = new StaticArray<f64>(0);
  stdLoadOf: StaticArray<f64> = new StaticArray<f64>(0);
  /** Scratch, per candidate: 1 when the request's adapter waits there for a running adapter to drain (filter-model.ts, adapter-streams.ts), else 0. */
  drainOf: StaticArray<u8> = new StaticArray<u8>(0);
  /** Scratch, per candidate: 1 when the request's adapter streams from it (adapter-streams.ts), else 0. */
  runOf: StaticArray<u8> = new StaticArray<u8>(0);
  /** The adapters this proxy sees streaming from each instance (kept across requests; plugin/stream.ts feeds it). */
  streams: AdapterStreams = new AdapterStreams();
  /** Scratch, per candidate: the request's prefill there (ms, its uncached tokens; 0 where the per-token terms are unknown). */
  prefillMs: StaticArray<f64> = new StaticArray<f64>(0);
  /** Scratch, per candidate, what the critical picker adds (picker-calm.ts; ms, de-weighted): its own measured prefill rate's difference from the pool's on the request's uncached tokens (0 where unknown), and a load where the request's adapter may have drained (adapter-streams.ts mayHaveDrained). */
  speedOf: StaticArray<f64> = new StaticArray<f64>(0);
  /** The prompt's chain hashes (lib/request/prefix.ts hashPromptBlocks), `nh` of them: which blocks a pending prefill shares (shared-prefill.ts). */
  hashes: StaticArray<u64> = new StaticArray<u64>(0);
  nh: i32 = 0;
  /** Scratch, per candidate: the part of its price the band leaves alone (ms, de-weighted: its decode, and the prefill this VM sent ahead with the delay it adds): the band is a share of the rest (picker-band.ts). */
  decodeOf: StaticArray<f64> = new StaticArray<f64>(0);
  /** Scratch, per candidate: prefill ms per prompt block there (0: per-token terms unknown). */
  blockMsOf: StaticArray<f64> = new StaticArray<f64>(0);
  /** Scratch, per candidate: the pending prefill there the request shares, left out of its wait (ms). */
  sharedOf: StaticArray<f64> = new StaticArray<f64>(0);
  /** This proxy's in-flight table, for the other proxies' recent sends (Inflight.meshRecent; null: none, the price without them). */
  mesh: Inflight | null = null;
  /** Scratch, per candidate: the other proxies' sends within the request's prefill time, priced as prefill ahead (ms). */
  meshOf: StaticArray<f64> = new StaticArray<f64>(0);
  /** This VM's sends to the service lately (recent-sends.ts): the arrivals behind a prefill. */
  recent: RecentSends = new RecentSends();
  /** This VM's prompts started and hits sent (scorer-holds.ts): the hits still to come per prefix held. */
  holds: PrefixHolds = new PrefixHolds();
  /** Set by the scoring pass: no candidate holds any of the prompt's blocks (a miss everywhere). */
  heldNowhere: bool = false;
  /** A request was sent to candidate i (slot `slot`) at `nowMs`: its prefill (and adapter load) queues behind what this proxy sent there before. */
  charge(pending: PendingPrefill, i: i32, slot: i32, nowMs: f64, extraMs: f64): void {
    if (i < 0 || i >= this.prefillMs.length) return;
    const add = unchecked(this.prefillMs[i]);
    const ms = (add > 0 ? add : 0) + (extraMs > 0 && extraMs < Infinity ? extraMs : 0);
    this.recent.record(nowMs);
    // the candidate's cached blocks are known when the prompt was hashed and it was scored
    const blocks = this.nh > 0 && i < this.cachedBlocks.length;
    if (this.nh > 0 && this.heldNowhere) { pending.started(slot); this.holds.starts += 1; }
    else if (blocks && unchecked(this.cachedBlocks[i]) > 0) this.holds.hits += 1;
    if (blocks) pending.chargeBlocks(slot, nowMs, ms, this.hashes, this.nh, unchecked(this.cachedBlocks[i]), unchecked(this.blockMsOf[i]));
    else pending.charge(slot, nowMs, ms);
  }
}

export class CostParams {
  bytesPerToken: f64 = 4;
  blockBytes: i32 = 64;
  fallbackPrefillMs: f64 = 0.1;
  adapterLoadMs: f64 = 200;
  kvFull: f64 = 0.95;
  /** request.decodeIdleShare: the decode time per token paid in an idle batch, as a share of the learned one */
  decodeIdleShare: f64 = 0;
  /** request.shedding */
  shed: ShedAt = new ShedAt();
}

export function scoreRequest(plan: Plan, lp: LlmPlan, inflightP: usize, pending: PendingPrefill, nowMs: f64, rc: RequestCost, cp: CostParams): Scan {
  const n = plan.n;
  const checkStale = anyStale(plan, nowMs);
  const skipP = ptr(plan.skip), slotP = ptr(plan.slot), staleP = ptr(plan.staleAtMs), qP = ptr(plan.qAdj);
  const pwP = ptr(plan.pw), satP = ptr(plan.satAt), costP = ptr(plan.cost), slotsP = ptr(plan.slots);
  const skippedP = ptr(plan.skipped);
  const col = lp.hasData ? rc.modelCol : -1;
  let best = Infinity;
  let eligible = 0;
  let saturated = 0;
  let pressure = Infinity;
  let poolShed = Infinity;
  const th = cp.shed;
  let excluded = 0;
  let affinity = -1;
  let affinityBlocks = 0;
  let poolBacklog: f64 = 0, poolSeqs: f64 = 0;
  let growing = 0;
  if (rc.prefillMs.length < n) {
    rc.prefillMs = new StaticArray<f64>(n); rc.pressureOf = new StaticArray<f64>(n);
    rc.shedLoadOf = new StaticArray<f64>(n); rc.stdLoadOf = new StaticArray<f64>(n);
    rc.drainOf = new StaticArray<u8>(n); rc.runOf = new StaticArray<u8>(n);
    rc.blockMsOf = new StaticArray<f64>(n); rc.sharedOf = new StaticArray<f64>(n);
    rc.decodeOf = new StaticArray<f64>(n); rc.meshOf = new StaticArray<f64>(n);
    rc.speedOf = new StaticArray<f64>(n);
  }
  const mesh = rc.mesh;
  // the arrivals behind a prefill (recent-sends.ts): this VM's sends within one whole prefill of
  // the request (the window is the pool's, the same for every candidate: counted once, at the
  // first candidate priced), shared out as the prefill this VM has sent to each candidate
  let sends: i32 = -1, sentAll: f64 = 0, startsAll: f64 = 0;
  let nowhere = true;
  for (let k = 0; k < n; k++) {
    const sk = i32At(slotP, k);
    sentAll += pending.sentMs(sk);
    startsAll += pending.startsAt(sk);
    if (k < rc.cachedBlocks.length && unchecked(rc.cachedBlocks[k]) > 0) nowhere = false;
  }
  rc.heldNowhere = nowhere;
  let byHolds = false;
  for (let i = 0; i < n; i++) {
    if (leftOutAt(skipP, staleP, skippedP, costP, checkStale, nowMs, i)) continue;
    const slot = i32At(slotP, i);
    let extra = modelCostMs(lp, col, i, cp.adapterLoadMs);
    if (extra == Infinity) { setF64At(costP, i, Infinity); excluded++; continue; }
    extra = streamedCostMs(lp, rc.streams, col, i, slot, extra, cp.adapterLoadMs, rc.runOf);
    unchecked(rc.drainOf[i] = extra > cp.adapterLoadMs ? 1 : 0);
    const doubt = mayHaveDrained(lp, rc.streams, col, i, slot, extra, rc.runOf);
    const kv = unchecked(lp.kv[i]);
    const blocks = unchecked(rc.cachedBlocks[i]);
    if (blocks > affinityBlocks) { affinityBlocks = blocks; affinity = i; }
    const cached = cachedTokens(blocks, cp.blockBytes, cp.bytesPerToken, kv, cp.kvFull);
    // the pool's per-token terms (plan-llm.ts poolTerms): NaN means no candidate measured it
    const pfRaw = unchecked(lp.prefillMs[i]), dcRaw = unchecked(lp.decodeMs[i]);
    let b = f64At(qP, i) + <f64>i32At(inflightP, slot);
    if (b < 0) b = 0;
    const slots = f64At(slotsP, i);
    const inv = unchecked(lp.inv[i]);
    let c: f64;
    if (lp.hasData) {
      // One price in ms (docs/inference-llm.md, "One price in ms"): the request's expected time to
      // first token there — the wait for the prefill this proxy sent ahead (less what the request
      // shares of it), the wait for a batch slot beyond a known capacity, its own uncached prefill —
      // plus its decode on the batch it joins. A prefill rate none measured is the documented
      // default (request.fallbackPrefillMsPerToken), never 0: a cold fleet is priced in the same
      // form and unit, so the pending prefill is a wait from the first request on.
      const pf = pfRaw == pfRaw ? pfRaw : cp.fallbackPrefillMs;
      const uncached = rc.promptTokens - (cached < rc.promptTokens ? cached : rc.promptTokens);
      const own = uncached * pf;
      unchecked(rc.prefillMs[i] = own);
      const pfOwn = unchecked(lp.prefillOwn[i]);
      unchecked(rc.speedOf[i] = (pfRaw == pfRaw && pfOwn == pfOwn ? uncached * (pfOwn - pf) * inv : 0)
        + (doubt ? cp.adapterLoadMs * inv : 0));
      // Decode on the pool's line (ms per token = idle + perSeq · batch, from the servers' inter-
      // token latency against their running count: docs/inference-llm.md, "Decode against the
      // batch"), on the batch the request joins; no line yet: the occupancy rule on the pool's time
      // per token; no time per token measured anywhere: left out for every candidate. The
      // occupancy is read against the server's capacity only where that is known (it queued): a
      // floor (the largest batch seen, flags bit 5) is no capacity, and a worker that happened to
      // run more requests earlier would look less occupied and take a request with a prefill
      // queued while others have none. There the occupancy is unknown and counts as full — the
      // same for every such candidate, never cheaper than a known one — so the decision falls to
      // the prefill and the queue, which are measured (docs/contracts.md, flags bit 5).
      const idle = unchecked(lp.decodeIdle[i]);
      let perToken: f64 = 0;
      if (idle == idle) perToken = idle + unchecked(lp.decodePerSeq[i]) * (1 + b);
      else if (dcRaw == dcRaw) {
        const occupancy = unchecked(plan.slotsFloor[i]) != 0 ? 1.0 : (1 + (b < slots ? b : slots)) / (1 + slots);
        const share = cp.decodeIdleShare;
        perToken = dcRaw * (share + (1 - share) * occupancy);
      }
      const blockMs = <f64>cp.blockBytes / cp.bytesPerToken * pf;
      unchecked(rc.blockMsOf[i] = blockMs);
      // the pending prefill of the very blocks this request starts with is shared work, not a
      // wait ahead of it (shared-prefill.ts); counted only where those blocks count as cached in
      // full (no KV-pressure discount), so the two never both make the instance cheaper
      const shared = blocks > 0 && cached >= <f64>blocks * <f64>cp.blockBytes / cp.bytesPerToken
        ? pending.sharedMs(slot, nowMs, rc.hashes, rc.nh, blocks) : 0;
      unchecked(rc.sharedOf[i] = shared);
      const ahead = pending.aheadMs(slot, nowMs) - shared;
      const whole = rc.promptTokens * pf;
      // The wait for a batch slot: the requests beyond the instance's capacity, each E[S]/capacity
      // (one of the running ones finishes that often). Capacity known = slots the server showed
      // while it queued, or the KV cache's (kvSeqs) where that is larger; slots only a floor and no
      // KV capacity: unknown, and no slot wait is priced (the server has never queued: learn, not
      // guess a queue from the largest batch seen so far — docs/contracts.md, flags bit 5).
      const kvCap = unchecked(lp.kvSeqs[i]);
      let cap: f64 = unchecked(plan.slotsFloor[i]) == 0 ? slots : NaN;
      if (kvCap == kvCap && (cap != cap || kvCap > cap) && kvCap >= slots) cap = kvCap;
      const over = cap == cap && cap >= 1 ? b + 1 - cap : 0;
      const slotWait = over > 0 ? over * unchecked(lp.esMs[i]) / cap : 0;
      const decode = rc.outTokens * perToken * inv;
      unchecked(rc.decodeOf[i] = decode);
      // The delay its own prefill adds to the requests that queue behind it there: at a steady
      // queue as many arrive behind it during its wait as are ahead of it now, each delayed by its
      // uncached prefill — and the engine computes the requests waiting there in one step with
      // whatever joins them, so each of those waits for it too. The requests ahead are counted,
      // not sized as this one: this VM's part one by one, back from the queue's end (pending-
      // prefill.ts requestsIn: a group's first request then three of its hits are 3.4 requests
      // while the first is computing, where ms ÷ the busy period's mean charge said 0.9 and ms ÷
      // a whole prompt's prefill a tenth), the other VMs' part in prefills of this request's size.
      // A miss where hits are queued costs the fleet its prefix again (205 ms of a 2,271-token
      // prompt) for every one of them; a hit, its suffix.
      // The other proxies' prefill there is not known in ms, only their in-flight counts (mesh
      // in-flight; the backlog b holds them, but b is priced only beyond a known capacity and on
      // the decode line's slope, which the published fleet never reaches and measures as 0): the
      // requests they sent within the last `whole` ms (this prompt's whole prefill) are taken to be
      // prefilling still, each as this request's own uncached prefill there -- at the holder of its
      // prefix likely hits of it, elsewhere misses. Priced as `whole` each they cost ~10 points of
      // hit rate (docs/benchmarks/mesh-llm-r8b.md, tried). Unknown counts: 0, today's price.
      const meshMs = mesh != null && whole > 0 ? <f64>mesh.meshRecent(slot, nowMs, whole) * own : 0;
      unchecked(rc.meshOf[i] = meshMs);
      const queued = (ahead > 0 ? ahead : 0) + meshMs;
      let mine = pending.ownAheadMs(slot, nowMs) - shared;
      if (mine > queued) mine = queued;
      if (mine < 0) mine = 0;
      // ... and the requests that arrive there behind it while it waits and computes, measured:
      // this VM's sends to the service within one whole prefill are the rate, in the share of the
      // prefill this VM has sent to i (this request's own included: a miss makes i hold the
      // prompt, and its hits follow it there), over its time to first token there (queued + own):
      // recent-sends.ts arrivalsAt. The count ahead stood for them (a steady queue); where the
      // queue grows — an idle worker as a burst arrives — nothing is ahead while many arrive, and a
      // miss sent there (a group's prefix computed a second time) looked free of delay; where two
      // workers have nothing queued, the one this VM made hold more prompts gets more of what
      // follows (docs/benchmarks/llm-r9b.md).
      if (sends < 0) {
        sends = rc.recent.within(nowMs, whole);
        // a miss everywhere, while every prefix held draws hits within one prefill: the arrivals
        // behind it are shared out in prefixes held (scorer-holds.ts)
        byHolds = shareByHolds(nowhere, rc.nh, rc.holds, sends, startsAll);
      }
      // (a miss everywhere: in the share of the prefixes this VM made i hold, its own included)
      const share = byHolds ? arrivalsAt(sends, pending.startsAt(slot), startsAll, 1, n) : arrivalsAt(sends, pending.sentMs(slot), sentAll, own, n);
      const arriving = share * (whole > 0 ? (queued + own) / whole : 0);
      const behindMine = own * (pending.requestsIn(slot, mine, whole) + arriving);
      const behind = behindMine + (whole > 0 ? own * (queued - mine) / whole : 0);
      c = unchecked(lp.restMs[i]) * inv + (own + extra) * inv + decode + slotWait * inv + (queued + behind) * inv;
      // the part of the price the band leaves alone (picker-band.ts): the decode, and the prefill
      // this VM itself sent ahead with the delay it adds — known here live, and one pool rate
      // scales every candidate's queue alike, so no error of the rate reverses their order
      unchecked(rc.decodeOf[i] = decode + (mine + behindMine) * inv);
    } else {
      unchecked(rc.prefillMs[i] = 0); unchecked(rc.speedOf[i] = 0);
      unchecked(rc.blockMsOf[i] = 0); unchecked(rc.sharedOf[i] = 0); unchecked(rc.decodeOf[i] = 0); unchecked(rc.meshOf[i] = 0);
      const s = serviceMs(rc.promptTokens, cached, rc.outTokens, NaN, NaN, cp.fallbackPrefillMs, unchecked(lp.esMs[i]));
      c = unchecked(lp.restMs[i]) * inv + (s + extra) * inv + b * f64At(pwP, i);
    }
    setF64At(costP, i, c);
    eligible++;
    if (c < best) best = c;
    if (b >= f64At(satP, i)) saturated++;
    // Where the KV capacity is known, the backlog (the snapshot's, corrected by this proxy's live
    // count) as a share of it: vLLM queues when the KV cache is full, whatever the sequence cap,
    // and the live count sees what a 1 s old usage gauge does not. Else backlog per slot, and a
    // KV cache near full is saturation (vLLM queues and preempts there): from kvFull − 0.2 (where
    // prefix credit starts to fade, scorer-prefix.ts) it counts as backlog per slot 1, full as 2.
    // Capacity unknown (no KV capacity and slots only a floor: the server never queued) means
    // learn, not refuse: the backlog per slot is not pressure there, only the server's own KV
    // gauge is (docs/contracts.md, flags bit 5).
    const kvSeqs = unchecked(lp.kvSeqs[i]);
    let pr: f64, shedLoad: f64, stdLoad: f64;
    if (kvSeqs >= 1 && kvSeqs <= 65535) {
      pr = b / kvSeqs;
      poolBacklog += b; poolSeqs += kvSeqs;
      shedLoad = loadAt(pr, th.kvSheddable); stdLoad = loadAt(pr, th.kvStandard);
    } else {
      pr = unchecked(plan.slotsFloor[i]) != 0 ? 0 : b / slots;
      if (kv >= cp.kvFull - 0.2 && pr < 1) pr = 1;
      if (kv >= cp.kvFull && pr < 2) pr = 2;
      shedLoad = loadAt(pr, th.sheddable); stdLoad = loadAt(pr, th.standard);
    }
    if (unchecked(plan.queueGrowing[i]) != 0) growing++;
    unchecked(rc.pressureOf[i] = pr);
    unchecked(rc.shedLoadOf[i] = shedLoad);
    unchecked(rc.stdLoadOf[i] = stdLoad);
    if (pr < pressure) pressure = pr;
    if (shedLoad < poolShed) poolShed = shedLoad;
  }
  rc.pressure = pressure;
  rc.poolShedLoad = poolShed;
  rc.poolPressure = poolSeqs > 0 ? poolBacklog / poolSeqs : NaN;
  rc.growing = growing;
  rc.evidence = growthEvidence(growing, eligible);
  rc.modelExcluded = excluded;
  rc.affinity = affinity;
  const sc = plan.scan;
  sc.eligible = eligible;
  sc.saturated = saturated;
  sc.best = best;
  return sc;
}
