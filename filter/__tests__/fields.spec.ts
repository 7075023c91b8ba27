import { isHeaderName, reservedHeaderReason, onlyChars } from "../assembly/lib/fields";

function repeat(c: string, n: i32): string {
  let s = "";
  for (let i = 0; i < n; i++) s += c;
  return s;
}

describe("isHeaderName", () => {
  it("accepts 1 to 128 characters and refuses 0 and 129", () => {
    expect(isHeaderName("")).toBe(false);
    expect(isHeaderName("x")).toBe(true);
    expect(isHeaderName(repeat("x", 128))).toBe(true);
    expect(isHeaderName(repeat("x", 129))).toBe(false);
  });

  it("accepts lowercase token characters only (each range's first and last character)", () => {
    expect(isHeaderName("az09-_.")).toBe(true);
    const outside = ["`", "{", "/", ":", "A", "Z", " ", ","];
    for (let i = 0; i < outside.length; i++) {
      expect(isHeaderName("x" + outside[i])).toBe(false, outside[i]);
    }
  });
});

describe("reservedHeaderReason", () => {
  it("names the reserved header or prefix, and is empty for the filter's own headers", () => {
    expect(reservedHeaderReason("host")).toBe("must not be host (a header Envoy, HTTP or the mesh owns)");
    expect(reservedHeaderReason("x-client-trace-id")).toBe("must not be x-client-trace-id (a header Envoy, HTTP or the mesh owns)");
    expect(reservedHeaderReason("x-b3-traceid")).toBe("must not start with x-b3- (headers Envoy or the mesh own)");
    expect(reservedHeaderReason("x-cross-cloud-status")).toBe("");
    expect(reservedHeaderReason("hosts")).toBe("");
  });
});

describe("onlyChars", () => {
  it("allows ASCII letters and digits (range ends included) plus the extra characters", () => {
    expect(onlyChars("azAZ09", "")).toBe(true);
    expect(onlyChars("a_b", "_")).toBe(true);
    expect(onlyChars("a_b", "-")).toBe(false);
    expect(onlyChars("a`", "")).toBe(false);
    expect(onlyChars("a{", "")).toBe(false);
    expect(onlyChars("a@", "")).toBe(false);
    expect(onlyChars("a[", "")).toBe(false);
    expect(onlyChars("a/", "")).toBe(false);
    expect(onlyChars("a:", "")).toBe(false);
  });
});
