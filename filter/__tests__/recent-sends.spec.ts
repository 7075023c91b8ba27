// The arrivals behind a prefill (lib/recent-sends.ts; issue 20 round 9, docs/benchmarks/llm-r9b.md):
// this VM's recent sends, counted in a window, shared out over the instances as the prefill it
// made each compute.
import { RecentSends, RECENT_SENDS, arrivalsPerInstance, arrivalsAt } from "../assembly/lib/recent-sends";

describe("recent sends", () => {
  it("counts the sends at or after now − window", () => {
    const r = new RecentSends();
    expect(r.within(1000, 100)).toBe(0);
    for (let k = 0; k < 10; k++) r.record(1000 + 10 * <f64>k);
    expect(r.within(1090, 1000)).toBe(10);
    expect(r.within(1090, 45)).toBe(5); // 1050 .. 1090
    expect(r.within(1090, 40)).toBe(5); // 1050 itself counts
    expect(r.within(2000, 100)).toBe(0);
    expect(r.within(1090, 0)).toBe(0);
    expect(r.within(1090, NaN)).toBe(0);
  });

  it("a burst at one instant counts whole up to the bound, then the bound", () => {
    const r = new RecentSends();
    for (let k = 0; k < 100; k++) r.record(1000);
    expect(r.within(1000, 227)).toBe(100);
    for (let k = 0; k < 1000; k++) r.record(1000);
    expect(r.within(1000, 227)).toBe(RECENT_SENDS);
    // the ring keeps the newest: later sends push the oldest out of the window's count
    for (let k = 0; k < 10; k++) r.record(2000);
    expect(r.within(2000, 227)).toBe(10);
    expect(r.within(2000, 1001)).toBe(RECENT_SENDS);
  });

  it("an earlier clock reading (another worker's clock) is recorded as the latest, never out of order", () => {
    const r = new RecentSends();
    r.record(1000); r.record(900); r.record(NaN);
    expect(r.within(1000, 1)).toBe(2);
  });

  it("arrivals per instance: the sends spread evenly", () => {
    expect(arrivalsPerInstance(16, 8)).toBe(2.0);
    expect(arrivalsPerInstance(0, 8)).toBe(0.0);
    expect(arrivalsPerInstance(5, 0)).toBe(0.0);
  });

  it("arrivals at an instance follow the prefill sent there, this request's own included", () => {
    // the grouped burst's 10th request of a group: 9 sends, all to the holder (227 + 8 · 14.3 ms)
    const held = 227 + 8 * 14.3;
    // at the holder (a hit: 14.3 ms more) it sees all of them
    expect(arrivalsAt(9, held, held, 14.3, 8)).toBeCloseTo(9);
    // at an idle worker a miss (227 ms) would make it hold the prompt too: 227 / (held + 227) of them
    expect(arrivalsAt(9, 0, held, 227, 8)).toBeCloseTo(9 * 227 / (held + 227));
    // nothing sent anywhere yet, nothing of its own: even
    expect(arrivalsAt(8, 0, 0, 0, 8)).toBe(1.0);
    // no sends: none
    expect(arrivalsAt(0, held, held, 227, 8)).toBe(0.0);
  });

  it("unknown or invalid amounts count as none, and an instance never sees more than all arrivals", () => {
    expect(arrivalsAt(9, NaN, 100, 0, 8)).toBe(0.0);
    expect(arrivalsAt(9, -5, 100, 100, 8)).toBeCloseTo(9 * 100 / 200);
    expect(arrivalsAt(9, Infinity, Infinity, 10, 8)).toBe(9.0);
    expect(arrivalsAt(9, 500, 100, 0, 8)).toBe(9.0);
  });
});
