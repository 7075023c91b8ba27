// The golden snapshot fixtures (test/fixtures/snapshot/) on the filter side: the same files
// test/agent/snapshot-fixtures.test.ts decodes with the agent's codec.
import { decodeSnapshot, crc32, REASON_INVALID_DATA, SLOTS_INFERRED, SLOTS_CONFIGURED, SLOTS_EXPORTER } from "../assembly/lib/snapshot";
import { loadFixtures, fixture } from "./fixtures";
import { ACTION_SPLIT, ACTION_ROUTE, ACTION_LOCAL_REPLY, ACTION_LINK_STATUS, planRules, decisionProblem } from "../assembly/lib/rule-decisions";
import { RulesConfig, STATUS_DEGRADED } from "../assembly/lib/config";


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

  it("accept-rules.bin: the decisions the agent wrote (test/fixtures/snapshot/generate.ts RULE_DECISIONS)", () => {
    const s = decodeSnapshot(fixture("accept-rules.bin")).snapshot!;
    expect(s.rules.length).toBe(4);
    const pay = s.rules[0];
    expect(pay.set).toBe("payments");
    expect(pay.authorities.length).toBe(2);
    expect(pay.authorities[1]).toBe("*.payments.example");
    expect(pay.routeHeader).toBe("x-switchyard-route");
    expect(pay.version).toBe(7);
    expect(pay.ruleId).toBe("dc1-canary");
    expect(pay.sinceMs).toBe(1764000000000 - 5000);
    expect(pay.kind).toBe(ACTION_SPLIT);
    expect(pay.targets.length).toBe(2);
    expect(pay.targets[1].target).toBe("dc1-canary");
    expect(pay.targets[1].weight).toBe(5);
    expect(pay.because.length).toBe(2);
    expect(pay.because[1].name).toBe("canary_release_active");
    expect(pay.because[1].value).toBe(true);
    expect(pay.overridden).toBe(false);
    const co = s.rules[1];
    expect(co.kind).toBe(ACTION_ROUTE);
    expect(co.target).toBe("dc2");
    expect(co.ruleId).toBe("override:dc2");
    expect(co.overridden).toBe(true);
    expect(co.overrideAuthor).toBe("alice");
    expect(co.overrideReason).toBe("INC-123 drain dc1 — été");
    expect(co.overrideExpiresAtMs).toBe(1764000000000 + 1800000);
    const shop = s.rules[2];
    expect(shop.kind).toBe(ACTION_LOCAL_REPLY);
    expect(shop.replyStatus).toBe(503);
    expect(shop.replyHeaderNames[0]).toBe("retry-after");
    expect(shop.replyHeaderValues[0]).toBe("120");
    expect(shop.replyHeaderNames[1]).toBe("content-type");
    expect(shop.replyBody).toBe("down for maintenance\n");
    expect(s.rules[3].kind).toBe(ACTION_LINK_STATUS);
    expect(s.rules[3].linkStatus).toBe(STATUS_DEGRADED);
    // with the default configuration, the set on x-route-b is refused, the others planned
    const plan = planRules(new RulesConfig(), s.rules);
    expect(plan.size).toBe(3);
    expect(plan.refusedSets[0]).toBe("checkout");
    expect(plan.matcher.match("x.payments.example")).toBe(0);
  });

  it("accept-rules.bin mutated 5,000 times (re-sealed): every result is a clear error or decisions within the bounds, never a trap", () => {
    const base = fixture("accept-rules.bin");
    const n = base.byteLength;
    let x: u32 = 0x2545f491;
    let accepted = 0, refused = 0;
    for (let round = 0; round < 5000; round++) {
      const buf = base.slice(0);
      const p = changetype<usize>(buf);
      const flips = 1 + <i32>(round % 4);
      for (let k = 0; k < flips; k++) {
        x ^= x << 13; x ^= x >> 17; x ^= x << 5;
        const at = 40 + <i32>(x % <u32>(n - 40));
        x ^= x << 13; x ^= x >> 17; x ^= x << 5;
        store<u8>(p + <usize>at, <u8>(x & 0xff));
      }
      store<u32>(p + 12, crc32(buf, 16, n));
      const r = decodeSnapshot(buf);
      if (r.snapshot == null) {
        if (r.error.length == 0) throw new Error("refused without a reason");
        refused++;
        continue;
      }
      accepted++;
      const ds = r.snapshot!.rules;
      for (let i = 0; i < ds.length; i++) {
        const why = decisionProblem(ds[i]);
        if (why.length > 0) throw new Error("adopted a decision out of bounds: " + why);
      }
      planRules(new RulesConfig(), ds);
    }
    expect(accepted).toBeGreaterThan(0);
    expect(refused).toBeGreaterThan(1000);
  });
});
