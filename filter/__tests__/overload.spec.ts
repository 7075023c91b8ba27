// Overload detection for the pool thresholds of shedding (lib/overload.ts): the share of a model
// pool's non-critical requests shed lately, per pool, bounded by the plan's models.
import { OverloadShares, OVERLOAD_WEIGHT } from "../assembly/lib/overload";

function live(names: Array<string>): Map<string, i32> {
  const m = new Map<string, i32>();
  for (let i = 0; i < names.length; i++) m.set(names[i], i);
  return m;
}

describe("OverloadShares", () => {
  it("starts at 0 and follows the share shed: about the last 50 requests", () => {
    const o = new OverloadShares();
    const models = live(["m"]);
    expect(o.share("m")).toBe(0.0);
    // 12 sheds in a row: 1 − 0.98^12 ≈ 0.215
    for (let i = 0; i < 12; i++) o.note("m", true, models);
    expect(o.share("m")).toBeCloseTo(1 - Math.pow(1 - OVERLOAD_WEIGHT, 12), 9);
    expect(o.share("m")).toBeGreaterThan(0.2);
    // one request in five shed for long: the share settles near 0.2
    for (let i = 0; i < 1000; i++) o.note("m", i % 5 == 0, models);
    expect(o.share("m")).toBeGreaterThan(0.15);
    expect(o.share("m")).toBeLessThan(0.25);
    // none shed: back under 0.05 within 150 requests
    for (let i = 0; i < 150; i++) o.note("m", false, models);
    expect(o.share("m")).toBeLessThan(0.05);
  });

  it("keeps pools apart", () => {
    const o = new OverloadShares();
    const models = live(["a", "b"]);
    for (let i = 0; i < 50; i++) o.note("a", true, models);
    expect(o.share("a")).toBeGreaterThan(0.6);
    expect(o.share("b")).toBe(0.0);
    expect(o.share("")).toBe(0.0);
  });

  it("drops the pools the plan no longer names: bounded by the fleet's models, not by what clients send", () => {
    const o = new OverloadShares();
    o.note("old-1", true, live(["old-1", "old-2"]));
    o.note("old-2", true, live(["old-1", "old-2"]));
    expect(o.size).toBe(2);
    // the fleet now serves "new" only: the stale pools go once the map outgrows the plan
    const now = live(["new"]);
    o.note("new", true, now);
    expect(o.size).toBe(1);
    expect(o.share("old-1")).toBe(0.0);
    expect(o.share("new")).toBeGreaterThan(0.0);
    // "" (a request with no model column) is kept alongside the plan's pools
    o.note("", true, now);
    expect(o.size).toBe(2);
    for (let i = 0; i < 100; i++) o.note("new", false, now);
    expect(o.size).toBe(2);
  });
});
