// Pending prefill of the same leading blocks is shared work, not a wait (lib/shared-prefill.ts):
// the generated-shared-prefix burst's second request of a group goes to the worker computing its
// prefix, on a fleet with measured per-token terms and on a cold one (nothing measured, capacity
// unknown: priced with the configured fallback prefill rate).
import { Snapshot, InstanceState } from "../assembly/lib/snapshot";
import { InstanceLlm, MODEL_BASE } from "../assembly/lib/snapshot-llm";
import { PICKER_BAND } from "../assembly/lib/choose";
import { RequestCost, CostParams } from "../assembly/lib/choice/score-request";
import { pickForRequest, RequestPick } from "../assembly/lib/choose-request";
import { CRIT_STANDARD } from "../assembly/lib/criticality";
import { Rng } from "../assembly/lib/inflight";
import { SharedPrefill, sharedPendingMs } from "../assembly/lib/shared-prefill";
import { PendingPrefill, QUEUE_SPANS } from "../assembly/lib/pending-prefill";
import { LlmFixture } from "./llm-fixture";

const N = 8;
const NH = 142; // 2,271 tokens at 16 tokens per 64-byte block

/** `warm`: per-token terms measured (0.1 ms prefill, 20 ms decode); else a cold fleet (none, slots a floor) */
function fleet(warm: bool): LlmFixture {
  const snap = new Snapshot();
  for (let i = 0; i < N; i++) {
    const a = "10.0.0." + (i + 1).toString() + ":80";
    const s = new InstanceState();
    s.service = "llm"; s.addr = a; s.healthy = true; s.rho = 0; s.esMs = 1000; s.es2Ms2 = 2e6; s.queueDepth = 0;
    s.slots = warm ? 32 : 1; s.slotsFloor = !warm;
    snap.instances.push(s);
    const l = new InstanceLlm();
    l.service = "llm"; l.addr = a; l.models = ["m"]; l.modelFlags = [MODEL_BASE]; l.maxLoras = 0; l.kvCacheUsage = 0.01;
    if (warm) { l.prefillMsPerToken = 0.1; l.decodeMsPerToken = 20; }
    else { l.prefillMsPerToken = NaN; l.decodeMsPerToken = NaN; }
    snap.llm.push(l);
  }
  return new LlmFixture(snap);
}

/** Chain hashes of a group's prompt: blocks 0..127 the group's prefix, the rest the request's own question. */
function hashes(group: u64, question: u64): StaticArray<u64> {
  const h = new StaticArray<u64>(256);
  for (let j = 0; j < NH; j++) h[j] = j < 128 ? (group << 32) | <u64>(j + 1) : (group << 48) | (question << 32) | <u64>(j + 1);
  return h;
}

function request(f: LlmFixture, h: StaticArray<u64>, nh: i32): RequestCost {
  const rc = new RequestCost();
  rc.modelCol = f.lp.modelColumn("m");
  rc.cachedBlocks = new StaticArray<i32>(N);
  rc.promptTokens = 2271;
  rc.outTokens = 256;
  rc.hashes = h;
  rc.nh = nh;
  return rc;
}

function noShed(): CostParams {
  const cp = new CostParams();
  cp.shed.set(100, 100, 100, 100, Infinity, Infinity, 0.2);
  return cp;
}

/** The group's first request, then its second (whose prefix the index records at the first's
 *  instance) at the same instant; returns [first's instance, second's]. `nh` 0: no hashes. */
function twoOfAGroup(warm: bool, nh: i32, band: f64 = 0.1): StaticArray<i32> {
  const f = fleet(warm);
  const out = new RequestPick();
  const a = request(f, hashes(1, 1), nh);
  pickForRequest(f.plan, f.lp, f.inflight, f.pending, 1000, PICKER_BAND, 0.1, new Rng(7), a, noShed(), CRIT_STANDARD, out);
  const first = out.pick.index;
  const b = request(f, hashes(1, 2), nh);
  b.cachedBlocks[first] = 128;
  pickForRequest(f.plan, f.lp, f.inflight, f.pending, 1000, PICKER_BAND, band, new Rng(8), b, noShed(), CRIT_STANDARD, out);
  const r = new StaticArray<i32>(2);
  r[0] = first; r[1] = out.pick.index;
  return r;
}

describe("shared pending prefill", () => {
  it("sharedPendingMs: the shared blocks come first in the charge and elapse from its start", () => {
    expect(sharedPendingMs(1000, 200, 1000)).toBeCloseTo(200);
    expect(sharedPendingMs(1500, 200, 1000)).toBeCloseTo(200);   // queued behind other work: all of it ahead
    expect(sharedPendingMs(1000, 200, 1150)).toBeCloseTo(50);
    expect(sharedPendingMs(1000, 200, 1200)).toBe(0.0);
    expect(sharedPendingMs(1000, NaN, 1000)).toBe(0.0);
    expect(sharedPendingMs(1000, Infinity, 1000)).toBe(0.0);
  });

  it("a later prompt shares the span's blocks up to its deepest matching checkpoint, only while pending", () => {
    const s = new SharedPrefill();
    s.note(2, hashes(1, 1), NH, 0, 1000, 1227, 1.6);
    // same prefix, 128 blocks matched: checkpoint 127 agrees → 128 blocks × 1.6 ms
    expect(s.sharedMs(2, hashes(1, 2), NH, 128, 1000)).toBeCloseTo(204.8);
    // another group's prompt: no checkpoint agrees
    expect(s.sharedMs(2, hashes(2, 1), NH, 128, 1000)).toBe(0.0);
    // fewer blocks matched (the index remembered 40): up to checkpoint 31
    expect(s.sharedMs(2, hashes(1, 2), NH, 40, 1000)).toBeCloseTo(32 * 1.6);
    // another slot, after the charge is done, after the slot was cleared
    expect(s.sharedMs(3, hashes(1, 2), NH, 128, 1000)).toBe(0.0);
    expect(s.sharedMs(2, hashes(1, 2), NH, 128, 1300)).toBe(0.0);
    s.clear(2);
    expect(s.sharedMs(2, hashes(1, 2), NH, 128, 1000)).toBe(0.0);
    // blocks already sent there before (from = 128) are not this span's work
    s.note(4, hashes(1, 1), NH, 128, 1000, 1023, 1.6);
    expect(s.sharedMs(4, hashes(1, 2), NH, 128, 1000)).toBe(0.0);
  });

  it("a pending prefix span is kept: suffix spans never evict it, and a new group's prefix replaces the oldest", () => {
    // four groups' prefixes queued at slot 1 (each 227 ms, one after the other from 1000 ms)
    const s = new SharedPrefill();
    for (let g = 1; g <= 4; g++) s.note(1, hashes(<u64>g, 1), NH, 0, 1000 + 227 * <f64>(g - 1), 1000 + 227 * <f64>g, 1.6, 1000);
    // a fifth group's prefix, then four of its requests charging only their suffix (14 blocks each)
    s.note(1, hashes(5, 1), NH, 0, 1908, 2135, 1.6, 1000);
    for (let q = 2; q <= 5; q++) s.note(1, hashes(5, <u64>q), NH, 128, 2135, 2157, 1.6, 1000);
    // the fifth group's next request still shares its prefix (before: spans replaced in turn, the
    // fourth suffix evicted it: 0)
    expect(s.sharedMs(1, hashes(5, 9), NH, 128, 1000)).toBeCloseTo(204.8);
    // the oldest group's prefix made room for it; the others are still shared
    expect(s.sharedMs(1, hashes(1, 9), NH, 128, 1000)).toBe(0.0);
    expect(s.sharedMs(1, hashes(4, 9), NH, 128, 1000)).toBeCloseTo(204.8);
  });

  it("PendingPrefill.sharedMs never exceeds this VM's own prefill ahead", () => {
    const p = new PendingPrefill();
    p.chargeBlocks(1, 1000, 50, hashes(1, 1), NH, 0, 1.6); // a short charge: 50 ms ahead
    expect(p.sharedMs(1, 1000, hashes(1, 2), NH, 128)).toBeCloseTo(50);
  });

  it("warm fleet: the group's second request joins the worker prefilling its prefix", () => {
    const r = twoOfAGroup(true, NH);
    expect(r[1]).toBe(r[0]);
    const s = twoOfAGroup(true, NH, 0);
    expect(s[1]).toBe(s[0]);
  });

  it("cold fleet (no term measured, capacity unknown): the same, priced with the fallback prefill rate", () => {
    const r = twoOfAGroup(false, NH);
    expect(r[1]).toBe(r[0]);
  });

  it("without the prompt's hashes the pending prefill stays a wait (the pricing before): the holder is the dearer", () => {
    const r = twoOfAGroup(true, 0, 0);
    expect(r[1]).not.toBe(r[0]);
  });
});

describe("requests queued ahead (PendingPrefill.requestsIn)", () => {
  it("counts this VM's queue request by request, back from its end; a new period starts when the queue empties", () => {
    const p = new PendingPrefill();
    p.grow(2);
    // a group's first request (227 ms) and three suffixes (13 ms) at one instant: 4 requests, 266 ms
    p.charge(0, 1000, 227);
    p.charge(0, 1000, 13); p.charge(0, 1000, 13); p.charge(0, 1000, 13);
    expect(p.requestsIn(0, p.aheadMs(0, 1000), 227)).toBeCloseTo(4);
    // 133 ms later the three suffixes all still wait behind the rest of the first (94 of its 227 ms):
    // 3.41 requests. Before (the busy period's mean charge, 66.5 ms): 133 ms counted as 2 — the
    // Poisson 90 % trace (llm-r8.md): a miss priced as delaying one request where three hits waited
    expect(p.requestsIn(0, p.aheadMs(0, 1133), 227)).toBeCloseTo(3 + 94.0 / 227.0, 3);
    // the last ms only (the part a request shares at the front left out): the three suffixes
    expect(p.requestsIn(0, 39, 227)).toBeCloseTo(3);
    expect(p.requestsIn(0, 26, 227)).toBeCloseTo(2);
    // the queue emptied (done at 1266): the next charge starts a new period
    p.charge(0, 2000, 100);
    expect(p.requestsIn(0, p.aheadMs(0, 2000), 227)).toBeCloseTo(1);
    // no charge of this VM there (another VM's prefill): in prefills of the request's size
    expect(p.requestsIn(1, 454, 227)).toBeCloseTo(2);
    expect(p.requestsIn(1, 0, 227)).toBe(0);
    // a freed and reused slot forgets its period (sync with a new generation)
    p.sync(2, [0, 7]);
    expect(p.requestsIn(1, 454, 227)).toBeCloseTo(2);
  });

  it("bounded: beyond QUEUE_SPANS charges in a busy period adjacent spans merge, the requests in them kept", () => {
    const p = new PendingPrefill();
    p.grow(1);
    // 100 charges of 10 ms at one instant: 16 spans hold them, 1 s of queue, 100 requests
    for (let k = 0; k < 100; k++) p.charge(0, 1000, 10);
    expect(p.spanN[0]).toBe(QUEUE_SPANS);
    expect(p.requestsIn(0, p.aheadMs(0, 1000), 10)).toBeCloseTo(100);
    // equal charges merge evenly: any tail is as many requests as tenths of it
    expect(p.requestsIn(0, 250, 10)).toBeCloseTo(25);
    // a miss (227 ms) behind them is one request at the end of the queue, not 22.7
    p.charge(0, 1000, 227);
    expect(p.requestsIn(0, 227, 10)).toBeCloseTo(1);
    expect(p.requestsIn(0, p.aheadMs(0, 1000), 10)).toBeCloseTo(101);
    // half of the queue done: the spans done by then are dropped at the next charge
    p.charge(0, 1500, 10);
    expect(p.spanN[0]).toBeLessThanOrEqual(QUEUE_SPANS);
    expect(p.requestsIn(0, p.aheadMs(0, 1500), 10)).toBeCloseTo(50 + 1 + 1);
  });
});
