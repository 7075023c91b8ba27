// Framing and corruption on the filter's decoder, starting from the golden fixtures
// (test/fixtures/snapshot/): each case changes a few bytes of a good document.
import { decodeSnapshot, crc32, peekSeq, readStamp, H_CRC, H_CRC_FROM, H_VERSION } from "../assembly/lib/snapshot";
import { fixture } from "./fixtures";

/** accept-peers-only.bin: seq 5, generatedAtMs 1000, one peer "cloud-b"; 79 bytes. */
function peersOnly(): ArrayBuffer { return fixture("accept-peers-only.bin"); }

function patch8(buf: ArrayBuffer, at: i32, v: u8): ArrayBuffer { const b = buf.slice(0); store<u8>(changetype<usize>(b) + <usize>at, v); return b; }
function patch16(buf: ArrayBuffer, at: i32, v: u16): ArrayBuffer { const b = buf.slice(0); store<u16>(changetype<usize>(b) + <usize>at, v); return b; }
function patch32(buf: ArrayBuffer, at: i32, v: u32): ArrayBuffer { const b = buf.slice(0); store<u32>(changetype<usize>(b) + <usize>at, v); return b; }
/** recompute the CRC so the structural check, not the checksum, is what fails */
function reseal(buf: ArrayBuffer): ArrayBuffer { store<u32>(changetype<usize>(buf) + <usize>H_CRC, crc32(buf, H_CRC_FROM, buf.byteLength)); return buf; }

describe("crc32", () => {
  it("matches the IEEE check value", () => {
    expect(crc32(String.UTF8.encode("123456789"), 0, 9)).toBe(0xcbf43926);
  });
});

describe("decodeSnapshot", () => {
  it("decodes header and peers; peekSeq and readStamp read the header only", () => {
    const r = decodeSnapshot(peersOnly());
    expect(r.error).toBe("");
    const s = r.snapshot!;
    expect(s.seq).toBe(5);
    expect(s.generatedAtMs).toBe(1000);
    expect(s.bootId).toBe(0);
    expect(s.peers.length).toBe(1);
    expect(s.peers[0].name).toBe("cloud-b");
    expect(s.peers[0].degraded).toBe(true);
    expect(s.peers[0].recoverStreak).toBe(3);
    expect(s.instances.length).toBe(0);
    expect(s.peerIndex("cloud-b")).toBe(0);
    expect(s.peerIndex("nope")).toBe(-1);
    expect(peekSeq(peersOnly())).toBe(5);
    const full = readStamp(fixture("accept-full.bin"))!;
    expect(full.bootId).toBe(0x5eed0001);
    expect(full.seq).toBe(1764000000000007);
    expect(full.generatedAtMs).toBe(1764000000456);
    expect(readStamp(new ArrayBuffer(39))).toBeNull();
  });

  it("rejects garbage, truncation, corruption and oversize without trapping", () => {
    expect(decodeSnapshot(String.UTF8.encode("<html>502 Bad Gateway</html> and some more bytes")).error).toBe("bad magic");
    expect(decodeSnapshot(new ArrayBuffer(10)).error).toBe("snapshot shorter than its header (10 bytes)");
    const good = peersOnly();
    expect(good.byteLength).toBe(79);
    expect(decodeSnapshot(good.slice(0, good.byteLength - 5)).error).toBe("length mismatch: header says 79, got 74");
    for (let n = 0; n < good.byteLength; n++) expect(decodeSnapshot(good.slice(0, n)).snapshot).toBeNull();
    expect(decodeSnapshot(patch8(good, 50, 0xff)).error).toBe("checksum mismatch");
    expect(decodeSnapshot(patch16(good, H_VERSION, 2)).error).toBe("unsupported format version 2");
    expect(decodeSnapshot(new ArrayBuffer((1 << 20) + 1)).error).toBe("snapshot larger than 1 MiB");
    // a section that claims more bytes than the document holds (valid CRC)
    expect(decodeSnapshot(reseal(patch32(good, 44, 1000))).error).toBe("section 0 overruns the document");
    // a peer count larger than the payload
    expect(decodeSnapshot(reseal(patch16(good, 48, 3))).error).toBe("section 1: truncated at offset 79");
    // a bad peer state
    expect(decodeSnapshot(reseal(patch8(good, 60, 9))).error).toBe("section 1: peer 0: unknown state 9");
    // more sections announced than present
    expect(decodeSnapshot(reseal(patch16(good, 32, 2))).error).toBe("truncated at offset 79");
  });
});
