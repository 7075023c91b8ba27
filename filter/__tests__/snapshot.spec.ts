import { decodeSnapshot, crc32, peekSeq } from "../assembly/lib/snapshot";
import { Bytes, peer, section, document } from "./snapshot-builder";

function twoPeers(): ArrayBuffer {
  const peers = new Bytes().append(peer("cloud-b", true, 123.5)).append(peer("cloud-c", false, 9.25));
  return document(42, 1700000000123, [section(1, 2, peers)]);
}

describe("crc32", () => {
  it("matches the IEEE check value", () => {
    expect(crc32(String.UTF8.encode("123456789"), 0, 9)).toBe(0xcbf43926);
  });
});

describe("decodeSnapshot", () => {
  it("decodes header and peers", () => {
    const r = decodeSnapshot(twoPeers());
    expect(r.error).toBe("");
    const s = r.snapshot!;
    expect(s.seq).toBe(42);
    expect(s.generatedAtMs).toBe(1700000000123);
    expect(s.peers.length).toBe(2);
    expect(s.peers[0].name).toBe("cloud-b");
    expect(s.peers[0].degraded).toBe(true);
    expect(s.peers[0].lastRttMs).toBe(<f32>123.5);
    expect(s.peers[0].recoverStreak).toBe(3);
    expect(s.peers[1].degraded).toBe(false);
    expect(s.peerIndex("cloud-c")).toBe(1);
    expect(s.peerIndex("nope")).toBe(-1);
    expect(peekSeq(twoPeers())).toBe(42);
  });

  it("decodes instances and skips unknown sections", () => {
    const inst = new Bytes().str("llm").str("10.0.0.7:8000").str("cloud-b").u8(1).u8(0)
      .f32(0.5).f32(100).f32(20000).f32(5).f32(2).f32(90).f32(400).f32(300).f32(0.7).u32(250).f32(4);
    const unknown = new Bytes().u16(77).u16(0).u32(3).u8(1).u8(2).u8(3);
    const doc = document(7, 5, [unknown, section(2, 1, inst)]);
    const r = decodeSnapshot(doc);
    expect(r.error).toBe("");
    const i = r.snapshot!.instances[0];
    expect(i.service).toBe("llm");
    expect(i.addr).toBe("10.0.0.7:8000");
    expect(i.peer).toBe("cloud-b");
    expect(i.healthy).toBe(true);
    expect(i.rho).toBe(<f32>0.5);
    expect(i.es2Ms2).toBe(<f32>20000);
    expect(i.baselineP99Ms).toBe(<f32>300);
    expect(i.dataAgeMs).toBe(250);
    expect(i.slots).toBe(<f32>4);
  });

  it("rejects garbage, truncation, corruption and oversize without trapping", () => {
    expect(decodeSnapshot(String.UTF8.encode("<html>502 Bad Gateway</html> and some more bytes")).error).toBe("bad magic");
    expect(decodeSnapshot(new ArrayBuffer(10)).error).toBe("snapshot shorter than its header (10 bytes)");
    const good = twoPeers();
    expect(decodeSnapshot(good.slice(0, good.byteLength - 5)).error).toBe("length mismatch: header says " + good.byteLength.toString() + ", got " + (good.byteLength - 5).toString());
    const flipped = good.slice(0);
    store<u8>(changetype<usize>(flipped) + 50, load<u8>(changetype<usize>(flipped) + 50) ^ 0xff);
    expect(decodeSnapshot(flipped).error).toBe("checksum mismatch");
    const v2 = good.slice(0);
    store<u16>(changetype<usize>(v2) + 4, 2);
    expect(decodeSnapshot(v2).error).toBe("unsupported format version 2");
    expect(decodeSnapshot(new ArrayBuffer((1 << 20) + 1)).error).toBe("snapshot larger than 1 MiB");
    // a section that claims more bytes than the document holds (valid CRC)
    const overrun = document(1, 1, [new Bytes().u16(1).u16(0).u32(1000).u16(0)]);
    expect(decodeSnapshot(overrun).error).toBe("section 0 overruns the document");
    // a peer count larger than the payload
    const short = document(1, 1, [section(1, 3, peer("a", false, 1))]);
    expect(decodeSnapshot(short).error).toBe("section 1: truncated at offset 73");
    // a bad peer state
    const badState = document(1, 1, [section(1, 1, new Bytes().str("a").u8(9).f32(1).f32(1).u16(0).u64(0))]);
    expect(decodeSnapshot(badState).error).toBe("section 1: peer 0: unknown state 9");
  });
});
