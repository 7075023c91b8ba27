// Address and value rules of the snapshot (lib/snapshot-rules.ts). The same lists are checked on
// the agent's side in test/agent/snapshot-fixtures.test.ts.
import { isEndpointAddress, isValidUtf8, judge, normalizeRtt, VALUE_OK, VALUE_UNKNOWN, VALUE_INVALID } from "../assembly/lib/snapshot-rules";

const VALID: string[] = ["0.0.0.0:80", "255.255.255.255:65535", "10.0.0.7:8000", "[::]:1", "[::1]:8000", "[1:2:3:4:5:6:7:8]:80",
  "[1::]:80", "[fd00::7]:8000", "[::ffff:1.2.3.4]:80", "[FD00:0:0:0:0:0:0:AbCd]:443",
  // each hex range's ends; seven groups around one "::"; the longest text form (45 characters)
  "[9:a:f:A:F:0:09af:FA90]:80", "[1:2:3:4:5:6:7::]:80", "[::2:3:4:5:6:7:8]:80", "[ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255]:1",
  "9.9.9.9:9", "1.2.3.4:65535"];
const INVALID: string[] = ["", ":80", "1.2.3.4:", "1.2.3.4", "1.2.3:80", "1.2.3.4.5:80", "01.2.3.4:80", "1.2.3.256:80", "1.2.3.4:0",
  "1.2.3.4:65536", "1.2.3.4:08", "1.2.3.4:+80", "a.b.c.d:80", "[1:2:3:4:5:6:7:8:9]:80", "[:1]:80", "[1:]:80", "[]:80", "[::1]80",
  "[1::2::3]:80", "[12345::]:80", "[::1%lo]:80", "::1:80", "[::1.2.3]:80", "1.2.3.4:80\r\n", " 1.2.3.4:80",
  // the characters just outside each hex range; eight groups with "::"; 46 characters
  "[::/]:80", "[::@]:80", "[::G]:80", "[::`]:80", "[::g]:80", "[::1:]:80", "[1:2:3:4:5:6:7::8]:80",
  "[ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.2550]:1", "[1:2:3:4:5:6:1.2.3.4:8]:80", "1.2.3.4:00080", "1.2.3.4:123456"];

describe("isEndpointAddress", () => {
  it("accepts IPv4 dotted quads and bracketed IPv6 with a port 1..65535", () => {
    for (let i = 0; i < VALID.length; i++) if (!isEndpointAddress(VALID[i])) throw new Error("refused " + VALID[i]);
  });
  it("refuses everything else", () => {
    for (let i = 0; i < INVALID.length; i++) if (isEndpointAddress(INVALID[i])) throw new Error("accepted " + INVALID[i]);
  });
});

function ok(bytes: u8[]): bool {
  const b = new Uint8Array(bytes.length);
  for (let i = 0; i < bytes.length; i++) b[i] = bytes[i];
  return isValidUtf8(b.dataStart, bytes.length);
}

describe("isValidUtf8", () => {
  it("accepts ASCII and well-formed multi-byte sequences", () => {
    expect(ok([0x61, 0x62])).toBe(true);
    expect(ok([0xc3, 0xa9])).toBe(true);             // é
    expect(ok([0xe2, 0x82, 0xac])).toBe(true);       // €
    expect(ok([0xf0, 0x9f, 0x98, 0x80])).toBe(true); // U+1F600
  });
  it("refuses overlongs, surrogates, code points above U+10FFFF, stray and truncated bytes", () => {
    expect(ok([0xc0, 0xaf])).toBe(false);
    expect(ok([0xe0, 0x80, 0xaf])).toBe(false);
    expect(ok([0xed, 0xa0, 0x80])).toBe(false);
    expect(ok([0xf4, 0x90, 0x80, 0x80])).toBe(false);
    expect(ok([0xff])).toBe(false);
    expect(ok([0x80])).toBe(false);
    expect(ok([0xe2, 0x82])).toBe(false);
  });
});

describe("judge", () => {
  it("NaN is unknown only where allowed; denormals and out-of-range are invalid", () => {
    expect(judge(NaN, 0, 1, true)).toBe(VALUE_UNKNOWN);
    expect(judge(NaN, 0, 1, false)).toBe(VALUE_INVALID);
    expect(judge(<f32>1e-40, 0, 1, true)).toBe(VALUE_INVALID);
    expect(judge(0, 0, 1, false)).toBe(VALUE_OK);
    expect(judge(1, 0, 1, false)).toBe(VALUE_OK);
    expect(judge(<f32>1.01, 0, 1, false)).toBe(VALUE_INVALID);
    expect(judge(-Infinity, 0, 1, false)).toBe(VALUE_INVALID);
  });
  it("both ends of a range are in it, the smallest normal f32 is not a denormal", () => {
    expect(judge(<f32>0.001, <f64><f32>0.001, 5, false)).toBe(VALUE_OK);
    expect(judge(5, <f64><f32>0.001, 5, false)).toBe(VALUE_OK);
    expect(judge(<f32>0.0009, <f64><f32>0.001, 5, false)).toBe(VALUE_INVALID);
    expect(judge(<f32>5.001, <f64><f32>0.001, 5, false)).toBe(VALUE_INVALID);
    expect(judge(<f32>1.1754943508222875e-38, 0, 1, false)).toBe(VALUE_OK);
    expect(judge(<f32>-1.1754943508222875e-38, -1, 1, false)).toBe(VALUE_OK);
    expect(judge(<f32>-1e-40, -1, 1, false)).toBe(VALUE_INVALID);
    expect(judge(0, 0, 1, true)).toBe(VALUE_OK);
  });
  it("peer RTTs: unusable values read as NaN", () => {
    expect(normalizeRtt(12.5)).toBe(<f32>12.5);
    expect(isNaN(normalizeRtt(-1))).toBe(true);
    expect(isNaN(normalizeRtt(Infinity))).toBe(true);
    expect(isNaN(normalizeRtt(<f32>4e6))).toBe(true);
  });
});
