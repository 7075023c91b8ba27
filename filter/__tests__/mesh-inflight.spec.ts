import { Inflight, meshDelta } from "../assembly/lib/inflight";
import {
  encodeReport, checkAnswer, applyAnswer, answerInfoMs, answerAgeMs, smoothAgeMs, MESH_AGE_UNKNOWN, wrapReceived, receivedAt, unwrapAnswer, meshExpiryMs,
  MESH_HEADER_BYTES, MESH_VERSION, MESH_ANSWER, MESH_REPORT,
} from "../assembly/lib/mesh-inflight";
import { parseConfig, DEFAULT_MESH_REPORT_MS } from "../assembly/lib/config";

/** An answer as the agent writes it (agent/src/mesh/inflight.ts encodeInflight). */
function answer(proxyId: u32, addrs: Array<string>, counts: Array<u32>, ageMs: u16 = 0): ArrayBuffer {
  let size = MESH_HEADER_BYTES;
  for (let i = 0; i < addrs.length; i++) size += 5 + String.UTF8.byteLength(addrs[i]);
  const b = new ArrayBuffer(size);
  const p = changetype<usize>(b);
  store<u8>(p, MESH_VERSION);
  store<u8>(p + 1, MESH_ANSWER);
  store<u16>(p + 2, ageMs);
  store<u32>(p + 4, proxyId);
  store<u64>(p + 8, 12345);
  store<u16>(p + 16, <u16>addrs.length);
  let o = p + <usize>MESH_HEADER_BYTES;
  for (let i = 0; i < addrs.length; i++) {
    const a = String.UTF8.encode(addrs[i]);
    store<u8>(o, <u8>a.byteLength);
    memory.copy(o + 1, changetype<usize>(a), a.byteLength);
    store<u32>(o + 1 + <usize>a.byteLength, counts[i]);
    o += 5 + <usize>a.byteLength;
  }
  return b;
}

function has(s: string, part: string): bool { return s.includes(part); }

function apply(f: Inflight, doc: ArrayBuffer): i32 {
  const c = checkAnswer(doc);
  expect(c.ok).toBe(true, c.error);
  return applyAnswer(doc, c, f);
}

describe("meshDelta", () => {
  it("adds the other proxies' change since the scrape (sends and completions), nothing when unknown", () => {
    expect(meshDelta(7, 3)).toBe(4);
    expect(meshDelta(3, 3)).toBe(0);
    expect(meshDelta(1, 5)).toBe(-4); // four of theirs completed since the scrape: the queue is shorter
    expect(meshDelta(-1, 3)).toBe(0); // unknown now
    expect(meshDelta(9, -1)).toBe(0); // unknown at the scrape: no reference, today's price
  });
});

describe("mesh in-flight in the price (Inflight.setMesh / rebase)", () => {
  it("prices q_scrape - n_all(at scrape) + n_all(now): the other proxies' sends since the scrape count", () => {
    const f = new Inflight();
    const s = f.slotFor("a:1");
    f.inc(s); // ours: 1
    f.setMesh(s, 10); // 10 from other proxies, before the scrape
    expect(f.rebase(s, 1000)).toBe(1); // the scrape's queue holds all 11; the reference is our own 1
    expect(f.total[s]).toBe(1); // backlog = q - 1 + 1 = q
    f.setMesh(s, 14); // 4 more sent by other proxies since the scrape
    f.inc(s); // and one by us
    expect(f.total[s]).toBe(6); // backlog = q - 1 + 6 = q + 5
    // the same scrape republished: the reference does not move
    expect(f.rebase(s, 1000)).toBe(1);
    expect(f.total[s]).toBe(6);
    // a new scrape sees all of them: the increase starts again from zero
    expect(f.rebase(s, 2000)).toBe(2);
    expect(f.total[s]).toBe(2);
  });

  it("the workers' merge keeps the mesh increase; inc/dec move the total as before", () => {
    const f = new Inflight();
    const s = f.slotFor("a:1");
    f.setMesh(s, 2);
    f.rebase(s, 1000);
    f.setMesh(s, 5);
    f.merge(new ArrayBuffer(0), 1, 1000, 500);
    expect(f.total[s]).toBe(3);
    f.inc(s);
    expect(f.total[s]).toBe(4);
    expect(f.own(s)).toBe(1);
    f.dec(s);
    expect(f.total[s]).toBe(3);
  });

  it("an expired answer (forgetMesh) prices exactly as without mesh in-flight, and so does the next scrape", () => {
    const f = new Inflight();
    const s = f.slotFor("a:1");
    f.inc(s);
    const without = f.total[s];
    f.setMesh(s, 3);
    f.rebase(s, 1000);
    f.setMesh(s, 9);
    expect(f.total[s]).toBe(without + 6);
    f.forgetMesh();
    expect(f.meshCount(s)).toBe(-1);
    expect(f.total[s]).toBe(without);
    f.rebase(s, 2000); // scraped while unknown: no reference until a scrape with known counts
    f.setMesh(s, 20);
    expect(f.total[s]).toBe(without);
    f.rebase(s, 3000);
    f.setMesh(s, 22);
    expect(f.total[s]).toBe(without + 2);
  });

  it("takes the reference from the tick history at the scrape's time, not at the snapshot's adoption", () => {
    const f = new Inflight();
    const s = f.slotFor("a:1");
    f.setMesh(s, 2); f.meshInfoMs = 1000; // counts as fresh as the tick (their age: the next test)
    f.record(1000);
    f.inc(s); f.setMesh(s, 6); f.meshInfoMs = 1020;
    f.record(1020);
    f.inc(s); f.setMesh(s, 9); f.meshInfoMs = 1040;
    f.record(1040);
    // scraped at 1010, adopted at 1040: the counts of the first tick after it (1020: own 1, others 6)
    expect(f.rebase(s, 1010)).toBe(1);
    expect(f.total[s]).toBe(2 + 3);
    // a scrape older than the history: the oldest tick (others unknown then: no increase counted)
    const g = new Inflight();
    const t = g.slotFor("a:1");
    g.record(5000);
    g.inc(t); g.setMesh(t, 4);
    expect(g.rebase(t, 100)).toBe(0);
    expect(g.total[t]).toBe(1);
    // a scrape at (or after) the last tick: what was sent since that tick may be in its queue: now
    g.inc(t);
    expect(g.rebase(t, 5001)).toBe(2);
  });

  it("takes the other proxies' reference from the first tick whose counts were taken after the scrape", () => {
    // answers 35 ms old when adopted: the counts of the tick after the scrape describe the
    // instance before it (the scraped queue already holds the sends of that last interval)
    const f = new Inflight();
    const s = f.slotFor("a:1");
    const counts: Array<i32> = [2, 6, 9, 12];
    for (let i = 0; i < 4; i++) {
      f.setMesh(s, counts[i]);
      f.meshInfoMs = <f64>(1000 + 20 * i) - 35;
      f.record(<f64>(1000 + 20 * i));
    }
    f.inc(s);
    // scraped at 1010: the tick at 1020 holds counts from 985, 1040 from 1005, 1060 from 1025
    expect(f.rebase(s, 1010)).toBe(0);
    expect(f.total[s]).toBe(1); // others 12 now, 12 at the scrape: only our own request adds
    f.setMesh(s, 15);
    expect(f.total[s]).toBe(1 + 3);
  });

  it("a scrape newer than every recorded count settles its reference on the first tick after it", () => {
    const f = new Inflight();
    const s = f.slotFor("a:1");
    f.setMesh(s, 4); f.meshInfoMs = 1025;
    f.record(1060);
    expect(f.rebase(s, 1050)).toBe(0); // counts in force were taken at 1025: before the scrape
    f.setMesh(s, 7); f.meshInfoMs = 1045; // still before it: the reference stays provisional
    f.record(1080);
    expect(f.total[s]).toBe(7 - 4);
    f.setMesh(s, 9); f.meshInfoMs = 1055; // the first counts taken after the scrape: the reference
    f.record(1100);
    expect(f.total[s]).toBe(0);
    f.setMesh(s, 11);
    expect(f.total[s]).toBe(2);
    // counts in force already newer than the scrape: they are the reference at once
    expect(f.rebase(s, 1050)).toBe(0); // the same scrape: nothing moves
    f.meshInfoMs = 1200;
    f.rebase(s, 1190);
    expect(f.total[s]).toBe(0);
    // an expired answer: the info time is unknown again
    f.forgetMesh();
    expect(f.meshInfoMs).toBe(-1);
  });

  it("a freed slot forgets its remote counts", () => {
    const f = new Inflight();
    const s = f.slotFor("a:1");
    f.setMesh(s, 4);
    f.beginEpoch();
    f.sweep(0, 10);
    f.sweep(100, 10);
    const t = f.slotFor("b:1");
    expect(f.meshCount(t)).toBe(-1);
  });
});

describe("the report (encodeReport)", () => {
  it("carries this proxy's own counts (all its workers, not the other proxies'), non-zero only", () => {
    const f = new Inflight();
    const a = f.slotFor("10.0.0.1:8000");
    const b = f.slotFor("10.0.0.2:8000");
    f.slotFor("10.0.0.3:8000"); // nothing in flight: not sent
    f.inc(a); f.inc(a); f.inc(b);
    f.setMesh(a, 50); // the other proxies' counts never go back to the agent
    const doc = encodeReport(f, 77, 50, 9000);
    const p = changetype<usize>(doc);
    expect(load<u8>(p)).toBe(MESH_VERSION);
    expect(load<u8>(p + 1)).toBe(MESH_REPORT);
    expect(load<u16>(p + 2)).toBe(50);
    expect(load<u32>(p + 4)).toBe(77);
    expect(load<u64>(p + 8)).toBe(9000);
    expect(load<u16>(p + 16)).toBe(2);
    expect(doc.byteLength).toBe(MESH_HEADER_BYTES + 2 * (5 + 13));
    let o = p + <usize>MESH_HEADER_BYTES;
    expect(String.UTF8.decodeUnsafe(o + 1, load<u8>(o))).toBe("10.0.0.1:8000");
    expect(load<u32>(o + 14)).toBe(2);
    o += 18;
    expect(String.UTF8.decodeUnsafe(o + 1, load<u8>(o))).toBe("10.0.0.2:8000");
    expect(load<u32>(o + 14)).toBe(1);
  });

  it("is the header alone when nothing is in flight", () => {
    const f = new Inflight();
    f.slotFor("a:1");
    expect(encodeReport(f, 0, 20, 1).byteLength).toBe(MESH_HEADER_BYTES);
  });
});

describe("the answer (checkAnswer / applyAnswer)", () => {
  it("sets every live slot: named addresses their count, the others 0; unknown addresses allocate nothing", () => {
    const f = new Inflight();
    const a = f.slotFor("a:1");
    const b = f.slotFor("b:1");
    f.setMesh(b, 9);
    expect(apply(f, answer(5, ["a:1", "zz:9"], [3, 8]))).toBe(1);
    expect(f.meshCount(a)).toBe(3);
    expect(f.meshCount(b)).toBe(0);
    expect(f.slotOf("zz:9")).toBe(-1);
    expect(f.size()).toBe(2);
    expect(checkAnswer(answer(5, [], [])).proxyId).toBe(5);
  });

  it("refuses malformed answers, naming why, and a refused answer changes nothing", () => {
    const good = answer(1, ["a:1"], [3]);
    expect(has(checkAnswer(new ArrayBuffer(4)).error, "shorter")).toBe(true, checkAnswer(new ArrayBuffer(4)).error);
    const v = good.slice(0); store<u8>(changetype<usize>(v), 9);
    expect(has(checkAnswer(v).error, "version 9")).toBe(true, checkAnswer(v).error);
    const k = good.slice(0); store<u8>(changetype<usize>(k) + 1, MESH_REPORT);
    expect(has(checkAnswer(k).error, "not an answer")).toBe(true, checkAnswer(k).error);
    expect(has(checkAnswer(good.slice(0, good.byteLength - 1)).error, "cut off")).toBe(true, checkAnswer(good.slice(0, good.byteLength - 1)).error);
    const more = new ArrayBuffer(good.byteLength + 2);
    memory.copy(changetype<usize>(more), changetype<usize>(good), good.byteLength);
    expect(has(checkAnswer(more).error, "2 bytes after")).toBe(true, checkAnswer(more).error);
    const e = answer(1, [""], [3]);
    expect(has(checkAnswer(e).error, "empty address")).toBe(true, checkAnswer(e).error);
    const big = answer(1, ["a:1"], [0x80000000]);
    expect(has(checkAnswer(big).error, "out of range")).toBe(true, checkAnswer(big).error);
    expect(checkAnswer(good).ok).toBe(true);
  });

  it("states the age of its counts (0: not stated -- half a report interval)", () => {
    const c = checkAnswer(answer(1, ["a:1"], [2], 37));
    expect(c.ok).toBe(true);
    expect(c.ageMs).toBe(37);
    expect(answerInfoMs(5000, c.ageMs, 50)).toBe(4963);
    expect(checkAnswer(answer(1, ["a:1"], [2])).ageMs).toBe(0);
    expect(answerInfoMs(5000, 0, 50)).toBe(4975);
    expect(answerAgeMs(MESH_AGE_UNKNOWN, 50)).toBe(25); // "unknown" is no age (the answer is not applied)
  });

  it("smooths the stated ages: the scatter of one answer's mean over its reports goes, a systematic delay stays", () => {
    let a = smoothAgeMs(-1, 40);
    expect(a).toBe(40);
    // answers scattering 5..45 around 25: the running age stays near 25, never jumps to either end
    for (let i = 0; i < 200; i++) {
      a = smoothAgeMs(a, i % 2 == 0 ? 5 : 45);
      if (i > 30) { expect(a).toBeGreaterThan(20); expect(a).toBeLessThan(30); }
    }
    // every answer 30 ms older (another agent's exchange and hops): the running age follows
    for (let i = 0; i < 100; i++) a = smoothAgeMs(a, 55);
    expect(a).toBeGreaterThan(54);
  });

  it("travels to the other workers with its receive time", () => {
    const doc = answer(3, ["a:1"], [2]);
    const w = wrapReceived(doc, 123456);
    expect(receivedAt(w)).toBe(123456);
    const back = unwrapAnswer(w);
    expect(back.byteLength).toBe(doc.byteLength);
    expect(checkAnswer(back).ok).toBe(true);
    expect(receivedAt(new ArrayBuffer(3))).toBe(0);
  });

  it("expires after MESH_EXPIRE_REPORTS report intervals, never sooner than 100 ms", () => {
    expect(meshExpiryMs(50)).toBe(250);
    expect(meshExpiryMs(20)).toBe(100);
    expect(meshExpiryMs(1000)).toBe(5000);
  });
});

describe("loadAware.meshReportMs", () => {
  it("defaults to on, about the tick; 0 turns it off; 1..19 and >10000 are refused by name", () => {
    const base = '{"agent":{"cluster":"a"},"link":{"services":[]},"loadAware":{"services":[]';
    const d = parseConfig(base + "}}");
    expect(d.error).toBe("");
    expect(d.config!.loadAware.meshReportMs).toBe(DEFAULT_MESH_REPORT_MS);
    expect(DEFAULT_MESH_REPORT_MS).toBeGreaterThanOrEqual(20);
    expect(d.config!.agent.inflightPath).toBe("/v1/inflight");
    expect(parseConfig(base + ',"meshReportMs":0}}').config!.loadAware.meshReportMs).toBe(0);
    expect(has(parseConfig(base + ',"meshReportMs":10}}').error, "loadAware.meshReportMs")).toBe(true, parseConfig(base + ',"meshReportMs":10}}').error);
    expect(has(parseConfig(base + ',"meshReportMs":20000}}').error, "loadAware.meshReportMs")).toBe(true, parseConfig(base + ',"meshReportMs":20000}}').error);
    expect(has(parseConfig('{"agent":{"cluster":"a","inflightPath":"x"},"link":{"services":[]}}').error, "agent.inflightPath")).toBe(true, parseConfig('{"agent":{"cluster":"a","inflightPath":"x"},"link":{"services":[]}}').error);
  });
});
