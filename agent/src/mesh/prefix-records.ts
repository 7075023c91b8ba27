// Prefix placements across proxies, the agent's side (issue 22 item 2, docs/mesh.md "Prefix
// placements", docs/benchmarks/mesh-r9.md). A version-2 in-flight report carries, after its
// counts, the (block hash, address) records the proxy placed since its last report; the agent
// keeps the records of its proxies (and of the other agents, NATS) in one bounded log and answers
// each version-2 report with the records of the OTHER proxies it has not given that proxy yet.
// The filter applies them as remote knowledge (filter/assembly/lib/mesh-prefix.ts, same format):
//
//   u16 sectionCount, per section: u8 nameLen (1..255), service UTF-8, u16 addrCount,
//   addrCount × (u8 len 1..255, address UTF-8), u16 recordCount, recordCount × (u64 blockHash,
//   u16 addrIndex)
//
// A framing error refuses the document (InflightFormatError); a record with hash 0 or an address
// index outside its table is counted (`bad`) and dropped. Nothing here runs per request: one
// report per proxy per meshReportMs, bounded by the caller's per-report bound.

export interface PrefixRecord {
  service: string;
  addr: string;
  hash: bigint;
}

export class PrefixFormatError extends Error {}

/** Decodes a trailer at `off`; returns the records, the malformed records dropped, and where it ends. */
export function decodePrefixTrailer(buf: Buffer, off: number): { records: PrefixRecord[]; bad: number; end: number } {
  const records: PrefixRecord[] = [];
  let bad = 0;
  const need = (n: number, what: string): void => { if (off + n > buf.length) throw new PrefixFormatError(`prefix ${what} is cut off`); };
  need(2, 'trailer');
  const sections = buf.readUInt16LE(off);
  off += 2;
  for (let s = 0; s < sections; s++) {
    need(1, `section ${s}`);
    const nameLen = buf.readUInt8(off);
    if (nameLen === 0) throw new PrefixFormatError(`prefix section ${s} has an empty service name`);
    need(1 + nameLen, `section ${s}`);
    const service = buf.toString('utf8', off + 1, off + 1 + nameLen);
    off += 1 + nameLen;
    need(2, `section ${s}`);
    const nAddr = buf.readUInt16LE(off);
    off += 2;
    const addrs: string[] = [];
    for (let a = 0; a < nAddr; a++) {
      need(1, `section ${s} address ${a}`);
      const len = buf.readUInt8(off);
      if (len === 0) throw new PrefixFormatError(`prefix section ${s} address ${a} is empty`);
      need(1 + len, `section ${s} address ${a}`);
      addrs.push(buf.toString('utf8', off + 1, off + 1 + len));
      off += 1 + len;
    }
    need(2, `section ${s}`);
    const nRec = buf.readUInt16LE(off);
    off += 2;
    need(nRec * 10, `section ${s} records`);
    for (let k = 0; k < nRec; k++, off += 10) {
      const hash = buf.readBigUInt64LE(off);
      const ai = buf.readUInt16LE(off + 8);
      if (hash === 0n || ai >= addrs.length) { bad++; continue; }
      records.push({ service, addr: addrs[ai], hash });
    }
  }
  return { records, bad, end: off };
}

/** Encodes records as a trailer: one section per service, its own address table (at most 65,535 records and addresses per section). */
export function encodePrefixTrailer(records: Iterable<PrefixRecord>): Buffer {
  const bySvc = new Map<string, { addrs: Map<string, number>; recs: Array<[bigint, number]> }>();
  for (const r of records) {
    const name = Buffer.byteLength(r.service, 'utf8');
    const alen = Buffer.byteLength(r.addr, 'utf8');
    if (name === 0 || name > 255 || alen === 0 || alen > 255 || r.hash === 0n) continue;
    let g = bySvc.get(r.service);
    if (!g) bySvc.set(r.service, (g = { addrs: new Map(), recs: [] }));
    if (g.recs.length >= 65535) continue;
    let ai = g.addrs.get(r.addr);
    if (ai === undefined) {
      if (g.addrs.size >= 65535) continue;
      g.addrs.set(r.addr, (ai = g.addrs.size));
    }
    g.recs.push([r.hash, ai]);
  }
  const parts: Buffer[] = [Buffer.alloc(2)];
  parts[0].writeUInt16LE(Math.min(65535, bySvc.size), 0);
  let n = 0;
  for (const [service, g] of bySvc) {
    if (n++ >= 65535) break;
    const name = Buffer.from(service, 'utf8');
    const head = Buffer.alloc(1 + name.length + 2);
    head.writeUInt8(name.length, 0);
    name.copy(head, 1);
    head.writeUInt16LE(g.addrs.size, 1 + name.length);
    parts.push(head);
    for (const a of g.addrs.keys()) {
      const b = Buffer.from(a, 'utf8');
      parts.push(Buffer.from([b.length]), b);
    }
    const recs = Buffer.alloc(2 + 10 * g.recs.length);
    recs.writeUInt16LE(g.recs.length, 0);
    g.recs.forEach(([h, ai], k) => {
      recs.writeBigUInt64LE(h, 2 + 10 * k);
      recs.writeUInt16LE(ai, 2 + 10 * k + 8);
    });
    parts.push(recs);
  }
  return Buffer.concat(parts);
}

/**
 * The agent's bounded log of recent placements: a ring of `capacity` records with a running
 * sequence number, each tagged with its origin (a local proxy's id; 0 = another agent's, via NATS).
 * Every proxy holds a cursor (the next sequence it has not been given); a proxy slower than the
 * ring loses the overwritten records (counted in `lost`).
 */
export class PrefixLog {
  private readonly recs: Array<PrefixRecord | undefined>;
  private readonly origins: Int32Array;
  /** sequence number of the next record */
  end = 0;
  lost = 0;

  constructor(readonly capacity: number) {
    this.recs = new Array(capacity).fill(undefined);
    this.origins = new Int32Array(capacity);
  }

  append(origin: number, records: Iterable<PrefixRecord>): void {
    for (const r of records) {
      const i = this.end % this.capacity;
      this.recs[i] = r;
      this.origins[i] = origin | 0;
      this.end++;
    }
  }

  /** The records from sequence `from` on not of `origin`, at most `max`; `next` is where the proxy's cursor goes. */
  since(from: number, origin: number, max: number): { records: PrefixRecord[]; next: number } {
    let s = from;
    if (this.end - s > this.capacity) {
      this.lost += this.end - s - this.capacity;
      s = this.end - this.capacity;
    }
    const out: PrefixRecord[] = [];
    for (; s < this.end && out.length < max; s++) {
      const i = s % this.capacity;
      if (this.origins[i] === (origin | 0)) continue;
      out.push(this.recs[i]!);
    }
    return { records: out, next: s };
  }
}
