// The golden snapshot fixtures (test/fixtures/snapshot/) on the filter side: the same files
// test/agent/snapshot-fixtures.test.ts decodes with the agent's codec.
import { decodeSnapshot, REASON_INVALID_DATA, SLOTS_INFERRED, SLOTS_CONFIGURED, SLOTS_EXPORTER } from "../assembly/lib/snapshot";
import { loadFixtures, fixture } from "./fixtures";


describe("golden snapshot fixtures", () => {
  it("every fixture decodes (or is refused) as the manifest says", () => {
    const all = loadFixtures();
    expect(all.length).toBeGreaterThanOrEqual(20);
    for (let i = 0; i < all.length; i++) {
      const f = all[i];
      const r = decodeSnapshot(f.bytes);
      if (f.expectReject) {
        if (r.snapshot != null) throw new Error(f.file + ": adopted, expected a rejection with '" + f.error + "'");
        if (!r.error.includes(f.error)) throw new Error(f.file + ": error '" + r.error + "' does not contain '" + f.error + "'");
      } else {
        if (r.snapshot == null) throw new Error(f.file + ": rejected: " + r.error);
      }
    }
  });

  it("accept-full.bin: header, boot id, every reason, every slots source, IPv6", () => {
    const s = decodeSnapshot(fixture("accept-full.bin")).snapshot!;
    expect(s.seq).toBe(1764000000000007);
    expect(s.generatedAtMs).toBe(1764000000456);
    expect(s.bootId).toBe(0x5eed0001);
    expect(s.peers.length).toBe(2);
    expect(s.peers[0].name).toBe("cloud-b");
    expect(s.peers[0].degraded).toBe(true);
    expect(s.peers[0].lastRttMs).toBe(<f32>120.5);
    expect(isNaN(s.peers[1].lastRttMs)).toBe(true);
    expect(s.peers[1].recoverStreak).toBe(65535);
    expect(s.instances.length).toBe(7);
    for (let i = 0; i < 7; i++) expect(s.instances[i].reason).toBe(<u8>i);
    expect(s.instances[0].slotsSource).toBe(SLOTS_INFERRED);
    expect(s.instances[1].slotsSource).toBe(SLOTS_CONFIGURED);
    expect(s.instances[2].slotsSource).toBe(SLOTS_EXPORTER);
    expect(s.instances[1].addr).toBe("[fd00::7]:8000");
    expect(s.instances[2].addr).toBe("[::ffff:10.1.2.3]:65535");
    const a = s.instances[0];
    expect(a.healthy).toBe(true);
    expect(a.rho).toBe(<f32>0.5);
    expect(a.esMs).toBe(<f32>100);
    expect(a.slots).toBe(<f32>4);
    expect(a.dataAgeMs).toBe(250);
  });

  it("accept-numbers.bin: each field x {NaN, +Inf, -Inf, 0, negative, denormal, huge} and the boundaries (D1)", () => {
    const s = decodeSnapshot(fixture("accept-numbers.bin")).snapshot!;
    expect(s.instances.length).toBeGreaterThanOrEqual(70);
    for (let i = 0; i < s.instances.length; i++) {
      const x = s.instances[i];
      const parts = x.service.split("|");
      const field = parts[0];
      const outcome = parts[2];
      if (outcome == "invalid") {
        if (x.healthy || x.reason != REASON_INVALID_DATA) throw new Error(x.service + ": expected unhealthy invalid_data");
        if (field == "slots" && x.slots != 1) throw new Error(x.service + ": bad slots must read as 1");
      } else {
        if (!x.healthy || x.reason != 0) throw new Error(x.service + ": expected healthy ok");
        if (outcome == "unknown") {
          let v: f32 = 0;
          if (field == "p50Ms") v = x.p50Ms;
          else if (field == "p99Ms") v = x.p99Ms;
          else if (field == "baselineP99Ms") v = x.baselineP99Ms;
          else if (field == "gpuUtil") v = x.gpuUtil;
          else throw new Error(x.service + ": no unknown allowed");
          if (v == v) throw new Error(x.service + ": expected NaN");
        }
      }
    }
    expect(s.peers.length).toBe(14);
    for (let i = 0; i < s.peers.length; i++) {
      const p = s.peers[i];
      const parts = p.name.split("|");
      const v = parts[0] == "lastRttMs" ? p.lastRttMs : p.avgRttMs;
      if ((v != v) != (parts[2] == "unknown")) throw new Error(p.name + ": read " + v.toString());
    }
  });
});
