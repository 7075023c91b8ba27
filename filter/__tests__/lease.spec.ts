import { claimLease, encodeLease } from "../assembly/lib/lease";

describe("claimLease", () => {
  it("claims a missing or malformed lease", () => {
    const d = claimLease(false, new ArrayBuffer(0), 7, 1000, 1000);
    expect(d.write).toBe(true);
    expect(claimLease(true, new ArrayBuffer(3), 7, 1000, 1000).write).toBe(true);
  });

  it("leaves another VM's live lease alone and takes it once expired", () => {
    const other = encodeLease(9, 2000);
    const live = claimLease(true, other, 7, 1999, 1000);
    expect(live.write).toBe(false);
    expect(live.mine).toBe(false);
    expect(claimLease(true, other, 7, 2000, 1000).write).toBe(true);
  });

  it("keeps its own lease and renews past half-life", () => {
    const own = encodeLease(7, 2000);
    const early = claimLease(true, own, 7, 1200, 1000);
    expect(early.mine).toBe(true);
    expect(early.write).toBe(false);
    const late = claimLease(true, own, 7, 1600, 1000);
    expect(late.mine).toBe(true);
    expect(late.write).toBe(true);
  });

  it("is not ours at its expiry instant, and is renewed only once strictly past half-life", () => {
    const own = encodeLease(7, 2000);
    const atExpiry = claimLease(true, own, 7, 2000, 1000);
    expect(atExpiry.mine).toBe(false);
    expect(atExpiry.write).toBe(true);
    expect(claimLease(true, own, 7, 1999, 1000).mine).toBe(true);
    // half-life: 2000 - 1000/2 = 1500
    expect(claimLease(true, own, 7, 1500, 1000).write).toBe(false);
    expect(claimLease(true, own, 7, 1501, 1000).write).toBe(true);
  });
});
