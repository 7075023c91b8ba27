import { mg1QueueingMs, mg1WaitMs, baseWaitMs, MODEL_CONDITIONAL, MODEL_MG1 } from "../assembly/lib/choice/scorer-wait";
import { drawFirst, drawSecond } from "../assembly/lib/choice/draw";
import { Rng } from "../assembly/lib/inflight";

describe("scorer-wait: static part", () => {
  it("is E[S] for the conditional model and adds the P-K queueing delay for mg1", () => {
    expect(baseWaitMs(MODEL_CONDITIONAL, 0.8, 10, 200, 0)).toBe(10.0);
    // M/M/1: E[S²] = 2E[S]², rho 0.8: queueing 0.8·200/(2·10·0.2) = 40
    expect(mg1QueueingMs(0.8, 10, 200)).toBeCloseTo(40);
    expect(baseWaitMs(MODEL_MG1, 0.8, 10, 200, 0)).toBeCloseTo(50);
    expect(mg1WaitMs(0.8, 10, 200)).toBeCloseTo(50);
  });

  it("adds a finite, positive link round trip only", () => {
    expect(baseWaitMs(MODEL_CONDITIONAL, 0.1, 10, 200, 35)).toBe(45.0);
    expect(baseWaitMs(MODEL_CONDITIONAL, 0.1, 10, 200, -5)).toBe(10.0);
    expect(baseWaitMs(MODEL_CONDITIONAL, 0.1, 10, 200, NaN)).toBe(10.0);
    expect(baseWaitMs(MODEL_CONDITIONAL, 0.1, 10, 200, Infinity)).toBe(10.0);
  });

  it("keeps the mg1 term finite for rho at or above 1 and unknown E[S²]", () => {
    expect(mg1QueueingMs(1.5, 10, 200)).toBeCloseTo(990); // capped at 0.99
    expect(mg1QueueingMs(0.5, 10, NaN)).toBeCloseTo(5);   // E[S²] unknown: E[S]², M/D/1
    expect(mg1QueueingMs(0.5, 0, 100)).toBe(0.0);
  });
});

describe("draw: two distinct uniform indices", () => {
  it("never draws the same index twice and covers every pair", () => {
    const rng = new Rng(9);
    const m = 4;
    const seen = new StaticArray<i32>(m * m);
    for (let r = 0; r < 2000; r++) {
      const a = drawFirst(rng, m);
      const b = drawSecond(rng, m, a);
      expect(a != b).toBe(true);
      expect(a >= 0 && a < m && b >= 0 && b < m).toBe(true);
      seen[a * m + b]++;
    }
    for (let a = 0; a < m; a++) for (let b = 0; b < m; b++) {
      if (a == b) continue;
      // 12 ordered pairs, ~167 each
      expect(seen[a * m + b]).toBeGreaterThan(110);
      expect(seen[a * m + b]).toBeLessThan(230);
    }
  });
});
