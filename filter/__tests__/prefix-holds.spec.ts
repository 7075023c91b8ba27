// A prompt no instance holds, in a burst: the arrivals behind its prefill are shared out in the
// prefixes each worker holds (choice/scorer-holds.ts; issue 20, docs/benchmarks/llm-r11a.md).
// The shuffled cold burst's losing decision (seed 1, position 309) in miniature: the last group
// starts while worker 5 holds 7 groups and the others 8; worker 5's groups drew more early hits,
// so its queue is a little longer and the prefill sent there as much as at worker 6, which holds
// a group more. In the prefill share worker 6 took the group (9 groups, makespan 14.14 s where
// 12.88 s is possible); in the share of prefixes held, worker 5.
import { Snapshot, InstanceState } from "../assembly/lib/snapshot";
import { InstanceLlm, MODEL_BASE } from "../assembly/lib/snapshot-llm";
import { PICKER_BAND } from "../assembly/lib/choose";
import { RequestCost, CostParams } from "../assembly/lib/choice/score-request";
import { PrefixHolds, shareByHolds } from "../assembly/lib/choice/scorer-holds";
import { pickForRequest, RequestPick } from "../assembly/lib/choose-request";
import { CRIT_STANDARD } from "../assembly/lib/criticality";
import { Rng } from "../assembly/lib/inflight";
import { LlmFixture } from "./llm-fixture";

const N = 8;
const NH = 142; // 2,271 tokens at 16 tokens per 64-byte block
const MISS: f64 = 227.1, HIT: f64 = 14.3; // at the fallback 0.1 ms per token

function coldSnap(): Snapshot {
  const s = new Snapshot();
  for (let i = 0; i < N; i++) {
    const a = "10.0.0." + (i + 1).toString() + ":80";
    const st = new InstanceState();
    st.service = "llm"; st.addr = a; st.healthy = true; st.rho = 0.3; st.esMs = 1000; st.es2Ms2 = 2e6;
    st.queueDepth = 0; st.slots = 1; st.slotsFloor = true;
    s.instances.push(st);
    const l = new InstanceLlm();
    l.service = "llm"; l.addr = a; l.models = ["m"]; l.modelFlags = [MODEL_BASE]; l.maxLoras = 0; l.kvCacheUsage = 0.1;
    l.prefillMsPerToken = NaN; l.decodeMsPerToken = NaN; l.decodeIdleMs = NaN; l.decodeMsPerSeq = NaN;
    s.llm.push(l);
  }
  return s;
}

function noShed(): CostParams {
  const cp = new CostParams();
  cp.shed.set(100, 100, 100, 100, Infinity, Infinity, 0.2);
  return cp;
}

/** A new group's first request: its prompt's blocks held nowhere. */
function miss(f: LlmFixture, holds: PrefixHolds): RequestCost {
  const rc = new RequestCost();
  rc.recent = f.recent;
  rc.holds = holds;
  rc.modelCol = f.lp.modelColumn("m");
  rc.cachedBlocks = new StaticArray<i32>(N);
  rc.promptTokens = 2271;
  rc.outTokens = 256;
  const h = new StaticArray<u64>(256);
  for (let j = 0; j < NH; j++) h[j] = (<u64>999 << 32) | <u64>(j + 1);
  rc.hashes = h; rc.nh = NH;
  return rc;
}

/**
 * The burst so far, as this VM sent it: worker i started `groups` prefixes and sent `hits` hits
 * of them (hits first, then the group starts: what is left of its queue is group starts), from
 * `fromMs` on; `sends` requests within the last prefill.
 */
function burst(f: LlmFixture, holds: PrefixHolds, sends: i32): void {
  for (let i = 0; i < N; i++) {
    const groups = i == 5 ? 7 : 8;
    const hits = i == 5 ? 36 : i == 6 ? 22 : 30;
    const from: f64 = i == 6 ? 0 : i == 5 ? 150 : 300;
    for (let k = 0; k < hits; k++) f.pending.charge(i, from, HIT);
    for (let k = 0; k < groups; k++) { f.pending.charge(i, from, MISS); f.pending.started(i); }
    holds.starts += <f64>groups;
    holds.hits += <f64>hits;
  }
  for (let k = 0; k < sends; k++) f.recent.record(990 + <f64>k / 100);
}

function send(f: LlmFixture, rc: RequestCost, nowMs: f64, seed: u32): i32 {
  const out = new RequestPick();
  pickForRequest(f.plan, f.lp, f.inflight, f.pending, nowMs, PICKER_BAND, 0.1, new Rng(seed), rc, noShed(), CRIT_STANDARD, out);
  return out.pick.index;
}

describe("the hits still to come of the prefixes held (scorer-holds.ts)", () => {
  it("a miss everywhere in a burst goes to the worker holding the fewest prefixes, not the shortest queue", () => {
    for (let k = 0; k < 20; k++) {
      const f = new LlmFixture(coldSnap());
      const holds = new PrefixHolds();
      burst(f, holds, 256);
      const rc = miss(f, holds);
      const i = send(f, rc, 1000, <u32>(k + 1));
      expect(i).toBe(5);
      // the start is counted where it went: worker 5 now holds 8
      expect(f.pending.startsAt(5)).toBe(8.0);
      expect(holds.starts).toBe(64.0);
    }
  });

  it("fewer sends within one prefill than prefixes held: the prefill share, as before", () => {
    // a Poisson-like rate (8 requests within 227 ms, 63 prefixes held): most prefixes draw no hit
    // within the horizon, and which do is what the prefill sent tracks
    expect(shareByHolds(true, NH, holdsOf(63, 245), 8, 63)).toBe(false);
    expect(shareByHolds(true, NH, holdsOf(63, 245), 63, 63)).toBe(true);
    // a prompt held somewhere, no blocks hashed, or no hit seen yet: never
    expect(shareByHolds(false, NH, holdsOf(63, 245), 256, 63)).toBe(false);
    expect(shareByHolds(true, 0, holdsOf(63, 245), 256, 63)).toBe(false);
    expect(shareByHolds(true, NH, holdsOf(63, 0), 256, 63)).toBe(false);
    expect(shareByHolds(true, NH, holdsOf(0, 0), 256, 0)).toBe(false);
    const f = new LlmFixture(coldSnap());
    const holds = new PrefixHolds();
    burst(f, holds, 8);
    expect(send(f, miss(f, holds), 1000, 1)).toBe(6);
  });

  it("the counts: a start where no candidate holds a block, a hit where the one chosen does", () => {
    const f = new LlmFixture(coldSnap());
    const holds = new PrefixHolds();
    const a = miss(f, holds);
    const i = send(f, a, 1000, 1);
    expect(holds.starts).toBe(1.0);
    expect(f.pending.startsAt(i)).toBe(1.0);
    const b = miss(f, holds);
    b.cachedBlocks[i] = 128;
    const j = send(f, b, 1001, 2);
    expect(j).toBe(i);
    expect(holds.hits).toBe(1.0);
    expect(holds.starts).toBe(1.0);
    expect(holds.perPrefix()).toBe(1.0);
    // a freed and reused slot forgets the prefixes it held
    const gen: Array<u32> = [0, 0, 0, 0, 0, 0, 0, 0];
    f.pending.sync(N, gen);
    gen[i] = 7;
    f.pending.sync(N, gen);
    expect(f.pending.startsAt(i)).toBe(0.0);
  });
});

function holdsOf(starts: f64, hits: f64): PrefixHolds {
  const h = new PrefixHolds();
  h.starts = starts; h.hits = hits;
  return h;
}
