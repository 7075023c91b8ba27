import { candidateFrom, pick, Candidate, Plan, MODEL_CONDITIONAL, PICKER_BAND, SKIP_NONE, SKIP_SLOW } from "../assembly/lib/choose";
import { healthWeight } from "../assembly/lib/choice/scorer-health";
import { InstanceState } from "../assembly/lib/snapshot";
import { Rng, Inflight } from "../assembly/lib/inflight";
import { InbandTable, InbandParams, fuseFactor, ownPrice, peakStep, ewmaStep, Prober, probeEvery, ADJ_STRIDE, REF_MIN_SAMPLES, SLOW_RUN, MAX_PROBE_BACKOFF, PROBE_RETRY_DIV } from "../assembly/lib/inband";
import { probePick } from "../assembly/lib/choice/scorer-inband";
import { OrcaReport, parseOrcaHeader } from "../assembly/lib/orca";
import { parseConfig } from "../assembly/lib/config";

function inst(addr: string, esMs: f32, queue: f32, slots: f32 = 4): InstanceState {
  const s = new InstanceState();
  s.service = "llm"; s.addr = addr; s.healthy = true;
  s.rho = 0.3; s.esMs = esMs; s.es2Ms2 = esMs * esMs * 2; s.queueDepth = queue; s.slots = slots;
  s.p99Ms = 100; s.baselineP99Ms = 100; s.dataAgeMs = 0;
  return s;
}

/** Two instances a (slot 0) and b (slot 1), their table synced and scraped at t = 0. */
class Fixture {
  plan: Plan;
  table: InbandTable = new InbandTable();
  inflight: Array<i32> = [0, 0];
  rng: Rng = new Rng(7);
  constructor(esA: f32, qA: f32, esB: f32, qB: f32, slots: f32 = 4) {
    const ca = candidateFrom(inst("a:1", esA, qA, slots), MODEL_CONDITIONAL, 1e12, 0, false);
    const cb = candidateFrom(inst("b:1", esB, qB, slots), MODEL_CONDITIONAL, 1e12, 0, false);
    ca.slot = 0; cb.slot = 1;
    this.plan = new Plan([ca, cb]);
    this.table.sync(2, [0, 0]);
    this.table.onScrape(0, 0, <f64>esA, <f64>slots);
    this.table.onScrape(1, 0, <f64>esB, <f64>slots);
  }
  /** How many of n band-0 picks (always the cheapest) go to a. */
  toA(n: i32, now: f64): i32 {
    let a = 0;
    for (let k = 0; k < n; k++) if (pick(this.plan, this.inflight, now, PICKER_BAND, 0, this.rng, this.table.adj).index == 0) a++;
    return a;
  }
  /** A request to slot s from t to t + hdr (headers) to t + eos (end of stream). */
  answer(s: i32, t: f64, hdr: f64, eos: f64, status: i32 = 200): void {
    this.table.sent(s, t);
    this.table.headers(s, t, t + hdr, status);
    this.table.done(s, t, t + hdr, status < 500 ? t + eos : t + hdr, true, status);
  }
  /**
   * A new snapshot: a's E[S] and P99 as scraped (b unchanged), a's health weight lifted when the
   * table says it recovered -- what loadaware.rebuild does.
   */
  rescrape(esA: f32, p99A: f32, t: f64): void {
    const sa = inst("a:1", esA, 0);
    sa.p99Ms = p99A;
    const ca = candidateFrom(sa, MODEL_CONDITIONAL, 1e12, 0, false, 0, this.table.liftsSlow(0, 0));
    const cb = candidateFrom(inst("b:1", 80, 1), MODEL_CONDITIONAL, 1e12, 0, false);
    ca.slot = 0; cb.slot = 1;
    this.plan = new Plan([ca, cb]);
    this.table.onScrape(0, t, ca.perItemMs * ca.slots, 4);
  }
  warm(t0: f64): f64 {
    let t = t0;
    for (let k = 0; k < 40; k++) { this.answer(0, t, 8, 80); this.answer(1, t, 8, 80); t += 50; }
    return t;
  }
}

describe("in-band estimators", () => {
  it("the peak EWMA jumps to a higher sample and decays toward lower ones with tau", () => {
    expect(peakStep(10, 50, 5, 1000)).toBe(50);
    expect(peakStep(0, 7, 5, 1000)).toBe(7);
    const d = peakStep(50, 10, 1000, 1000); // w = e^-1
    expect(d).toBeCloseTo(50 * Math.exp(-1) + 10 * (1 - Math.exp(-1)));
    const a = 1 - Math.exp(-0.01);
    expect(ewmaStep(10, 50, 10, 1000)).toBeCloseTo(10 * (1 - a) + 50 * a);
    // sparse samples move the norm by at most 1/32 of the gap
    expect(ewmaStep(10, 50, 100000, 1000)).toBeCloseTo(10 + 40.0 / 32);
  });

  it("the factor returns to 1 (the scrape) without fresh data", () => {
    const p = new InbandParams();
    const now: f64 = 1000;
    const fresh = fuseFactor(p, now, 0, 0, 0, 80, 8, now, 0, 80, 0.9, now, 0, 0);
    expect(fresh).toBeGreaterThan(10);
    const later = fuseFactor(p, now + 20 * p.tauMs + 20 * p.errorTauMs, 0, 0, 0, 80, 8, now, 0, 80, 0.9, now, 0, 0);
    expect(later).toBeCloseTo(1, 2);
  });
});

describe("in-band fusion moves the choice", () => {
  it("equal instances share the traffic (no in-band evidence either way)", () => {
    const f = new Fixture(80, 0, 80, 0);
    const t = f.warm(0);
    f.table.fuseAll(t);
    const a = f.toA(400, t);
    expect(a).toBeGreaterThan(120);
    expect(a).toBeLessThan(280);
  });

  it("a slower generation (headers to end of stream) moves traffic away before the scrape sees it", () => {
    const f = new Fixture(80, 0, 80, 1); // the scrape prefers a (b has a request queued)
    const t = f.warm(0);
    f.table.fuseAll(t);
    expect(f.toA(50, t)).toBe(50);
    f.answer(0, t, 8, 728);              // one answer 10x as long: not yet a peak
    expect(f.toA(50, t + 728)).toBe(50);
    f.answer(0, t + 10, 8, 738);         // two in a row are
    expect(f.toA(50, t + 738)).toBe(0);
  });

  it("a slower time to headers alone is queueing, which the backlog prices: no factor", () => {
    const f = new Fixture(80, 0, 80, 1);
    const t = f.warm(0);
    for (let k = 0; k < 3; k++) f.answer(0, t + k, 400, 472);
    expect(f.toA(50, t + 480)).toBe(50);
  });

  it("a request outstanding for longer than the norm counts before it ends (no headers needed)", () => {
    // b's scraped queue (6, at E[S]/c = 20 ms each: 200 ms) outweighs a's one request of ours,
    // which costs a whole E[S] = 80 ms (backlog + own price), not E[S]/c: 80 + 80 = 160
    const f = new Fixture(80, 0, 80, 6);
    const t = f.warm(0);
    f.table.fuseAll(t);
    f.table.sent(0, t); f.inflight[0] = 1; // the plugin holds our in-flight count at the send
    f.table.fuseAll(t + 50);
    expect(f.toA(20, t + 50)).toBe(20); // outstanding for 50 ms, usual 80, sent at the usual rate: no evidence
    f.table.fuseAll(t + 1200);          // nothing sent since: the one outstanding is our whole pile
    expect(f.table.pile(0)).toBeGreaterThan(1.99); // (1 + 1) / (λ·L + 1), λ faded to ~0
    expect(f.toA(20, t + 1200)).toBe(0);            // (80 + 20) x 2 + (80 - 20 x 2) = 240 > 200
  });

  it("the pile of our outstanding requests is priced at any concurrency (not divided by c)", () => {
    const p = new InbandParams();
    // pure rule: the pile is the slowdown when it says more than the answers
    expect(fuseFactor(p, 0, 0, 0, 0, 80, 80, 0, 3, 80, 0, 0, 0, 0)).toBe(3);
    expect(fuseFactor(p, 0, 0, 0, 0, 80, 80, 0, 1, 80, 0, 0, 0, 0)).toBe(1);
    for (let k = 0; k < 2; k++) {
      const slots: f64 = k == 0 ? 4 : 1000;
      const t = new InbandTable();
      t.sync(1, [0]);
      t.onScrape(0, 0, 100, slots);
      t.fuseAll(0);
      for (let i = 0; i < 4; i++) t.sent(0, 10);
      for (let now: f64 = 20; now <= 1000; now += 20) t.fuseAll(now); // 4 sent at once 990 ms ago, none answered: the rate over the norm has faded
      expect(t.pile(0)).toBeGreaterThan(4.9);
      expect(t.factorOf(0)).toBeGreaterThan(4.9);
      t.done(0, 10, 1001, 1001, true, 200);
      expect(t.pile(0)).toBeLessThan(4.1);
    }
  });

  it("an instance taking more than its share of our requests is dearer at c = 1000 (peak EWMA's pending + 1), and a send counts at once", () => {
    const t = new InbandTable();
    t.sync(4, [0, 0, 0, 0]);
    for (let s = 0; s < 4; s++) t.onScrape(s, 0, 80, 1000);
    t.fuseAll(0);
    // slot 0 gets 3 requests per 20 ms tick, slots 1-3 one each; every one is answered in one
    // piece 80 ms after it was sent
    const pend: Array<Array<f64>> = [[], [], [], []];
    let now: f64 = 0;
    for (let k = 0; k < 150; k++) {
      for (let s = 0; s < 4; s++) for (let j = 0; j < (s == 0 ? 3 : 1); j++) { t.sent(s, now); pend[s].push(now); }
      if (k == 149) break;
      now += 20;
      for (let s = 0; s < 4; s++) while (pend[s].length > 0 && pend[s][0] + 80 <= now) {
        const a = pend[s].shift();
        t.headers(s, a, a + 80, 200); t.done(s, a, a + 80, a + 80, true, 200);
      }
      t.fuseAll(now);
    }
    // right after its sends slot 0 holds 12 of ours: by its own rate (12 usual) the pile is 1, the
    // old rule; a request usually finds 8 (the rate-weighted mean), so 13 / 9
    expect(t.factorOf(0)).toBeGreaterThan(1.35);
    expect(t.factorOf(1)).toBeCloseTo(1, 2);
    // ten more sends to slot 1 before the next tick raise its price at once (no tick, no answer):
    // they are expected outstanding too, but above the usual share (8) they count, 15 / 9
    for (let k = 0; k < 10; k++) t.sent(1, now);
    expect(t.factorOf(1)).toBeGreaterThan(1.6);
  });

  it("own price (pure): each request of ours outstanding counts once, at the larger of E[S]/c x factor and its service time", () => {
    expect(ownPrice(0, 80, 20, 1)).toBe(0);              // nothing of ours outstanding
    expect(ownPrice(3, 0, 20, 1)).toBe(0);               // no E[S] known
    // c = 1: the backlog's E[S] per request of ours is all of it -- counted once (the pile price of
    // round 11 added a whole time on top: twice)
    expect(ownPrice(3, 80, 80, 1)).toBe(0);
    // c = 4: the backlog holds 20 ms of each, the own price the other 60
    expect(ownPrice(2, 80, 20, 1)).toBe(2 * 60);
    // c = 1000: E[S]/c vanishes, each request of ours costs a whole E[S] (peak EWMA's latency x pending)
    expect(ownPrice(3, 80, 0.08, 1)).toBeCloseTo(3 * 79.92, 9);
    // a slowdown factor already prices each of ours above E[S] through the backlog: nothing more
    expect(ownPrice(2, 80, 20, 5)).toBe(0);
    expect(ownPrice(2, 80, 20, 2)).toBe(2 * 40);
  });

  it("at c = 4 each request of ours outstanding costs a whole E[S], not E[S]/c, and leaves with its end", () => {
    // a's scraped E[S] is lower by chance (50 vs 80 ms); 2 of ours are at a. By E[S](1 + n/c) alone
    // a costs 50 * 1.5 = 75 < 80 and takes the next request too; with E[S] per request of ours it
    // costs 50 + 2 * 50 = 150 (75 + the own price 2 * (50 - 12.5))
    const f = new Fixture(50, 0, 80, 0, 4);
    f.table.fuseAll(0);
    f.table.sent(0, 0); f.table.sent(0, 0);
    f.inflight[0] = 2;
    expect(f.table.adj[0 * ADJ_STRIDE + 3]).toBeCloseTo(75, 6);
    expect(f.table.adj[1 * ADJ_STRIDE + 3]).toBe(0);
    expect(f.toA(20, 1)).toBe(0);
    // both answered: nothing of ours outstanding, the own price is gone and a is the cheaper again
    f.table.done(0, 0, 40, 45, true, 200); f.table.done(0, 0, 40, 45, true, 200);
    f.inflight[0] = 0;
    expect(f.table.adj[0 * ADJ_STRIDE + 3]).toBe(0);
    expect(f.toA(20, 50)).toBe(20);
  });

  it("at c = 1000 our outstanding requests spread the picks as LEAST_REQUEST's count does, not all to the instance whose scraped E[S] is lower by chance", () => {
    // a 75 ms, b 80 ms by the scrape, c = 1000, nothing answered yet: by E[S](1 + n/c) a stays
    // the cheaper until 67 of ours are there (the build before took all 20 to a)
    const f = new Fixture(75, 0, 80, 0, 1000);
    f.table.fuseAll(0);
    let toA = 0;
    for (let k = 0; k < 20; k++) {
      const i = pick(f.plan, f.inflight, 1, PICKER_BAND, 0, f.rng, f.table.adj).index;
      f.table.sent(i, 1); f.inflight[i]++;
      if (i == 0) toA++;
    }
    expect(toA).toBeGreaterThanOrEqual(10);
    expect(toA).toBeLessThanOrEqual(11);
  });

  it("at c = 1 our own requests are counted once: no own price (the backlog holds a whole E[S] of each)", () => {
    // one of ours at a, b's scraped backlog 1.5: a costs 80 + 1 * 80 = 160 < b's 80 + 1.5 * 80 =
    // 200 (counted twice, as round 11's pile price did, a would cost 240)
    const f = new Fixture(80, 0, 80, 1.5, 1);
    const t = f.warm(0);
    f.table.fuseAll(t);
    f.table.sent(0, t); f.inflight[0] = 1;
    expect(f.table.adj[0 * ADJ_STRIDE + 3]).toBe(0);
    expect(f.toA(20, t)).toBe(20);
  });

  it("a silent instance (requests outstanding, none answered) never looks cheaper than a peer that answers, at c = 1000", () => {
    const f = new Fixture(80, 0, 80, 0, 1000);
    let t = f.warm(0);
    f.table.fuseAll(t);
    for (let k = 0; k < 10; k++) { f.answer(0, t, 8, 80); f.answer(1, t, 8, 80); t += 20; f.table.fuseAll(t); }
    // a stops answering: a request to it every 20 ms stays outstanding; b answers as before, its
    // time to headers 8 or 10 ms (noise, not a queue, at c = 1000)
    for (let k = 0; k < 15; k++) {
      f.table.sent(0, t); f.inflight[0]++;
      // b as the plugin reports it: our in-flight count at the send (0), so its wait is read
      const h: f64 = k % 2 == 0 ? 8 : 10;
      f.table.sent(1, t); f.table.headers(1, t, t + h, 200, 0); f.table.done(1, t, t + h, t + 80, true, 200);
      t += 20;
      f.table.fuseAll(t);
      expect(f.table.factorOf(0)).toBeGreaterThanOrEqual(f.table.factorOf(1));
    }
    // a scrape taken now (which clears every queue read before it), then one more answer of b
    f.table.onScrape(0, t, 80, 1000);
    f.table.onScrape(1, t, 80, 1000);
    f.table.sent(1, t + 1); f.table.headers(1, t + 1, t + 11, 200, 0); f.table.done(1, t + 1, t + 11, t + 81, true, 200);
    f.table.fuseAll(t + 2);
    expect(f.toA(20, t + 2)).toBe(0);
  });

  it("with c large, a time to headers above its floor is not read as every slot busy", () => {
    const f = new Fixture(80, 0, 80, 0, 1000);
    let t = f.warm(0);
    for (let k = 0; k < 10; k++) { f.table.headers(1, t, t + 8, 200, 0); t += 50; } // the floor: 8 ms
    f.table.onScrape(1, t, 80, 1000);
    f.table.headers(1, t + 1, t + 11, 200, 0); // 2 ms above the floor: E[S]/c is 0.08 ms
    expect(isNaN(f.table.adj[1 * ADJ_STRIDE + 1])).toBe(true);
  });

  it("errors make a fast-failing instance expensive (it looks idle to the scrape)", () => {
    const f = new Fixture(80, 0, 80, 2);
    let t = f.warm(0);
    f.table.fuseAll(t);
    expect(f.toA(20, t)).toBe(20);
    for (let k = 0; k < 4; k++) { f.answer(0, t, 2, 2, 503); t += 5; }
    expect(f.toA(20, t)).toBe(0);
    expect(f.table.errors).toBe(4);
    // a reset before any answer is an error too
    f.table.sent(1, t);
    f.table.done(1, t, 0, t + 1, false, 0);
    expect(f.table.errors).toBe(5);
  });

  it("an error costs a retry at a usual instance, whatever the failing one's own E[S]; the price holds until a 2xx answer", () => {
    const t = new InbandTable();
    t.sync(2, [0, 0]);
    t.onScrape(0, 0, 2, 1);              // slot 0 answers in 2 ms (soon its 503s: what the scrape then says)
    t.onScrape(1, 0, 80, 1);             // slot 1: 80 ms, c = 1
    t.fuseAll(0);
    let now: f64 = 0;
    for (let k = 0; k < 50; k++) {       // one request to each per 20 ms tick
      t.sent(0, now); t.headers(0, now, now + 2, 200); t.done(0, now, now + 2, now + 2, true, 200);
      t.sent(1, now); t.headers(1, now, now + 80, 200); t.done(1, now, now + 80, now + 80, true, 200);
      now += 20; t.fuseAll(now);
    }
    t.sent(0, now); t.headers(0, now, now + 2, 503); t.done(0, now, now + 2, now + 2, true, 503);
    // one error in four answers: a retry at a usual instance (E[S] ~41 ms at these rates, and
    // the backlog it usually has) per three successes -- dearer than slot 1 at once
    expect(t.factorOf(0) * 2).toBeGreaterThan(3 * 80);
    // the retry's price is a usual instance's: its E[S] and the fairN of ours it usually holds,
    // each priced once at max(E[S]/c, E[S]) = E[S] (backlog + own price)
    const fair = t.fairN[0], typ = t.esTyp[0];
    expect(fair).toBeGreaterThan(1);
    expect(t.errScale(0)).toBeCloseTo(typ * (1 + fair) / 2, 6);
    // no answer for 10 s: nothing says it is better, the rate fades no lower than one answer's weight
    now += 10000; t.fuseAll(now);
    expect(t.factorOf(0)).toBeGreaterThan(4);
    // a 2xx (a probe's) ends that: the rate fades as before
    t.sent(0, now); t.headers(0, now, now + 2, 200); t.done(0, now, now + 2, now + 2, true, 200);
    t.fuseAll(now + 2);
    expect(t.factorOf(0)).toBeLessThan(1.1);
  });

  it("fresh fast answers correct a scrape that remembers a slow episode", () => {
    const f = new Fixture(800, 0, 80, 14); // the scrape: a is 10x slower; corrected, a costs 4x its answers (LEVEL_MARGIN)
    f.table.fuseAll(0);
    expect(f.toA(20, 0)).toBe(0);
    let t: f64 = 0;
    // probes answered in 80 ms: once the norm has JUDGE_MIN_SAMPLES answers and the last
    // RECOVERY_ANSWERS were normal
    for (let k = 0; k < 12; k++) { f.answer(0, t, 8, 80); t += 1000; }
    f.table.fuseAll(t);
    expect(f.toA(20, t)).toBe(20);
  });

  it("an ORCA queue newer than the scrape replaces the scraped queue, until a newer scrape", () => {
    const f = new Fixture(80, 0, 80, 1);
    const t = f.warm(0);
    f.table.fuseAll(t);
    expect(f.toA(20, t)).toBe(20);
    f.table.orca(0, parseOrcaHeader("TEXT named_metrics.queue=6", "queue", "kv", new OrcaReport()), t, 0);
    expect(f.table.adj[0 * ADJ_STRIDE + 1]).toBe(6);
    expect(f.toA(20, t)).toBe(0);
    f.table.onScrape(0, t + 1, 80, 4); // a newer scrape: the scraped queue again
    expect(f.toA(20, t + 1)).toBe(20);
  });

  it("a wait in the time to headers reads the other proxies' queue until a newer scrape", () => {
    const f = new Fixture(80, 0, 80, 1); // scraped: a idle, b one queued: a is the cheaper
    f.table.fuseAll(0);
    expect(f.toA(20, 0)).toBe(20);
    // answers with headers after 8 ms (no wait): the unqueued time to headers
    let t: f64 = 10;
    for (let k = 0; k < 10; k++) { f.table.headers(0, t, t + 8, 200, 0); f.table.headers(1, t, t + 8, 200, 0); t += 50; }
    expect(f.toA(20, t)).toBe(20);
    // a request to a waited 100 ms = 5 × E[S]/c: a held c − 1 + 5 requests, none of them ours
    f.table.headers(0, t, t + 108, 200, 0);
    expect(f.table.adj[0 * ADJ_STRIDE + 1]).toBeGreaterThan(7);
    expect(f.toA(20, t + 108)).toBe(0);
    // our own in-flight requests are not the others' queue: the same wait with 8 of ours there
    f.table.onScrape(0, t + 1, 80, 4);
    f.table.headers(0, t + 2, t + 110, 200, 8);
    expect(f.table.adj[0 * ADJ_STRIDE + 1]).toBe(0);
    // a scrape taken after that request started: the scraped queue again
    f.table.onScrape(0, t + 200, 80, 4);
    expect(isNaN(f.table.adj[0 * ADJ_STRIDE + 1])).toBe(true);
    expect(f.toA(20, t + 200)).toBe(20);
  });

  it("a request that found a free slot caps a stale scraped queue at c - 1 less ours", () => {
    const f = new Fixture(80, 3, 80, 2); // scraped: a 3 in it, b 2: b is the cheaper
    f.table.fuseAll(0);
    expect(f.toA(20, 0)).toBe(0);
    let t: f64 = 10;
    for (let k = 0; k < 10; k++) { f.table.headers(1, t, t + 8, 200, 0); t += 50; }
    f.table.headers(0, t, t + 8, 200, 0);
    expect(f.toA(20, t)).toBe(0); // the first answer only sets the unqueued time to headers
    f.table.headers(0, t + 20, t + 28, 200, 2); // no wait, 2 of ours there: at most 1 other in a, below b's 2
    expect(f.table.adj[0 * ADJ_STRIDE + 2]).toBe(1);
    expect(f.toA(20, t + 28)).toBe(20);
    f.table.onScrape(0, t + 100, 80, 4); // a newer scrape lifts the cap
    expect(f.table.adj[0 * ADJ_STRIDE + 2]).toBe(Infinity);
    expect(f.toA(20, t + 100)).toBe(0);
  });

  it("a wait shorter than E[S]/c is a request's own time to first token, not a queue", () => {
    const f = new Fixture(80, 6, 80, 4); // scraped: a 6 in it, b 4: b is the cheaper
    f.table.fuseAll(0);
    expect(f.toA(20, 0)).toBe(0);
    let t: f64 = 10;
    for (let k = 0; k < 10; k++) { f.table.headers(0, t, t + 8, 200, 0); t += 50; }
    // 16 ms above the floor (0.8 × E[S]/c): a long prefill on a free slot, not c − 1 + 0.8 others
    f.table.headers(0, t, t + 24, 200, 0);
    expect(isNaN(f.table.adj[0 * ADJ_STRIDE + 1])).toBe(true);
    expect(f.table.adj[0 * ADJ_STRIDE + 2]).toBe(3);
    expect(f.toA(20, t + 24)).toBe(20);
    // 24 ms above it (1.2 × E[S]/c): every slot was busy, c − 1 + 1.2 others
    f.table.headers(0, t + 50, t + 82, 200, 0);
    expect(f.table.adj[0 * ADJ_STRIDE + 1]).toBeGreaterThan(4.1);
    expect(f.table.adj[0 * ADJ_STRIDE + 1]).toBeLessThan(4.3);
    expect(f.toA(20, t + 82)).toBe(0);
  });

  it("a slowed instance's long time to headers is its slowdown, not a queue", () => {
    const f = new Fixture(80, 0, 80, 1);
    let t = f.warm(0);
    f.table.onScrape(0, t, 80, 4); f.table.onScrape(1, t, 80, 4);
    for (let k = 0; k < 3; k++) { f.table.headers(0, t, t + 8, 200, 0); t += 50; }
    // two slow answers (10x) make a slow; then its waits are not read
    f.answer(0, t, 80, 800); f.answer(0, t + 1, 80, 801);
    t += 1000;
    f.table.headers(0, t, t + 300, 200, 0);
    expect(isNaN(f.table.adj[0 * ADJ_STRIDE + 1])).toBe(true);
  });

  it("a slowed instance's waits are not read as queue for RECOVERY_MEMORY_MS, late in the clock too", () => {
    const f = new Fixture(80, 0, 80, 1);
    let t = f.warm(1e6);
    f.table.onScrape(0, t, 80, 4); f.table.onScrape(1, t, 80, 4);
    for (let k = 0; k < 3; k++) { f.table.headers(0, t, t + 8, 200, 0); t += 50; }
    f.answer(0, t, 80, 800); f.answer(0, t + 1, 80, 801);
    expect(f.table.slowAt[0]).toBeGreaterThan(1e6);
    t += 1000;
    f.table.headers(0, t, t + 300, 200, 0);
    expect(isNaN(f.table.adj[0 * ADJ_STRIDE + 1])).toBe(true);
  });

  it("a wait read as queue gives way to a scrape taken after the request started and to a newer ORCA report", () => {
    const f = new Fixture(80, 0, 80, 1);
    f.table.fuseAll(0);
    let t: f64 = 10;
    for (let k = 0; k < 10; k++) { f.table.headers(0, t, t + 8, 200, 0); f.table.headers(1, t, t + 8, 200, 0); t += 50; }
    // a scrape at t + 50 of a request started at t: its wait is older than the scrape
    f.table.onScrape(0, t + 50, 80, 4);
    f.table.headers(0, t, t + 108, 200, 0);
    expect(isNaN(f.table.adj[0 * ADJ_STRIDE + 1])).toBe(true);
    expect(f.table.adj[0 * ADJ_STRIDE + 2]).toBe(Infinity);
    expect(f.toA(20, t + 108)).toBe(20);
    // an ORCA queue newer than the scrape: a later wait (or free slot) does not override it
    f.table.orca(0, parseOrcaHeader("TEXT named_metrics.queue=6", "queue", "kv", new OrcaReport()), t + 120, 0);
    expect(f.table.adj[0 * ADJ_STRIDE + 1]).toBe(6);
    f.table.headers(0, t + 130, t + 330, 200, 0);
    expect(f.table.adj[0 * ADJ_STRIDE + 1]).toBe(6);
    f.table.headers(0, t + 340, t + 348, 200, 0);
    expect(f.table.adj[0 * ADJ_STRIDE + 1]).toBe(6);
    expect(f.table.adj[0 * ADJ_STRIDE + 2]).toBe(Infinity);
  });

  it("an instance is not probed at the instant its data goes stale", () => {
    const f = new Fixture(800, 0, 80, 0);
    f.table.fuseAll(0);
    const t: f64 = 5000;
    f.table.sent(1, t);
    const pr = new Prober(100, 1000);
    f.plan.staleAtMs[0] = t + 1;
    expect(probePick(f.plan, f.table, pr, f.inflight.dataStart, t, f.rng)).toBe(0); // fresh until then
    const q = new Prober(100, 1000);
    f.plan.staleAtMs[0] = t;
    expect(probePick(f.plan, f.table, q, f.inflight.dataStart, t, f.rng)).toBe(-1);
  });

  it("ORCA errors per second count like observed errors", () => {
    const f = new Fixture(80, 0, 80, 1);
    const t = f.warm(0);
    f.table.orca(0, parseOrcaHeader("TEXT rps_fractional=10,eps=9", "queue", "kv", new OrcaReport()), t, 0);
    expect(f.toA(20, t)).toBe(0);
    // a malformed report is counted and changes nothing
    f.table.orca(1, parseOrcaHeader("TEXT eps", "queue", "kv", new OrcaReport()), t, 0);
    expect(f.table.orcaInvalid).toBe(1);
  });

  it("a freed and reused slot starts from nothing", () => {
    const f = new Fixture(80, 0, 80, 1);
    const t = f.warm(0);
    for (let k = 0; k < 4; k++) f.answer(0, t, 2, 2, 503);
    expect(f.table.adj[0]).toBeGreaterThan(5);
    f.table.sync(2, [1, 0]);
    expect(f.table.adj[0]).toBe(1);
    expect(f.table.hdrPeak[0]).toBe(0);
  });
});

/** Warmed and calibrated (scrape 80 ms for a norm of 72), then two slow answers in a row at a. */
function episode(f: Fixture): f64 {
  let t = f.warm(0);
  f.table.onScrape(0, t, 80, 4);
  f.table.onScrape(1, t, 80, 4);
  f.answer(0, t, 8, 728);
  f.answer(0, t + 10, 8, 738);
  return t + 1000;
}

describe("recovery after a slowdown (no absorbing state)", () => {
  it("fresh normal answers after a slowdown it saw price the instance at its norm, not at the scrape that remembers the episode", () => {
    const f = new Fixture(80, 0, 80, 1);
    let t = episode(f);
    f.rescrape(400, 100, t);            // the scrape catches up with the episode (b: 80 ms, one queued)
    f.table.fuseAll(t);
    expect(f.toA(20, t)).toBe(0);
    for (let k = 0; k < 2; k++) { f.answer(0, t, 8, 80); t += 1000; }
    f.table.fuseAll(t);
    expect(f.toA(20, t)).toBe(0);       // two normal answers are not yet a recovery
    f.answer(0, t, 8, 80); t += 1000;
    f.table.fuseAll(t);
    expect(f.table.recovered(0, t)).toBe(true);
    expect(f.toA(20, t)).toBe(20);      // ~1.1 x 80 ms against b's 80 + 20
  });

  it("recovery lifts the agent's P99 verdict (skip slow) at the next plan, not before", () => {
    const f = new Fixture(80, 0, 80, 1);
    let t = episode(f);
    f.table.fuseAll(t);
    f.rescrape(400, 2000, t);           // P99 20x its baseline: weight 0
    expect(f.plan.skip[0]).toBe(SKIP_SLOW);
    for (let k = 0; k < 3; k++) { f.answer(0, t, 8, 80); t += 1000; }
    f.table.fuseAll(t);
    expect(f.plan.skip[0]).toBe(SKIP_SLOW); // the plan in force keeps it
    f.rescrape(400, 2000, t);           // the P99 window still holds the episode
    expect(f.plan.skip[0]).toBe(SKIP_NONE);
    f.table.fuseAll(t);
    expect(f.toA(20, t)).toBe(20);
    expect(healthWeight(2000, 100, true)).toBe(1);
    expect(healthWeight(2000, 100, false)).toBe(0);
    expect(healthWeight(450, 100, false)).toBeCloseTo(300.0 / 450);
  });

  it("only a slowdown this proxy saw counts: one heavy-tailed answer does not let it overrule the P99", () => {
    const f = new Fixture(80, 0, 80, 1);
    let t = f.warm(0);
    f.answer(0, t, 8, 2000);            // one answer 28x the norm, between normal ones
    for (let k = 0; k < 5; k++) { t += 100; f.answer(0, t, 8, 80); }
    f.table.fuseAll(t);
    expect(f.table.slowAt[0]).toBe(0);
    expect(f.table.liftsSlow(0, 0)).toBe(false);
    f.rescrape(80, 2000, t);
    expect(f.plan.skip[0]).toBe(SKIP_SLOW);
  });

  it("answers are judged by when the request started: the episode's slow tail does not undo a recovery, a new slow answer does", () => {
    const f = new Fixture(80, 0, 80, 1);
    let t = episode(f);
    const old = t - 500;                 // sent during the episode, still answering
    for (let k = 0; k < 3; k++) { f.answer(0, t, 8, 80); t += 1000; }
    expect(f.table.recovered(0, t)).toBe(true);
    f.table.sent(0, old);
    f.table.headers(0, old, old + 80, 200);
    f.table.done(0, old, old + 80, t, true, 200);   // answered now, 6 s long
    f.answer(0, t, 8, 2000);                          // pair minimum of two slow answers, but one started before the normal ones
    expect(f.table.recovered(0, t + 2000)).toBe(false); // this one started after them: slow again
    f.table.fuseAll(t + 2000);
    expect(f.table.adj[0]).toBeGreaterThanOrEqual(1);
  });

  it("the norm is not moved by the answers of a slowdown, and starts as the running mean", () => {
    const f = new Fixture(80, 0, 80, 1);
    let t = episode(f);
    const ref = f.table.eosRef[0];
    for (let k = 0; k < 10; k++) { f.answer(0, t, 8, 500); t += 100; }
    expect(f.table.eosRef[0]).toBe(ref);
    f.answer(0, t, 8, 80);              // a normal answer: the norm learns again
    t += 100;
    f.answer(0, t, 8, 150);             // (above 2x, below SLOW_RUN_RATIO: no new verdict)
    expect(f.table.eosRef[0]).toBeGreaterThan(ref);
    // the first REF_MIN_SAMPLES answers: their plain mean (a short first answer does not pin it low)
    expect(ewmaStep(10, 100, 5, 30000, 5, 1)).toBe(55);
    expect(ewmaStep(10, 100, 5, 30000, 5, REF_MIN_SAMPLES)).toBeLessThan(15);
  });
});

describe("the norm's clamp takes evidence of a slowdown, not an instance's own tail", () => {
  it("a lone long answer counts whole; a slow pair, a sparse answer and any answer during a verdict are clamped", () => {
    const a = 1 - Math.exp(-10.0 / 30000);
    // lone: the answer before it was short (pair minimum 20 < 5 x 10)
    expect(ewmaStep(10, 100, 10, 30000, 5, REF_MIN_SAMPLES, 20)).toBeCloseTo(10 * (1 - a) + 100 * a);
    // a slow pair (both above 5 x the norm): counts as 5 x the norm at 1/8 of the weight
    expect(ewmaStep(10, 100, 10, 30000, 5, REF_MIN_SAMPLES, 60)).toBeCloseTo(10 * (1 - a / 8) + 50 * (a / 8));
    // during a verdict (evidence +Infinity, the default)
    expect(ewmaStep(10, 100, 10, 30000, 5, REF_MIN_SAMPLES)).toBeCloseTo(10 * (1 - a / 8) + 50 * (a / 8));
    // sparse (the weight at its 1/32 cap: a probe's answer to an instance priced out), even lone
    expect(ewmaStep(10, 100, 100000, 30000, 5, REF_MIN_SAMPLES, 20)).toBeCloseTo(10 + 40.0 / 32 / 8);
    // below the bound nothing changes whatever the evidence
    expect(ewmaStep(10, 40, 10, 30000, 5, REF_MIN_SAMPLES)).toBeCloseTo(10 * (1 - a) + 40 * a);
  });

  it("the service norm of a healthy lognormal sigma 2 instance is near its mean, not a fifth of it", () => {
    // answers ending 50 ms apart (in the order they end, as a busy instance's do), service
    // times lognormal sigma 2 with mean 80 ms (matrix cell #23's law); the clamp of every answer
    // above 5 x the norm held it at ~0.2 x the mean
    const f = new Fixture(80, 0, 80, 1);
    const rng = new Rng(11);
    const sigma: f64 = 2, mu = Math.log(80) - sigma * sigma / 2;
    // (the norm is an average over ~300 answers, itself noisy at sigma 2: compared over the run)
    let t: f64 = 100000, sum: f64 = 0, norms: f64 = 0;
    const n = 16000;
    for (let k = 0; k < n; k++) {
      const u1 = rng.next() + 1e-12, u2 = rng.next();
      const z = Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
      const x = Math.exp(mu + sigma * z);
      sum += x;
      const start = t - 1 - x;
      f.table.sent(0, start);
      f.table.headers(0, start, start + 1, 200);
      f.table.done(0, start, start + 1, t, true, 200);
      norms += f.table.eosRef[0];
      t += 50;
    }
    const ratio = norms / sum;
    expect(ratio).toBeGreaterThan(0.7);
    expect(ratio).toBeLessThan(1.3);
  });

  it("while a verdict is in force the episode's lone answers after a short one do not raise the norm", () => {
    const f = new Fixture(80, 0, 80, 1);
    let t = episode(f);
    const ref = f.table.eosRef[0];
    // a 10x episode: one short answer in five (a normal answer lets the norm learn again), the
    // others lone long ones after it
    for (let k = 0; k < 40; k++) { f.answer(0, t, 8, k % 5 == 0 ? 100 : 800); t += 100; }
    expect(f.table.judgedSlow(0, t)).toBe(true);
    // each long answer counts as 5 x the norm at 1/8 of the weight at most
    expect(f.table.eosRef[0]).toBeLessThan(ref * 1.1);
  });
});

describe("the slowness verdict (slow, held, recovered)", () => {
  it("a sustained 3x slowdown (no pair above the gate) is judged from the slow score; a healthy tail is not", () => {
    const f = new Fixture(80, 0, 80, 1);
    let t = f.warm(0);
    // a healthy tail: one answer at 3x between normal ones, twice
    for (let k = 0; k < 2; k++) { f.answer(0, t, 8, 216); t += 50; f.answer(0, t, 8, 80); t += 50; f.answer(0, t, 8, 80); t += 50; }
    expect(f.table.slowAt[0]).toBe(0);
    // 3x answers, one short one between them: the score still reaches SLOW_RUN
    f.answer(0, t, 8, 216); t += 50;
    f.answer(0, t, 8, 230); t += 50;
    f.answer(0, t, 8, 40); t += 50;
    expect(f.table.slowAt[0]).toBe(0);
    for (let k = 0; k < SLOW_RUN - 1; k++) { f.answer(0, t, 8, 216); t += 50; }
    expect(f.table.slowAt[0]).toBe(t - 50);
    expect(f.table.judgedSlow(0, t)).toBe(true);
    // without a pair above slowdownThreshold the verdict is not priced: no false alarm costs a healthy instance much
    f.table.fuseAll(t);
    expect(f.table.adj[0]).toBe(1);
  });

  it("once judged slow, the whole peak ratio is priced and held (no fade) until the instance recovers", () => {
    const f = new Fixture(80, 0, 80, 1);
    let t = episode(f);                  // two 10x answers in a row: a verdict, not yet held
    f.table.fuseAll(t);
    expect(f.table.adj[0]).toBeLessThan(2.5);   // ratio / threshold, fading (a healthy tail's pair costs no more)
    f.answer(0, t, 8, 700); t += 1000;   // a third slow answer in a row (HOLD_ANSWERS) confirms it
    f.table.fuseAll(t);
    const held = f.table.adj[0];
    expect(held).toBeGreaterThan(8);     // ~10x, not 10/threshold = 2x
    t += 20000;                          // 10 tau later (the fade had reached 1), within RECOVERY_MEMORY_MS
    f.table.fuseAll(t);
    expect(f.table.adj[0]).toBe(held);
    expect(f.toA(20, t)).toBe(0);
    // a lower answer (in between) does not pull the held peak down
    f.answer(0, t, 8, 300); t += 1000;
    f.table.fuseAll(t);
    expect(f.table.adj[0]).toBe(held);
    // three normal answers: recovered, the peak is no longer priced
    for (let k = 0; k < 3; k++) { f.answer(0, t, 8, 80); t += 1000; }
    f.table.fuseAll(t);
    expect(f.table.recovered(0, t)).toBe(true);
    expect(f.table.adj[0]).toBeLessThanOrEqual(1);
    // the held factor is the pure function's: fuseFactor(..., held) against the faded one
    const p = new InbandParams();
    expect(fuseFactor(p, 20000, 0, 0, 0, 800, 80, 0, 0, 80, 0, 0, 0, 0, false, 0, 0, true)).toBe(10);
    expect(fuseFactor(p, 20000, 0, 0, 0, 800, 80, 0, 0, 80, 0, 0, 0, 0, false, 0, 0, false)).toBeCloseTo(1, 2);
    expect(fuseFactor(p, 0, 0, 0, 0, 800, 80, 0, 0, 80, 0, 0, 0, 0, false, 0, 0, false)).toBe(2);
    // held, but the peak under the gate (a verdict from the slow score alone): not priced
    expect(fuseFactor(p, 0, 0, 0, 0, 240, 80, 0, 0, 80, 0, 0, 0, 0, false, 0, 0, true)).toBe(1);
  });

  it("a pair of slow answers broken by a normal one is not held: only HOLD_ANSWERS in a row above the slow-run ratio hold the verdict", () => {
    const f = new Fixture(80, 0, 80, 1);
    let t = episode(f);                  // the pair: a verdict
    f.answer(0, t, 8, 80); t += 1000;    // a normal answer breaks the run
    f.answer(0, t, 8, 700); t += 1000;   // one more slow answer: a run of 1
    f.table.fuseAll(t);
    expect(f.table.adj[0]).toBeLessThan(2.5);
    t += 20000;                          // unconfirmed, it fades
    f.table.fuseAll(t);
    expect(f.table.adj[0]).toBeLessThan(1.1);
  });

  it("normal answers from before an episode are no recovery from it (out-of-order completion)", () => {
    const f = new Fixture(80, 0, 80, 1);
    let t = f.warm(0);                   // a long run of normal answers
    // two slow requests started at t and t + 10, answered after a short one started at t + 20
    f.answer(0, t + 20, 8, 60);
    f.answer(0, t, 8, 728);
    f.answer(0, t + 10, 8, 738);
    expect(f.table.slowAt[0]).toBe(t + 10);
    expect(f.table.recovered(0, t + 800)).toBe(false);
    f.table.fuseAll(t + 800);
    expect(f.toA(20, t + 800)).toBe(0);
  });

  it("the score starts a verdict and restarts from 0: one tail answer after a recovery does not judge it slow again", () => {
    const f = new Fixture(80, 0, 80, 1);
    let t = f.warm(0);
    for (let k = 0; k < SLOW_RUN; k++) { f.answer(0, t, 8, 216); t += 50; }
    const v = f.table.slowAt[0];
    expect(v).toBeGreaterThan(0);
    expect(f.table.highRun[0]).toBe(0);
    for (let k = 0; k < 3; k++) { f.answer(0, t, 8, 80); t += 50; }
    expect(f.table.recovered(0, t)).toBe(true);
    f.answer(0, t, 8, 250); t += 50;     // a healthy instance's 3.5x tail
    expect(f.table.slowAt[0]).toBe(v);
    expect(f.table.recovered(0, t)).toBe(true);
  });

  it("a priced-out instance recovering from a verdict is probed again soon after its idle time, not a whole countdown later", () => {
    const f = new Fixture(800, 0, 80, 0); // a priced out (10x b)
    f.table.fuseAll(0);
    const t: f64 = 5000;
    f.table.sent(1, t);
    f.table.sent(0, t - 500, 1000);      // probed 500 ms ago: still waiting
    const pr = new Prober(100, 1000);
    expect(probePick(f.plan, f.table, pr, f.inflight.dataStart, t, f.rng)).toBe(-1);
    expect(pr.countdown).toBeGreaterThanOrEqual(1); // no normal answer since: the drawn countdown (1 .. 199)
    let long = false;
    for (let k = 0; k < 20; k++) { probePick(f.plan, f.table, pr, f.inflight.dataStart, t, f.rng); if (pr.countdown > 100 / PROBE_RETRY_DIV) long = true; }
    expect(long).toBe(true);
    f.table.normalRun[0] = 1;            // its probe answered normally (judge()) ...
    for (let k = 0; k < 20; k++) probePick(f.plan, f.table, pr, f.inflight.dataStart, t, f.rng);
    // ... but no verdict: merely dear (a slow GPU generation), not recovering -- the drawn countdown
    expect(f.table.recovering(0, t)).toBe(false);
    let long2 = false;
    for (let k = 0; k < 20; k++) { probePick(f.plan, f.table, pr, f.inflight.dataStart, t, f.rng); if (pr.countdown > 100 / PROBE_RETRY_DIV) long2 = true; }
    expect(long2).toBe(true);
    f.table.slowAt[0] = t - 2000;        // a verdict 2 s ago, one normal answer since: recovering
    expect(f.table.recovering(0, t)).toBe(true);
    for (let k = 0; k < 20; k++) {
      expect(probePick(f.plan, f.table, pr, f.inflight.dataStart, t, f.rng)).toBe(-1);
      expect(pr.countdown).toBeLessThanOrEqual(100 / PROBE_RETRY_DIV);
    }
    expect(probePick(f.plan, f.table, pr, f.inflight.dataStart, t + 600, f.rng)).toBe(0);
    const q = new Prober(100, 1000);
    q.retry(0);
    expect(q.countdown).toBe(1);
    q.retry(0.999999);
    expect(q.countdown).toBe(100 / PROBE_RETRY_DIV);
    const off = new Prober(0, 1000);
    off.retry(0.5);
    expect(off.countdown).toBe(0);
  });

  it("an instance recovering from a verdict is probed again as soon as its probe has answered, not after idleMs", () => {
    const f = new Fixture(800, 0, 80, 0); // a priced out (10x b)
    const t: f64 = 5000;
    f.table.fuseAll(t);
    f.table.sent(1, t);
    f.table.sent(0, t - 200, 1000);      // the probe 200 ms ago ...
    f.table.slowAt[0] = t - 2000;        // ... answered normally after a verdict 2 s ago (judge(): the backoff ends)
    f.table.normalRun[0] = 1;
    f.table.probeUntil[0] = -Infinity;
    expect(f.table.recovering(0, t)).toBe(true);
    f.inflight[0] = 1;                   // a probe still outstanding: one at a time
    expect(probePick(f.plan, f.table, new Prober(100, 1000), f.inflight.dataStart, t, f.rng)).toBe(-1);
    f.inflight[0] = 0;                   // answered: the next probe is due now
    expect(probePick(f.plan, f.table, new Prober(100, 1000), f.inflight.dataStart, t, f.rng)).toBe(0);
    f.table.slowAt[0] = 0;               // merely dear, no verdict: idleMs still applies
    expect(probePick(f.plan, f.table, new Prober(100, 1000), f.inflight.dataStart, t, f.rng)).toBe(-1);
  });

  it("a probe to an instance judged slow with no normal answer since waits the longest backoff at once", () => {
    const f = new Fixture(80, 0, 80, 1);
    let t = episode(f);
    f.table.sent(0, t, 1000);
    expect(f.table.probeUntil[0]).toBe(t + 1000 * <f64>(1 << MAX_PROBE_BACKOFF));
    // after a normal answer (the instance may be back): probed every idleMs again
    f.answer(0, t, 8, 80);
    t += 5000;
    f.table.sent(0, t, 1000);
    expect(f.table.probeUntil[0]).toBe(t + 1000);
    // a healthy instance: the backoff starts at idleMs
    f.table.sent(1, t, 1000);
    expect(f.table.probeUntil[1]).toBe(t + 1000);
  });
});

describe("probe share (no absorbing state)", () => {
  it("sends one request in `every` to an idle eligible instance, whatever its price", () => {
    const f = new Fixture(800, 0, 80, 0);
    f.table.fuseAll(0);
    const pr = new Prober(probeEvery(0.01), 1000);
    expect(pr.every).toBe(100);
    let due = 0;
    for (let k = 0; k < 1000; k++) if (pr.due()) due++;
    expect(due).toBe(10);
    const t: f64 = 5000;
    f.table.sent(1, t); // b is in use, a idle since ever
    expect(probePick(f.plan, f.table, pr, f.inflight.dataStart, t, f.rng)).toBe(0);
    f.table.sent(0, t);
    expect(probePick(f.plan, f.table, pr, f.inflight.dataStart, t + 10, f.rng)).toBe(-1);
    expect(probePick(f.plan, f.table, pr, f.inflight.dataStart, t + 2000, f.rng)).toBeGreaterThanOrEqual(0);
    expect(probeEvery(0)).toBe(0);
    expect(new Prober(0, 1000).due()).toBe(false);
  });

  it("probes only instances priced out: an instance merely dearer than the cheapest gets none", () => {
    const f = new Fixture(120, 0, 80, 0);   // a at 1.5x b: not priced out (PRICED_OUT = 2)
    f.table.fuseAll(0);
    const pr = new Prober(100, 1000);
    const t: f64 = 5000;
    f.table.lastSentMs[1] = t;              // b not idle (a send would price b's pile of one)
    expect(probePick(f.plan, f.table, pr, f.inflight.dataStart, t, f.rng)).toBe(-1);
    const g = new Fixture(200, 0, 80, 0);   // 2.5x: priced out, probed
    g.table.fuseAll(0);
    g.table.lastSentMs[1] = t;
    expect(probePick(g.plan, g.table, pr, g.inflight.dataStart, t, g.rng)).toBe(0);
  });

  it("the probe countdown is redrawn after each probe: 1 .. 2·every − 1 requests, every on average", () => {
    const pr = new Prober(100, 1000);
    pr.rephase(0);
    expect(pr.countdown).toBe(1);
    pr.rephase(0.999999);
    expect(pr.countdown).toBe(199);
    const rng = new Rng(3);
    let sum: f64 = 0;
    for (let k = 0; k < 2000; k++) { pr.rephase(rng.next()); sum += <f64>pr.countdown; }
    expect(sum / 2000).toBeGreaterThan(95);
    expect(sum / 2000).toBeLessThan(105);
  });

  it("a normal answer ends the probe backoff, in every worker VM", () => {
    const i1 = new Inflight(); const i2 = new Inflight();
    i1.slotFor("a:1"); i2.slotFor("a:1");
    const t1 = new InbandTable(); t1.sync(i1.capacity(), i1.gen);
    const t2 = new InbandTable(); t2.sync(i2.capacity(), i2.gen);
    let t: f64 = 0;
    for (let k = 0; k < 10; k++) { t1.sent(0, t); t1.headers(0, t, t + 8, 200); t1.done(0, t, t + 8, t + 80, true, 200); t += 100; }
    for (let k = 0; k < 3; k++) { t1.sent(0, t, 1000); t += 10; } // three probes in a row: the wait has doubled twice
    expect(t1.probeUntil[0]).toBe(t - 10 + 4000);
    const slotOf = (a: string): i32 => a == "a:1" ? 0 : -1;
    t2.merge(t1.merge(new ArrayBuffer(0), i1.addresses(), slotOf), i2.addresses(), slotOf);
    expect(t2.probeUntil[0]).toBe(t - 10 + 4000);
    const p = t - 10;                                  // the last probe answers normally
    t1.headers(0, p, p + 8, 200); t1.done(0, p, p + 8, p + 80, true, 200);
    expect(t1.probeUntil[0]).toBe(-Infinity);
    expect(t1.probeStreak[0]).toBe(0);
    const doc = t2.merge(new ArrayBuffer(0), i2.addresses(), slotOf);
    t1.merge(doc, i1.addresses(), slotOf);             // the other VM's older wait does not come back
    expect(t1.probeUntil[0]).toBe(-Infinity);
    t2.merge(t1.merge(new ArrayBuffer(0), i1.addresses(), slotOf), i2.addresses(), slotOf);
    expect(t2.probeUntil[0]).toBe(-Infinity);
  });
});

describe("in-band boundaries", () => {
  it("a 500 is an error, a 499 is an answer", () => {
    const f = new Fixture(80, 0, 80, 0);
    f.answer(0, 0, 2, 2, 499);
    expect(f.table.errors).toBe(0);
    f.answer(0, 10, 2, 2, 500);
    expect(f.table.errors).toBe(1);
  });

  it("probes neither an instance whose data is stale nor one with no free slot by our estimate", () => {
    const f = new Fixture(800, 0, 80, 0);
    const pr = new Prober(probeEvery(0.01), 1000);
    const t: f64 = 5000;
    // a (priced out: 10x b): idle, but every one of its 4 slots busy with our requests; b is the
    // cheapest, never a probe target
    f.inflight[0] = 4;
    expect(probePick(f.plan, f.table, pr, f.inflight.dataStart, t, f.rng)).toBe(-1);
    f.inflight[0] = 3;
    f.table.sent(1, t);
    expect(probePick(f.plan, f.table, pr, f.inflight.dataStart, t, f.rng)).toBe(0);
    // the same two instances with data that went stale at t = 100
    const ca = candidateFrom(inst("a:1", 800, 0), MODEL_CONDITIONAL, 100, 0, false);
    const cb = candidateFrom(inst("b:1", 80, 0), MODEL_CONDITIONAL, 100, 0, false);
    ca.slot = 0; cb.slot = 1;
    const stale = new Plan([ca, cb]);
    expect(probePick(stale, f.table, new Prober(probeEvery(0.01), 1000), f.inflight.dataStart, t, f.rng)).toBe(-1);
    expect(probePick(stale, f.table, new Prober(probeEvery(0.01), 1000), f.inflight.dataStart, 99, f.rng)).toBe(0);
  });

  it("never probes a candidate whose slot the in-band table does not hold yet", () => {
    const ca = candidateFrom(inst("a:1", 80, 0), MODEL_CONDITIONAL, 1e12, 0, false);
    const cb = candidateFrom(inst("b:1", 800, 0), MODEL_CONDITIONAL, 1e12, 0, false); // priced out: a probe target
    ca.slot = 0; cb.slot = 1;
    const table = new InbandTable();
    table.sync(1, [0]); // slot 1 is not in the table
    table.sent(0, 5000);
    const inflight: Array<i32> = [0, 0];
    expect(probePick(new Plan([ca, cb]), table, new Prober(probeEvery(0.01), 1000), inflight.dataStart, 5000, new Rng(1))).toBe(-1);
    table.sync(2, [0, 0]);
    expect(probePick(new Plan([ca, cb]), table, new Prober(probeEvery(0.01), 1000), inflight.dataStart, 5000, new Rng(1))).toBe(1);
  });

  it("never probes an unhealthy or link-degraded instance, however idle; a slow one (priced out) it does", () => {
    const f = new Fixture(80, 0, 80, 0);
    const t: f64 = 5000;
    f.table.sent(1, t); // b in use, a idle
    const down = inst("a:1", 80, 0);
    down.healthy = false;
    const cases = [candidateFrom(down, MODEL_CONDITIONAL, 1e12, 0, false), candidateFrom(inst("a:1", 80, 0), MODEL_CONDITIONAL, 1e12, 0, true, 10)];
    for (let k = 0; k < cases.length; k++) {
      const ca = cases[k];
      const cb = candidateFrom(inst("b:1", 80, 0), MODEL_CONDITIONAL, 1e12, 0, false);
      ca.slot = 0; cb.slot = 1;
      expect(probePick(new Plan([ca, cb]), f.table, new Prober(probeEvery(0.01), 1000), f.inflight.dataStart, t, f.rng)).toBe(-1);
    }
    const slow = inst("a:1", 80, 0);
    slow.p99Ms = 1000; // 10x its baseline: weight 0, skip reason slow
    const cs = candidateFrom(slow, MODEL_CONDITIONAL, 1e12, 0, false);
    const cb = candidateFrom(inst("b:1", 80, 0), MODEL_CONDITIONAL, 1e12, 0, false);
    cs.slot = 0; cb.slot = 1;
    expect(probePick(new Plan([cs, cb]), f.table, new Prober(probeEvery(0.01), 1000), f.inflight.dataStart, t, f.rng)).toBe(0);
  });
});

describe("in-band state across worker VMs", () => {
  it("adopts what another VM observed more recently, per signal, for planned addresses only", () => {
    const i1 = new Inflight(); const i2 = new Inflight();
    i1.slotFor("a:1"); i2.slotFor("b:1"); i2.slotFor("a:1");
    const t1 = new InbandTable(); t1.sync(i1.capacity(), i1.gen);
    const t2 = new InbandTable(); t2.sync(i2.capacity(), i2.gen);
    t1.sent(0, 100); t1.headers(0, 100, 180, 200);
    const doc = t1.merge(new ArrayBuffer(0), i1.addresses(), (a: string): i32 => a == "a:1" ? 0 : -1);
    const back = t2.merge(doc, i2.addresses(), (a: string): i32 => a == "a:1" ? 1 : a == "b:1" ? 0 : -1);
    expect(t2.hdrPeak[1]).toBe(80);
    expect(t2.hdrAt[1]).toBe(180);
    expect(t2.hdrPeak[0]).toBe(0);
    expect(back.byteLength).toBeGreaterThan(2);
    // a malformed document changes nothing and never traps
    const bad = new ArrayBuffer(5);
    store<u16>(changetype<usize>(bad), 9);
    t2.merge(bad, i2.addresses(), (a: string): i32 => -1);
    expect(t2.hdrPeak[1]).toBe(80);
  });

  it("publishes only the addresses it observed something for, and exactly as many entries as it says", () => {
    const i1 = new Inflight();
    i1.slotFor("a:1"); i1.slotFor("b:1"); i1.slotFor("c:1");
    const t1 = new InbandTable(); t1.sync(i1.capacity(), i1.gen);
    t1.sent(1, 100); t1.headers(1, 100, 180, 200); t1.done(1, 100, 180, 400, true, 200); // only b:1 answered
    t1.sent(1, 500); t1.headers(1, 500, 520, 503); // then failed once
    const doc = t1.merge(new ArrayBuffer(0), i1.addresses(), (a: string): i32 => a == "a:1" ? 0 : a == "b:1" ? 1 : a == "c:1" ? 2 : -1);
    expect(load<u16>(changetype<usize>(doc))).toBe(1);
    // another VM reads it: b:1 adopted, nothing for the others
    const i2 = new Inflight();
    i2.slotFor("a:1"); i2.slotFor("b:1"); i2.slotFor("c:1");
    const t2 = new InbandTable(); t2.sync(i2.capacity(), i2.gen);
    t2.merge(doc, i2.addresses(), (a: string): i32 => a == "a:1" ? 0 : a == "b:1" ? 1 : a == "c:1" ? 2 : -1);
    expect(t2.hdrAt[0]).toBe(0);
    expect(t2.hdrAt[2]).toBe(0);
    // every field of the entry arrives as written
    expect(t2.hdrPeak[1]).toBe(t1.hdrPeak[1]); expect(t2.hdrRef[1]).toBe(t1.hdrRef[1]); expect(t2.hdrAt[1]).toBe(t1.hdrAt[1]);
    expect(t2.eosPeak[1]).toBe(t1.eosPeak[1]); expect(t2.eosRef[1]).toBe(t1.eosRef[1]); expect(t2.eosAt[1]).toBe(t1.eosAt[1]);
    expect(t2.err[1]).toBe(t1.err[1]); expect(t2.errAt[1]).toBe(t1.errAt[1]);
    expect(t2.lastSentMs[1]).toBe(t1.lastSentMs[1]);
    expect(t2.hdrPrev[1]).toBe(t1.hdrPrev[1]); expect(t2.eosPrev[1]).toBe(t1.eosPrev[1]);
    expect(t1.eosPeak[1]).toBeGreaterThan(0);
    expect(t1.err[1]).toBeGreaterThan(0);
  });
});

describe("inband configuration", () => {
  it("ships on, with the documented defaults", () => {
    const r = parseConfig('{"agent":{"cluster":"a"},"link":{"services":[]},"loadAware":{"services":[{"authorities":["x.example"],"service":"s"}]}}');
    const ib = r.config!.loadAware.services[0].inband;
    expect(ib.enabled).toBe(true);
    expect(ib.tauMs).toBe(2000);
    expect(ib.refTauMs).toBe(15000);
    expect(ib.slowdownThreshold).toBe(5.0);
    expect(ib.errorTauMs).toBe(2000);
    expect(ib.errorWeight).toBe(10.0);
    expect(ib.probeShare).toBe(0.01);
    expect(ib.probeIdleMs).toBe(1000);
    expect(ib.orca).toBe(true);
    expect(ib.stripOrca).toBe(true);
    expect(ib.orcaQueueMetric).toBe("queue");
    expect(ib.orcaKvCacheMetric).toBe("kv_cache_utilization");
  });

  it("refuses a probe share above 1 % and unknown keys, naming the field", () => {
    const base = '{"agent":{"cluster":"a"},"link":{"services":[]},"loadAware":{"services":[{"authorities":["x.example"],"service":"s","inband":';
    const r = parseConfig(base + '{"probeShare":0.05}}]}}');
    expect(r.config).toBeNull();
    expect(r.error.includes("loadAware.services[0].inband.probeShare")).toBe(true);
    const u = parseConfig(base + '{"tau":5}}]}}');
    expect(u.config).toBeNull();
    expect(u.error.includes("tau")).toBe(true);
    const ok = parseConfig(base + '{"enabled":false,"probeShare":0,"orcaQueueMetric":"waiting"}}]}}');
    expect(ok.config!.loadAware.services[0].inband.enabled).toBe(false);
    expect(ok.config!.loadAware.services[0].inband.orcaQueueMetric).toBe("waiting");
  });
});
