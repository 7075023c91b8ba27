import { AddrSections, AddrSectionWriter, concatSections, ADDR_SECTION_HEADER_BYTES } from "../assembly/lib/shared-doc";

/** A section as a VM writes it (AddrSectionWriter; one writer reused, as each VM does). */
const W = new AddrSectionWriter();
function section(token: u32, at: u64, addrs: Array<string>, values: Array<u32>): ArrayBuffer {
  W.begin();
  let size = ADDR_SECTION_HEADER_BYTES;
  for (let i = 0; i < addrs.length; i++) {
    W.add(addrs[i], values[i]);
    size += 5 + String.UTF8.byteLength(addrs[i]);
  }
  const out = W.finish(token, at);
  expect(out.byteLength).toBe(size);
  // header: token, publishedAtMs, count
  expect(load<u32>(changetype<usize>(out))).toBe(token);
  expect(load<u64>(changetype<usize>(out) + 4)).toBe(at);
  expect(<i32>load<u16>(changetype<usize>(out) + 12)).toBe(addrs.length);
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

  it("the writer grows its scratch past 256 bytes and starts afresh on begin()", () => {
    const addrs = new Array<string>(), values = new Array<u32>();
    for (let i = 0; i < 40; i++) { addrs.push("10.0.1." + i.toString() + ":8080"); values.push(<u32>i); }
    const big = section(5, 10, addrs, values);
    expect(big.byteLength).toBeGreaterThan(256);
    const r = new AddrSections(big, 1, 10, 500);
    let k = 0;
    while (r.next()) { expect(r.addr()).toBe(addrs[k]); expect(load<u32>(r.valuePtr)).toBe(<u32>k); k++; }
    expect(k).toBe(40);
    // the next section holds only its own records
    const small = section(5, 20, ["10.0.0.9:80"], [7]);
    expect(small.byteLength).toBe(ADDR_SECTION_HEADER_BYTES + 5 + 11);
  });
});
