import { SnapshotStamp } from "../assembly/lib/snapshot";
import {
  isStale, isFutureDated, orderSnapshot, MAX_CLOCK_SKEW_MS, ORDER_ADOPT, ORDER_SAME, ORDER_OLDER, ORDER_FUTURE,
} from "../assembly/lib/freshness";

const NOW: u64 = 1764000000000;
const YEAR: u64 = 365 * 24 * 3600 * 1000;
const BOOT_A: u32 = 0xa;
const BOOT_B: u32 = 0xb;

function stamp(boot: u32, seq: u64, gen: u64): SnapshotStamp { return new SnapshotStamp(boot, seq, gen); }

describe("isStale", () => {
  it("ages by the proxy's clock, staleness bound inclusive", () => {
    expect(isStale(2000, 1000, 1000, MAX_CLOCK_SKEW_MS)).toBe(false);
    expect(isStale(2001, 1000, 1000, MAX_CLOCK_SKEW_MS)).toBe(true);
  });
  it("a snapshot dated ahead within the skew is fresh (age 0); beyond it, stale", () => {
    expect(MAX_CLOCK_SKEW_MS).toBe(2000);
    expect(isStale(NOW, NOW + 1500, 1000, MAX_CLOCK_SKEW_MS)).toBe(false);
    expect(isStale(NOW, NOW + 2000, 1000, MAX_CLOCK_SKEW_MS)).toBe(false);
    expect(isStale(NOW, NOW + 2001, 1000, MAX_CLOCK_SKEW_MS)).toBe(true);
    expect(isStale(NOW, NOW + 10000, 60000, MAX_CLOCK_SKEW_MS)).toBe(true);  // +10 s skew
    expect(isStale(NOW, NOW + YEAR, 3600000, MAX_CLOCK_SKEW_MS)).toBe(true); // +1 year
  });
  it("u64 extremes do not wrap", () => {
    expect(isStale(NOW, u64.MAX_VALUE, 1000, MAX_CLOCK_SKEW_MS)).toBe(true);
    expect(isStale(NOW, 0, 1000, MAX_CLOCK_SKEW_MS)).toBe(true);
    expect(isFutureDated(0, u64.MAX_VALUE, MAX_CLOCK_SKEW_MS)).toBe(true);
    expect(isFutureDated(u64.MAX_VALUE, 0, MAX_CLOCK_SKEW_MS)).toBe(false);
  });
});

describe("orderSnapshot", () => {
  it("the first snapshot is adopted unless it is dated beyond the skew", () => {
    expect(orderSnapshot(null, stamp(BOOT_A, 1, NOW), NOW, MAX_CLOCK_SKEW_MS)).toBe(ORDER_ADOPT);
    expect(orderSnapshot(null, stamp(BOOT_A, 1, NOW + YEAR), NOW, MAX_CLOCK_SKEW_MS)).toBe(ORDER_FUTURE);
  });

  it("within one boot, seq orders: newer adopted, same kept, older refused", () => {
    const held = stamp(BOOT_A, 100, NOW);
    expect(orderSnapshot(held, stamp(BOOT_A, 101, NOW), NOW, MAX_CLOCK_SKEW_MS)).toBe(ORDER_ADOPT);
    expect(orderSnapshot(held, stamp(BOOT_A, 100, NOW), NOW, MAX_CLOCK_SKEW_MS)).toBe(ORDER_SAME);
    expect(orderSnapshot(held, stamp(BOOT_A, 99, NOW + 500), NOW, MAX_CLOCK_SKEW_MS)).toBe(ORDER_OLDER);
    // a newer seq with an earlier date (agent clock stepped back) is still newer
    expect(orderSnapshot(held, stamp(BOOT_A, 101, NOW - 30000), NOW, MAX_CLOCK_SKEW_MS)).toBe(ORDER_ADOPT);
  });

  it("+1 year: refused, and it never keeps fresh snapshots out (it was never held)", () => {
    const held = stamp(BOOT_A, 100, NOW);
    expect(orderSnapshot(held, stamp(BOOT_A, 101, NOW + YEAR), NOW, MAX_CLOCK_SKEW_MS)).toBe(ORDER_FUTURE);
    // the fresh snapshots that follow have higher seqs and are adopted
    expect(orderSnapshot(held, stamp(BOOT_A, 102, NOW + 100), NOW + 100, MAX_CLOCK_SKEW_MS)).toBe(ORDER_ADOPT);
  });

  it("+10 s skew is refused; within the skew it is adopted and a later seq still replaces it", () => {
    const held = stamp(BOOT_A, 100, NOW);
    expect(orderSnapshot(held, stamp(BOOT_A, 101, NOW + 10000), NOW, MAX_CLOCK_SKEW_MS)).toBe(ORDER_FUTURE);
    const ahead = stamp(BOOT_A, 101, NOW + 1500);
    expect(orderSnapshot(held, ahead, NOW, MAX_CLOCK_SKEW_MS)).toBe(ORDER_ADOPT);
    expect(orderSnapshot(ahead, stamp(BOOT_A, 102, NOW + 10), NOW + 10, MAX_CLOCK_SKEW_MS)).toBe(ORDER_ADOPT);
  });

  it("a restarted agent (new boot, lower seq and earlier clock) takes over at once", () => {
    const held = stamp(BOOT_A, NOW * 1000 + 500, NOW);
    const restarted = stamp(BOOT_B, (NOW - 60000) * 1000, NOW - 60000);
    expect(orderSnapshot(held, restarted, NOW, MAX_CLOCK_SKEW_MS)).toBe(ORDER_ADOPT);
    // and the old boot's seq is no longer the measure: the new boot's next seq is adopted
    expect(orderSnapshot(restarted, stamp(BOOT_B, (NOW - 60000) * 1000 + 1, NOW - 59990), NOW, MAX_CLOCK_SKEW_MS)).toBe(ORDER_ADOPT);
  });

  it("a held snapshot that the proxy's clock left beyond the skew does not keep older seqs out", () => {
    // the proxy's clock stepped back 1 h after the held snapshot was adopted
    const held = stamp(BOOT_A, 100, NOW);
    expect(orderSnapshot(held, stamp(BOOT_A, 99, NOW - 3600000), NOW - 3600000, MAX_CLOCK_SKEW_MS)).toBe(ORDER_ADOPT);
  });
});

describe("orderSnapshot outcomes", () => {
  it("are four distinct codes (the poll and shared-data paths act differently on each)", () => {
    const codes = [ORDER_ADOPT, ORDER_SAME, ORDER_OLDER, ORDER_FUTURE];
    for (let i = 0; i < codes.length; i++) for (let j = i + 1; j < codes.length; j++) expect(codes[i]).not.toBe(codes[j]);
    // each reached by the case it names
    expect(orderSnapshot(null, stamp(BOOT_A, 1, NOW), NOW, MAX_CLOCK_SKEW_MS)).toBe(ORDER_ADOPT);
    expect(orderSnapshot(stamp(BOOT_A, 5, NOW), stamp(BOOT_A, 5, NOW), NOW, MAX_CLOCK_SKEW_MS)).toBe(ORDER_SAME);
    expect(orderSnapshot(stamp(BOOT_A, 5, NOW), stamp(BOOT_A, 4, NOW), NOW, MAX_CLOCK_SKEW_MS)).toBe(ORDER_OLDER);
    expect(orderSnapshot(stamp(BOOT_A, 5, NOW), stamp(BOOT_A, 6, NOW + YEAR), NOW, MAX_CLOCK_SKEW_MS)).toBe(ORDER_FUTURE);
  });
});

describe("SnapshotStamp.sameVersion (the poll's 'nothing new' check)", () => {
  it("is the same boot and the same seq; either one different is a new version", () => {
    expect(stamp(BOOT_A, 7, NOW).sameVersion(stamp(BOOT_A, 7, NOW + 5))).toBe(true);
    expect(stamp(BOOT_A, 7, NOW).sameVersion(stamp(BOOT_A, 8, NOW))).toBe(false);
    expect(stamp(BOOT_A, 7, NOW).sameVersion(stamp(BOOT_B, 7, NOW))).toBe(false);
    expect(stamp(BOOT_A, 7, NOW).sameVersion(stamp(BOOT_B, 8, NOW))).toBe(false);
  });
});
