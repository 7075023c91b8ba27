// One price in ms from the pool's engine model (docs/inference-llm.md, "One price in ms"; issue
// 20): what the matrix traced, decision by decision, as specs that fail on the build before.
//  - identical workers whose agent estimates differ by the interference of their window (the
//    no-shared-prefix trace: one worker's decode line flat at 29.8 ms, another's 0 + 5.1 per
//    sequence) must not herd requests onto the flattest line while it prefills a queue;
//  - a cold fleet (nothing measured, capacity unknown) keeps a generated-shared-prefix group on the
//    worker prefilling its prefix while that is the shorter time to first token (the pending
//    prefill is priced at the fallback rate, and the span computing the prefix is kept);
//  - the band is a share of the time to first token, not of a price that holds a 7 s decode, and
//    draws among the least prefill in it;
//  - a slot wait is priced only beyond a known capacity;
//  - no decode line yet: the occupancy is read only against a known capacity, a floor's is full
//    for every candidate (the Poisson cold-start trace, request 46).
import { Snapshot, InstanceState } from "../assembly/lib/snapshot";
import { InstanceLlm, MODEL_BASE } from "../assembly/lib/snapshot-llm";
import { PICKER_BAND } from "../assembly/lib/choose";
import { poolTerms, medianKnown, ownBeyondSpread } from "../assembly/lib/choice/plan-llm";
import { RequestCost, CostParams, scoreRequest } from "../assembly/lib/choice/score-request";
import { pickForRequest, RequestPick } from "../assembly/lib/choose-request";
import { CRIT_STANDARD } from "../assembly/lib/criticality";
import { Rng } from "../assembly/lib/inflight";
import { LlmFixture } from "./llm-fixture";

const N = 8;
const NH = 142; // 2,271 tokens at 16 tokens per 64-byte block

function inst(addr: string, q: f32, slots: u16, floor: bool, esMs: f32): InstanceState {
  const s = new InstanceState();
  s.service = "llm"; s.addr = addr; s.healthy = true; s.rho = 0.3; s.esMs = esMs; s.es2Ms2 = 2 * esMs * esMs;
  s.queueDepth = q; s.slots = slots; s.slotsFloor = floor;
  return s;
}

function llm(addr: string, pf: f32, dc: f32, idle: f32, per: f32): InstanceLlm {
  const l = new InstanceLlm();
  l.service = "llm"; l.addr = addr; l.models = ["m"]; l.modelFlags = [MODEL_BASE]; l.maxLoras = 0; l.kvCacheUsage = 0.1;
  l.prefillMsPerToken = pf; l.decodeMsPerToken = dc; l.decodeIdleMs = idle; l.decodeMsPerSeq = per;
  return l;
}

/** The no-shared-prefix snapshot at 37.5 s (seed 1, full mode), as the agent published it: the
 *  same engine everywhere, terms as each worker's window saw them. */
function noisySnap(): Snapshot {
  const s = new Snapshot();
  const q: f32[] = [11, 20, 28, 20, 24, 29, 21, 10];
  const pf: f32[] = [0.275, 0.223, 0.140, 0.165, 0.158, 0.198, 0.123, 0.292];
  const dc: f32[] = [28.1, 34.2, 33.9, 37.3, 31.8, 38.9, 29.8, 28.6];
  const idle: f32[] = [24.8, 34.2, 27.1, 37.3, 31.8, 0, 29.8, 17.5];
  const per: f32[] = [0.16, 0, 0.35, 0, 0, 1.98, 0, 0.48];
  for (let i = 0; i < N; i++) {
    const a = "10.0.0." + (i + 1).toString() + ":80";
    s.instances.push(inst(a, q[i], 40, true, 8000));
    s.llm.push(llm(a, pf[i], dc[i], idle[i], per[i]));
  }
  return s;
}

/** N identical cold workers: nothing measured, one slot as a floor, E[S] the agent's prior. */
function coldSnap(): Snapshot {
  const s = new Snapshot();
  for (let i = 0; i < N; i++) {
    const a = "10.0.0." + (i + 1).toString() + ":80";
    s.instances.push(inst(a, 0, 1, true, 1000));
    s.llm.push(llm(a, NaN, NaN, NaN, NaN));
  }
  return s;
}

/** Warm identical workers (0.1 ms prefill per token, 28 ms per output token, line 10.8 + 0.2 n). */
function warmSnap(q: f32, slots: u16, floor: bool): Snapshot {
  const s = new Snapshot();
  for (let i = 0; i < N; i++) {
    const a = "10.0.0." + (i + 1).toString() + ":80";
    s.instances.push(inst(a, q, slots, floor, 8000));
    s.llm.push(llm(a, 0.1, 28, 10.8, 0.2));
  }
  return s;
}

function hashes(group: u64, question: u64): StaticArray<u64> {
  const h = new StaticArray<u64>(256);
  for (let j = 0; j < NH; j++) h[j] = j < 128 ? (group << 32) | <u64>(j + 1) : (group << 48) | (question << 32) | <u64>(j + 1);
  return h;
}

function request(f: LlmFixture, prompt: f64, h: StaticArray<u64> | null): RequestCost {
  const rc = new RequestCost();
  rc.recent = f.recent;
  rc.modelCol = f.lp.modelColumn("m");
  rc.cachedBlocks = new StaticArray<i32>(N);
  rc.promptTokens = prompt;
  rc.outTokens = 256;
  if (h != null) { rc.hashes = h; rc.nh = NH; }
  return rc;
}

function noShed(): CostParams {
  const cp = new CostParams();
  cp.shed.set(100, 100, 100, 100, Infinity, Infinity, 0.2);
  return cp;
}

/** Sends one request as the filter does: picks, then counts it in flight where it went. */
function send(f: LlmFixture, rc: RequestCost, nowMs: f64, seed: u32): i32 {
  const out = new RequestPick();
  pickForRequest(f.plan, f.lp, f.inflight, f.pending, nowMs, PICKER_BAND, 0.1, new Rng(seed), rc, noShed(), CRIT_STANDARD, out);
  const i = out.pick.index;
  if (i >= 0) f.inflight[i] = f.inflight[i] + 1;
  return i;
}

describe("one price in ms: the pool's engine model", () => {
  it("poolTerms: every entry takes the median of the measured ones; none measured: unchanged", () => {
    const t = new StaticArray<f64>(4);
    t[0] = 0.3; t[1] = NaN; t[2] = 0.1; t[3] = 0.2;
    expect(poolTerms(t)).toBe(1);
    for (let i = 0; i < 4; i++) expect(t[i]).toBeCloseTo(0.2);
    const u = new StaticArray<f64>(2);
    u[0] = NaN; u[1] = NaN;
    expect(poolTerms(u)).toBe(0);
    expect(isNaN(u[0])).toBe(true);
    const e = new StaticArray<f64>(2);
    e[0] = 1; e[1] = 3;
    expect(medianKnown(e)).toBeCloseTo(2);
  });

  it("ownBeyondSpread: an instance's own rate where it stands out of the instances' spread (3 median absolute deviations), else the median", () => {
    // identical workers whose estimates saw different interference: no instance stands out
    const same = new StaticArray<f64>(8);
    const v: f64[] = [0.12, 0.15, 0.17, 0.19, 0.2, 0.22, 0.25, 0.29];
    for (let i = 0; i < 8; i++) same[i] = v[i];
    ownBeyondSpread(same);
    for (let i = 0; i < 8; i++) expect(same[i]).toBeCloseTo(0.195);
    // four 0.08 ms/token, two older ones at 0.128: the older ones by what is beyond the spread
    const mixed = new StaticArray<f64>(7);
    const w: f64[] = [0.08, 0.081, 0.079, 0.08, 0.128, 0.13, NaN];
    for (let i = 0; i < 7; i++) mixed[i] = w[i];
    ownBeyondSpread(mixed);
    // median 0.0805, deviations 0.0005 0.0005 0.0015 0.0005 0.0475 0.0495: MAD 0.001, bound 0.003
    expect(mixed[0]).toBeCloseTo(0.0805);
    expect(mixed[2]).toBeCloseTo(0.0805);
    expect(mixed[4]).toBeCloseTo(0.128 - 0.003);
    expect(mixed[5]).toBeCloseTo(0.13 - 0.003);
    expect(isNaN(mixed[6])).toBe(true);
    const none = new StaticArray<f64>(2);
    none[0] = NaN; none[1] = NaN;
    ownBeyondSpread(none);
    expect(isNaN(none[0])).toBe(true);
  });

  it("the pool's decode line: the median intercept and the least slope (prefill stalls bias every fit up)", () => {
    const f = new LlmFixture(noisySnap());
    // intercepts 0 .. 37.3 ms: median (27.1 + 29.8) / 2; slopes 0 .. 1.98 ms per sequence: the least
    for (let i = 0; i < N; i++) {
      expect(f.lp.decodeIdle[i]).toBeCloseTo(28.45, 1);
      expect(f.lp.decodePerSeq[i]).toBe(0.0);
      expect(f.lp.prefillMs[i]).toBeCloseTo((0.165 + 0.198) / 2, 3);
    }
  });

  it("no shared prefix: unrelated prompts are not herded onto the flattest decode line", () => {
    // 16 unrelated 2,271-token prompts arriving 30 ms apart (no first token yet: all prefilling)
    const f = new LlmFixture(noisySnap());
    const sent = new StaticArray<i32>(N);
    for (let k = 0; k < 16; k++) {
      const i = send(f, request(f, 2271, null), 1000 + 30 * <f64>k, <u32>(k + 1));
      sent[i]++;
    }
    // the same engine everywhere: no worker gets more than 3 of 16 (on the build before, priced
    // with each worker's own terms, 6 of 16 went to one worker)
    for (let i = 0; i < N; i++) expect(sent[i]).toBeLessThanOrEqual(3);
  });

  it("cold burst: a generated-shared-prefix group stays on the worker prefilling its prefix", () => {
    // 16 requests of one group at one instant on a cold fleet; each later one's prefix is recorded
    // at every worker a request of the group went to (the prefix index)
    const f = new LlmFixture(coldSnap());
    const at = new StaticArray<i32>(N);
    let first = -1;
    for (let k = 0; k < 16; k++) {
      const rc = request(f, 2271, hashes(1, <u64>(k + 1)));
      for (let i = 0; i < N; i++) if (at[i] > 0) rc.cachedBlocks[i] = 128;
      const i = send(f, rc, 1000, <u32>(k + 1));
      if (first < 0) first = i;
      at[i]++;
    }
    // The holder is chosen while its price — the group's prefix computed once (shared) plus each
    // request's own 223 uncached tokens (22.3 ms at the fallback rate), with the delay each suffix
    // adds to the requests it holds up there — stays under a miss at an idle worker. Held up: the
    // k suffixes queued ahead (counted, round 8) and, since round 9, those arriving behind it
    // while it waits and computes, measured: this VM's k sends within one whole prefill (227 ms)
    // are the rate, shared out as the prefill sent to each worker (recent-sends.ts arrivalsAt),
    // over its time to first token there. All the prefill sent went to the holder, so at k = 15
    // it is 334.5 + 22.3 + 22.3 (15 + 15 · 356.8 / 227.1) = 1,217 ms, while a miss at an idle
    // worker, which would then hold the prompt as well, takes 227.1 / 766.4 of the rate over its
    // 227.1 ms: 227.1 (1 + 4.45) = 1,237 ms — the whole group stays, as SGLang's cache-aware router
    // keeps it (docs/benchmarks/llm-r9b.md). Round 8 counted no arrivals behind an idle worker
    // (none ahead): 22.3 (k + 1) + 22.3 k < 227 for k ≤ 4, the first six, and in the matrix's
    // grouped burst the first four groups split, 60 whole groups for 8 workers: 135 requests on
    // four of them where 128 each is possible (0.95× cache-aware). Round 7 counted the queue by the
    // busy period's mean charge: eight. Round 6: ten. Before round 6 (E[S] = 1000 ms per request
    // in flight against a 213 ms saving): 2 of 16.
    expect(at[first]).toBe(16);
  });

  it("a new prompt goes to the worker this VM made hold the least, not to one whose prefill is done", () => {
    // the multi-turn start (seed 2): sessions' first turns 10 ms apart, each a miss; workers 0-6
    // took one each (100 ms of prefill, done by now), worker 7 none. A new session's first turn
    // (2,271 tokens, nothing cached) costs the same wait and prefill everywhere; its next turns
    // follow it. The 7 sends within one whole prefill (227 ms) are the rate, and what follows goes
    // where the prefill sent went: worker 7, holding only this request's, sees 227 / 927 of it over
    // its 227 ms to first token, the others 327 / 927 (recent-sends.ts arrivalsAt), so worker 7 is
    // 172 ms cheaper.
    let idle = 0;
    for (let k = 0; k < 50; k++) {
      const f = new LlmFixture(coldSnap());
      for (let i = 0; i < 7; i++) { f.pending.charge(i, 1000 + 10 * <f64>i, 100); f.recent.record(1000 + 10 * <f64>i); }
      if (send(f, request(f, 2271, null), 1170, <u32>(k + 1)) == 7) idle++;
    }
    // before: every worker priced alike and the band drew among all eight (in the matrix: a second
    // session group on one worker, another nearly idle, multi-turn 0.996× cache-aware)
    expect(idle).toBe(50);
  });

  it("the band is a share of the time to first token: a worker prefilling a request is not drawn", () => {
    // identical warm workers, one of them prefilling one 2,271-token prompt (227 ms ahead); the
    // decode of 256 tokens (~2.8 s) is the same everywhere
    let drawn = 0;
    for (let k = 0; k < 200; k++) {
      const f = new LlmFixture(warmSnap(4, 64, true));
      f.pending.charge(3, 1000, 227);
      f.inflight[3] = 1;
      const i = send(f, request(f, 2271, null), 1000, <u32>(k + 1));
      if (i == 3) drawn++;
    }
    // before: 10 % of a ~3.2 s price spanned that prefill, and worker 3 was drawn 23 times in 200
    expect(drawn).toBe(0);
  });

  it("the band draws among the least prefill in it: a prefix holder a little dearer than the cheapest is still chosen", () => {
    // a saturated burst: 2 s of prefill queued ahead at every worker, 2.3 s at the holder (worker 2,
    // the prompt's 2,048-token prefix cached there): the holder is 95 ms dearer than the cheapest,
    // within the band (10 % of ~2.2 s), and saves 205 ms of prefill that a miss computes again
    let holder = 0;
    for (let k = 0; k < 200; k++) {
      const f = new LlmFixture(warmSnap(4, 64, true));
      for (let i = 0; i < N; i++) f.pending.charge(i, 1000, i == 2 ? 2300 : 2000);
      const rc = request(f, 2271, null);
      rc.cachedBlocks[2] = 128;
      if (send(f, rc, 1000, <u32>(k + 1)) == 2) holder++;
    }
    // before: the band's prefill bound was the cheapest's own (227 ms): every worker was drawn (19 of 200 the holder)
    expect(holder).toBe(200);
  });

  it("a miss where hits are queued is priced with the delay it adds to each of them: the requests ahead are counted, not sized as this one", () => {
    // a saturated burst: at every worker 100 requests queued ahead of 20 ms each (2 s, suffixes of
    // groups whose prefix is cached there), 250 of them (5 s) at the holder of the prompt's
    // 2,048-token prefix (worker 2): 2.8 s dearer by its own time to first token; but a miss
    // computes the prefix again (205 ms) ahead of as many requests as are queued there now (100),
    // a hit only its 22 ms suffix ahead of 250
    const f = new LlmFixture(warmSnap(4, 64, true));
    for (let i = 0; i < N; i++) for (let k = 0; k < (i == 2 ? 250 : 100); k++) f.pending.charge(i, 1000, 20);
    const rc = request(f, 2271, null);
    rc.cachedBlocks[2] = 128;
    // before (round 6): ahead ÷ the prefill of a whole 2,271-token prompt counted the 100 queued
    // suffixes as 9 requests, and the miss went to a worker 2 s ahead
    expect(send(f, rc, 1000, 1)).toBe(2);
    // where nothing is queued, its own time to first token alone: an idle worker, not the holder 600 ms behind
    const g = new LlmFixture(warmSnap(4, 64, true));
    g.pending.charge(2, 1000, 600);
    const rg = request(g, 2271, null);
    rg.cachedBlocks[2] = 128;
    expect(send(g, rg, 1000, 1)).not.toBe(2);
  });

  it("a miss is not sent where a group's first request is computing and its hits wait behind it: the requests ahead are counted one by one", () => {
    // The Poisson 90 % cold start (seed 1, request 35 at 624 ms; llm-r8.md): nothing measured (the
    // fallback 0.1 ms per token). Worker 7 was sent a group's first request (2,271 tokens, 227 ms)
    // and then three of the group's hits (143 uncached tokens, 14.3 ms each); every other worker a
    // miss of its own, 141 ms of it left. The engine computes the waiting hits in one step with
    // whatever joins them: a miss sent to worker 7 adds its 227 ms to each of the three (24, 25
    // and 31 waited 510, 492 and 427 ms, the run's worst TTFTs). Priced with the busy period's mean
    // charge (67.5 ms) the 63 ms queued there were 0.93 of a request — worker 7 the cheapest
    // (502 ms against 509), the band over all eight, drawn 3 times in 50 (in the run: a band of
    // two); counted, they are 3.09 requests (991 ms).
    let seven = 0;
    for (let k = 0; k < 50; k++) {
      const f = new LlmFixture(coldSnap());
      f.pending.charge(7, 1000, 227);
      f.pending.charge(7, 1087, 14.3); f.pending.charge(7, 1106, 14.3); f.pending.charge(7, 1170, 14.3);
      f.inflight[7] = 4;
      for (let i = 0; i < 7; i++) { f.pending.charge(i, 1121, 227); f.inflight[i] = 1; }
      if (send(f, request(f, 2271, null), 1207, <u32>(k + 1)) == 7) seven++;
    }
    expect(seven).toBe(0);
    // a hit of that group still joins them there: its 14.3 ms behind the three is 44 ms
    const g = new LlmFixture(coldSnap());
    g.pending.charge(7, 1000, 227);
    g.pending.charge(7, 1087, 14.3); g.pending.charge(7, 1106, 14.3); g.pending.charge(7, 1170, 14.3);
    for (let i = 0; i < 7; i++) g.pending.charge(i, 1121, 227);
    const hit = request(g, 2271, null);
    hit.cachedBlocks[7] = 128;
    expect(send(g, hit, 1207, 1)).toBe(7);
  });

  it("the band leaves the prefill this VM sent ahead alone: the shortest queue is chosen every time", () => {
    // a cold burst (nothing measured): 2 s of this VM's prefill queued at every worker, 1.95 s at
    // worker 5; no prefix anywhere. This VM knows its own queues live, and one pool rate scales
    // them alike, so their difference is no estimate error for the band to spread
    let shortest = 0;
    for (let k = 0; k < 200; k++) {
      const f = new LlmFixture(coldSnap());
      for (let i = 0; i < N; i++) f.pending.charge(i, 1000, i == 5 ? 1950 : 2000);
      if (send(f, request(f, 2271, null), 1000, <u32>(k + 1)) == 5) shortest++;
    }
    // before: 10 % of the ~4.1 s price (wait, prefill, delay behind) spanned every worker, and worker 5 was drawn ~1 in 8
    expect(shortest).toBe(200);
  });

  it("a slot wait only beyond a known capacity", () => {
    // 12 in the system at each worker, 10 slots: a floor (never queued) prices no wait; a capacity
    // (the server queued at 10) prices 3 × E[S]/10 for the request's own slot
    const floor = new LlmFixture(warmSnap(12, 10, true));
    const known = new LlmFixture(warmSnap(12, 10, false));
    const cp = noShed();
    const a = request(floor, 131, null), b = request(known, 131, null);
    scoreRequest(floor.plan, floor.lp, floor.inflight.dataStart, floor.pending, 1000, a, cp);
    scoreRequest(known.plan, known.lp, known.inflight.dataStart, known.pending, 1000, b, cp);
    expect(known.plan.cost[0] - floor.plan.cost[0]).toBeCloseTo(3 * 8000 / 10, 0);
  });
  it("no decode line: an occupancy on a floor capacity is no evidence, the queued prefill decides", () => {
    // the Poisson cold start (seed 1, request 46): no decode line learned, 36.65 ms per output
    // token measured; worker 4 ran more requests earlier (floor 9, 8 running), the others' floor
    // is 5 with 5 running, and this VM has 800 ms of prefill queued at worker 4 only. Before:
    // worker 4 looked less occupied (9/10 of the decode, 8.4 s against 9.4 s) and took it.
    const s = new Snapshot();
    for (let i = 0; i < N; i++) {
      const a = "10.0.0." + (i + 1).toString() + ":80";
      s.instances.push(inst(a, i == 3 ? 8 : 5, i == 3 ? 9 : 5, true, 8000));
      s.llm.push(llm(a, NaN, 36.65, NaN, NaN));
    }
    const f = new LlmFixture(s);
    f.pending.charge(3, 1000, 800);
    const rc = request(f, 2271, null);
    scoreRequest(f.plan, f.lp, f.inflight.dataStart, f.pending, 1000, rc, noShed());
    // the same decode (the whole measured time per token) at every worker; worker 4 dearer by its queue
    // (worker 4's decodeOf also holds the prefill this VM sent there: its decode is cost − queue)
    for (let i = 1; i < N; i++) if (i != 3) expect(rc.decodeOf[i]).toBe(rc.decodeOf[0]);
    expect(rc.decodeOf[0]).toBeGreaterThan(256 * 36.6);
    expect(f.plan.cost[3] - f.plan.cost[0]).toBeGreaterThanOrEqual(800);
    for (let k = 0; k < 50; k++) {
      const g = new LlmFixture(s);
      g.pending.charge(3, 1000, 800);
      expect(send(g, request(g, 2271, null), 1000, <u32>(k + 1))).not.toBe(3);
    }
  });

  it("no decode line: a known capacity keeps its occupancy, and a floor is never cheaper than it", () => {
    // two workers that queued at 10 (capacity known), 2 and 8 running; one that never queued
    // (floor 10), 2 running: the known ones are priced by their occupancy, the floor as full
    const s = new Snapshot();
    const q: f32[] = [2, 8, 2];
    for (let i = 0; i < 3; i++) {
      const a = "10.0.0." + (i + 1).toString() + ":80";
      s.instances.push(inst(a, q[i], 10, i == 2, 8000));
      s.llm.push(llm(a, NaN, 36.65, NaN, NaN));
    }
    const f = new LlmFixture(s);
    const rc = new RequestCost();
    rc.modelCol = f.lp.modelColumn("m"); rc.cachedBlocks = new StaticArray<i32>(3);
    rc.promptTokens = 131; rc.outTokens = 256;
    scoreRequest(f.plan, f.lp, f.inflight.dataStart, f.pending, 1000, rc, noShed());
    expect(rc.decodeOf[0] / rc.decodeOf[2]).toBeCloseTo(3.0 / 11, 6);
    expect(rc.decodeOf[1] / rc.decodeOf[2]).toBeCloseTo(9.0 / 11, 6);
    expect(rc.decodeOf[2]).toBeGreaterThan(256 * 36.6);
  });
});
