import { AddrSections, addrRecordBytes, concatSections, writeAddr, writeAddrSectionHeader, ADDR_SECTION_HEADER_BYTES } from "../assembly/lib/shared-doc";

function section(token: u32, at: u64, addrs: Array<string>, values: Array<u32>): ArrayBuffer {
  let size = ADDR_SECTION_HEADER_BYTES;
  for (let i = 0; i < addrs.length; i++) size += addrRecordBytes(addrs[i]);
  const out = new ArrayBuffer(size);
  const p = changetype<usize>(out);
  let off = writeAddrSectionHeader(p, token, at, addrs.length);
  for (let i = 0; i < addrs.length; i++) {
    off = writeAddr(p, off, addrs[i]);
    store<u32>(p + off, values[i]);
    off += 4;
  }
  expect(<i32>off).toBe(size);
  return out;
}

describe("AddrSections", () => {
  it("stops on every record of the other VMs' live sections and keeps those sections whole", () => {
    const a = section(2, 1000, ["10.0.0.1:80", "10.0.0.2:80"], [3, 4]);
    const own = section(1, 1000, ["10.0.0.1:80"], [9]);
    const expired = section(3, 100, ["10.0.0.3:80"], [5]);
    const empty = section(4, 1000, [], []);
    const r = new AddrSections(concatSections([a, own, expired, empty]), 1, 1200, 500);
    const seen = new Array<string>();
    while (r.next()) seen.push(r.addr() + "=" + load<u32>(r.valuePtr).toString() + "@" + r.at.toString());
    expect(seen.join(",")).toBe("10.0.0.1:80=3@1000,10.0.0.2:80=4@1000");
    expect(r.keep.length).toBe(2);
    expect(r.keep[0].byteLength).toBe(a.byteLength);
    expect(r.keep[1].byteLength).toBe(ADDR_SECTION_HEADER_BYTES);
  });

  it("ends at a truncated record: the sections before it kept, its own not", () => {
    const a = section(2, 1000, ["10.0.0.1:80"], [3]);
    const b = section(3, 1000, ["10.0.0.2:80", "10.0.0.3:80"], [4, 5]);
    const doc = concatSections([a, b]).slice(0, a.byteLength + b.byteLength - 2);
    const r = new AddrSections(doc, 1, 1000, 500);
    let n = 0;
    while (r.next()) n++;
    expect(n).toBe(2);              // a's record and b's first
    expect(r.keep.length).toBe(1);  // b is cut: not written back
    expect(r.keep[0].byteLength).toBe(a.byteLength);
  });
});
