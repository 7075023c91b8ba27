import { parseConfig, STATUS_DEGRADED, STATUS_NORMAL } from "../assembly/lib/config";
import { resolveLink, REASON_MISSING, REASON_SNAPSHOT, REASON_STALE, REASON_UNKNOWN_PEER } from "../assembly/lib/link";
import { PeerState, Snapshot } from "../assembly/lib/snapshot";

function cfg(failMode: string): string {
  return '{"agent":{"cluster":"a"},"link":{"failMode":"' + failMode + '","services":[' +
    '{"authorities":["b.example"],"peer":"cloud-b"},{"authorities":["c.example"],"peer":"cloud-c"},{"authorities":["x.example"],"peer":"cloud-x"}]}}';
}

function peer(name: string, degraded: bool): PeerState {
  const p = new PeerState();
  p.name = name;
  p.degraded = degraded;
  return p;
}

function snap(): Snapshot {
  const s = new Snapshot();
  s.seq = 1;
  s.generatedAtMs = 1000;
  s.peers = [peer("cloud-b", true), peer("cloud-c", false)];
  return s;
}

describe("resolveLink before the first snapshot", () => {
  it("gives every service the fail mode, for the reason 'missing', distinct from a snapshot decision", () => {
    expect(REASON_MISSING).not.toBe(REASON_SNAPSHOT);
    const c = parseConfig(cfg("degraded")).config!;
    const v = resolveLink(c.link, null, true);
    for (let i = 0; i < 3; i++) {
      expect(v.status[i]).toBe(STATUS_DEGRADED);
      expect(v.reason[i]).toBe(REASON_MISSING);
      expect(v.isFailMode(i)).toBe(true);
    }
  });
});

describe("resolveLink", () => {
  it("maps each service to its peer's state", () => {
    const c = parseConfig(cfg("degraded")).config!;
    const v = resolveLink(c.link, snap(), false);
    expect(v.status[0]).toBe(STATUS_DEGRADED);
    expect(v.reason[0]).toBe(REASON_SNAPSHOT);
    expect(v.status[1]).toBe(STATUS_NORMAL);
    expect(v.isFailMode(1)).toBe(false);
    // the snapshot does not know cloud-x: fail mode
    expect(v.status[2]).toBe(STATUS_DEGRADED);
    expect(v.reason[2]).toBe(REASON_UNKNOWN_PEER);
  });

  it("uses the fail mode when the snapshot is missing or stale", () => {
    const degraded = parseConfig(cfg("degraded")).config!;
    const normal = parseConfig(cfg("normal")).config!;
    const missing = resolveLink(degraded.link, null, true);
    expect(missing.status[1]).toBe(STATUS_DEGRADED);
    expect(missing.reason[1]).toBe(REASON_MISSING);
    const stale = resolveLink(normal.link, snap(), true);
    expect(stale.status[0]).toBe(STATUS_NORMAL); // even though cloud-b is degraded in the data
    expect(stale.reason[0]).toBe(REASON_STALE);
    expect(stale.isFailMode(0)).toBe(true);
  });

  it("uses the fail mode for a peer the snapshot does not know, also with failMode normal", () => {
    const normal = parseConfig(cfg("normal")).config!;
    const v = resolveLink(normal.link, snap(), false);
    expect(v.status[2]).toBe(STATUS_NORMAL);
    expect(v.reason[2]).toBe(REASON_UNKNOWN_PEER);
    expect(v.isFailMode(2)).toBe(true);
    // known peers keep their data, whatever the fail mode
    expect(v.status[0]).toBe(STATUS_DEGRADED);
    expect(v.isFailMode(0)).toBe(false);
  });
});
