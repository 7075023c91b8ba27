// The documents worker VMs exchange through shared data (in-flight counts, the prefix index) are
// one section per VM, back to back: a writer keeps the other VMs' live sections and appends its own.

/** The sections, concatenated in order, as one document. */
export function concatSections(sections: Array<ArrayBuffer>): ArrayBuffer {
  let size = 0;
  for (let i = 0; i < sections.length; i++) size += sections[i].byteLength;
  const out = new ArrayBuffer(size);
  let o: usize = 0;
  for (let i = 0; i < sections.length; i++) {
    memory.copy(changetype<usize>(out) + o, changetype<usize>(sections[i]), sections[i].byteLength);
    o += <usize>sections[i].byteLength;
  }
  return out;
}

// Address-keyed sections (the in-flight counts, the pending prefill, the cross-VM gauge map): u32 vmToken, u64
// publishedAtMs, u16 count, then count × (u8 addrLen, addr, a 4-byte value). One reader and one
// writer for both documents, so that their framing checks cannot drift apart.
export const ADDR_SECTION_HEADER_BYTES: i32 = 14;

/**
 * Builds one VM's address-keyed section in one pass: begin(), add() per record, finish(). The
 * records go into a scratch buffer kept between ticks (grown to the largest section this VM wrote:
 * the live fleet); finish() allocates the section itself and nothing else.
 */
export class AddrSectionWriter {
  private buf: ArrayBuffer = new ArrayBuffer(256);
  private off: i32 = ADDR_SECTION_HEADER_BYTES;
  private count: i32 = 0;

  begin(): void {
    this.off = ADDR_SECTION_HEADER_BYTES;
    this.count = 0;
  }

  /** One record: addr (UTF-8, its length byte first) and a 4-byte value (an f32 goes as its bits). */
  add(addr: string, value: u32): void {
    const need = this.off + 5 + String.UTF8.byteLength(addr);
    if (need > this.buf.byteLength) {
      const b = new ArrayBuffer(max(need, this.buf.byteLength * 2));
      memory.copy(changetype<usize>(b), changetype<usize>(this.buf), <usize>this.off);
      this.buf = b;
    }
    const p = changetype<usize>(this.buf) + <usize>this.off;
    const len = <usize>String.UTF8.encodeUnsafe(changetype<usize>(addr), addr.length, p + 1);
    store<u8>(p, <u8>len);
    store<u32>(p + 1 + len, value);
    this.off += 5 + <i32>len;
    this.count++;
  }

  /** The section: header (token, publishedAtMs, record count) and the records added since begin(). */
  finish(token: u32, nowMs: u64): ArrayBuffer {
    const p = changetype<usize>(this.buf);
    store<u32>(p, token);
    store<u64>(p + 4, nowMs);
    store<u16>(p + 12, <u16>this.count);
    return this.buf.slice(0, this.off);
  }
}

/**
 * Walks a document of address-keyed sections: next() stops on each record of a live section
 * (another VM's, published within maxAgeMs), and `keep` collects the live sections read whole.
 * A malformed record ends the walk there (its section is not kept).
 */
export class AddrSections {
  keep: Array<ArrayBuffer> = new Array<ArrayBuffer>();
  /** The current record: its section's VM token and publishedAtMs, its address bytes and its value's address. */
  vm: u32 = 0;
  at: u64 = 0;
  addrPtr: usize = 0;
  addrLen: i32 = 0;
  valuePtr: usize = 0;
  private p: usize;
  private n: i32;
  private off: i32 = 0;
  private start: i32 = 0;
  private remaining: i32 = 0;
  private live: bool = false;

  constructor(private doc: ArrayBuffer, private token: u32, private nowMs: u64, private maxAgeMs: u64) {
    this.p = changetype<usize>(doc);
    this.n = doc.byteLength;
  }

  /** The current record's address, decoded (allocates). */
  addr(): string { return String.UTF8.decodeUnsafe(this.addrPtr, <usize>this.addrLen); }

  next(): bool {
    const p = this.p, n = this.n;
    for (;;) {
      if (this.remaining > 0) {
        const off = this.off;
        if (off + 1 > n) return false;
        const len = <i32>load<u8>(p + <usize>off);
        if (off + 1 + len + 4 > n) return false;
        this.addrPtr = p + <usize>off + 1;
        this.addrLen = len;
        this.valuePtr = p + <usize>(off + 1 + len);
        this.off = off + 1 + len + 4;
        this.remaining--;
        if (this.live && this.remaining == 0) this.keep.push(this.doc.slice(this.start, this.off));
        if (this.live) return true;
        continue;
      }
      const off = this.off;
      if (off + ADDR_SECTION_HEADER_BYTES > n) return false;
      const t = load<u32>(p + <usize>off);
      this.vm = t;
      this.at = load<u64>(p + <usize>off + 4);
      this.remaining = <i32>load<u16>(p + <usize>off + 12);
      this.start = off;
      this.off = off + ADDR_SECTION_HEADER_BYTES;
      this.live = t != this.token && this.at + this.maxAgeMs >= this.nowMs;
      if (this.live && this.remaining == 0) this.keep.push(this.doc.slice(this.start, this.off));
    }
    return false;
  }
}
