// Measurement model for issue 22 item 2 (docs/benchmarks/mesh-r9.md): what would sharing prefix
// placements ACROSS proxies buy? The shipped filter shares its prefix index across the worker VMs
// of one proxy through one shared-data document per service (filter/assembly/lib/request/
// prefix-share.ts: per VM a section of (block hash, address) records, each record once, by sequence
// number). This model carries those sections between the K proxies' hosts, coalesced and bounded
// as a mesh exchange would carry them:
//
// - every report period (loadAware.meshReportMs, 50 ms, quantized by the 20 ms tick as the mesh
//   in-flight report is), each proxy contributes the records its own VMs published since its last
//   contribution, at most `maxRecords` (the newest kept; the rest counted as dropped);
// - they reach every other proxy one report period later (the receiver's next answer), written
//   into its document as a section under a token of their own, so the receiver's VMs apply them on
//   their next tick through the same merge (index.learn) as another worker VM's records.
//
// No filter change: this is the upper bound of what the records the filter already produces for
// its own VMs would give when exchanged over the mesh (a real exchange adds the NATS hop between
// agents, ~1 ms on a LAN, and its own framing). K = 1: nothing to exchange, exactly today's run.
import { START_EPOCH_MS, type SwitchyardFilterPolicy } from './filter';
import { LLM_SERVICE } from './agent';

const KEY = `switchyard.prefix.v1.${LLM_SERVICE}`;
const HEADER = 26;
const RECORD = 10;
/** tokens of the injected sections: the filter's own VM tokens count up from 1 */
const REMOTE = 0x80000000;
/** records a proxy holds back for a later period at most (the filter's ring capacity, MAX_RING) */
const BACKLOG = 4096;

interface Section { token: number; at: bigint; first: bigint; addrs: Buffer[]; records: Buffer }

function parse(doc: Buffer): Section[] {
  const out: Section[] = [];
  let off = 0;
  while (off + HEADER <= doc.length) {
    const token = doc.readUInt32LE(off);
    const at = doc.readBigUInt64LE(off + 4);
    const first = doc.readBigUInt64LE(off + 12);
    const nAddr = doc.readUInt16LE(off + 20);
    const nRec = doc.readUInt32LE(off + 22);
    off += HEADER;
    const addrs: Buffer[] = [];
    for (let a = 0; a < nAddr; a++) {
      const len = doc[off];
      addrs.push(doc.subarray(off + 1, off + 1 + len));
      off += 1 + len;
    }
    out.push({ token, at, first, addrs, records: doc.subarray(off, off + nRec * RECORD) });
    off += nRec * RECORD;
  }
  return out;
}

function encode(s: Section): Buffer {
  const addrBytes = s.addrs.reduce((a, b) => a + 1 + b.length, 0);
  const out = Buffer.alloc(HEADER + addrBytes + s.records.length);
  out.writeUInt32LE(s.token >>> 0, 0);
  out.writeBigUInt64LE(s.at, 4);
  out.writeBigUInt64LE(s.first, 12);
  out.writeUInt16LE(s.addrs.length, 20);
  out.writeUInt32LE(s.records.length / RECORD, 22);
  let off = HEADER;
  for (const a of s.addrs) {
    out[off] = a.length;
    a.copy(out, off + 1);
    off += 1 + a.length;
  }
  s.records.copy(out, off);
  return out;
}

export interface PrefixMeshStats {
  periods: number;
  /** records contributed (after the bound), and dropped by it */
  sent: number;
  dropped: number;
  /** the largest contribution of one proxy in one period */
  maxPerPeriod: number;
}

export class PrefixMesh {
  private next = 0;
  /** per proxy, per own VM token: the next sequence number not yet contributed */
  private fwd: Array<Map<number, bigint>>;
  /** per proxy, per remote token: a running sequence for the injected section */
  private seq: Array<Map<number, bigint>>;
  private queue: Array<{ due: number; from: number; s: Section }> = [];
  /** per proxy, records published by its VMs and not contributed yet */
  private backlog: Array<Array<{ token: number; addrs: Buffer[]; rec: Buffer }>>;
  readonly stats: PrefixMeshStats = { periods: 0, sent: 0, dropped: 0, maxPerPeriod: 0 };

  constructor(private readonly proxies: SwitchyardFilterPolicy[], readonly maxRecords: number, readonly periodMs = 50, readonly delayMs = 50) {
    this.fwd = proxies.map(() => new Map());
    this.seq = proxies.map(() => new Map());
    this.backlog = proxies.map(() => []);
  }

  /** after every proxy was moved to virtual time s (between ticks: no VM runs) */
  at(s: number): void {
    for (const q of this.queue.filter((x) => x.due <= s)) this.deliver(q.from, q.s, s);
    this.queue = this.queue.filter((x) => x.due > s);
    if (s < this.next) return;
    this.next = (this.next > 0 && s - this.next < this.periodMs ? this.next : s) + this.periodMs;
    this.stats.periods++;
    this.proxies.forEach((p, j) => {
      const cur = p.shared(KEY);
      if (cur) {
        for (const sec of parse(cur.value)) {
          if (sec.token & REMOTE) continue;
          const n = BigInt(sec.records.length / RECORD);
          const end = sec.first + n;
          const from0 = this.fwd[j].get(sec.token) ?? 0n;
          const from = from0 > sec.first ? from0 : sec.first;
          if (from >= end) continue;
          this.fwd[j].set(sec.token, end);
          for (let q = Number(from - sec.first); q < Number(n); q++) this.backlog[j].push({ token: sec.token, addrs: sec.addrs, rec: sec.records.subarray(q * RECORD, (q + 1) * RECORD) });
        }
      }
      // the bound: at most maxRecords per period, oldest first (a placement's leading blocks before
      // its later ones: the index matches from block 0); what waits beyond BACKLOG is dropped
      const b = this.backlog[j];
      if (b.length > BACKLOG) { this.stats.dropped += b.length - BACKLOG; b.splice(0, b.length - BACKLOG); }
      const take = b.splice(0, Math.min(this.maxRecords, b.length));
      if (!take.length) return;
      this.stats.sent += take.length;
      this.stats.maxPerPeriod = Math.max(this.stats.maxPerPeriod, take.length);
      // one section per proxy and period: the records re-addressed into one address table
      const table = new Map<string, number>();
      const addrs: Buffer[] = [];
      const recs = Buffer.alloc(take.length * RECORD);
      take.forEach((t, q) => {
        t.rec.copy(recs, q * RECORD);
        const ai = t.rec.readUInt16LE(8);
        if (ai >= t.addrs.length) { recs.writeUInt16LE(0xffff, q * RECORD + 8); return; }
        const key = t.addrs[ai].toString('latin1');
        let k = table.get(key);
        if (k === undefined) { table.set(key, (k = addrs.length)); addrs.push(t.addrs[ai]); }
        recs.writeUInt16LE(k, q * RECORD + 8);
      });
      this.queue.push({ due: s + this.delayMs, from: j, s: { token: (REMOTE | (j << 8)) >>> 0, at: 0n, first: 0n, addrs, records: recs } });
    });
  }

  private deliver(from: number, sec: Section, s: number): void {
    this.proxies.forEach((p, i) => {
      if (i === from) return;
      const cur = p.shared(KEY);
      const secs = cur ? parse(cur.value) : [];
      // each batch continues the injected section's sequence (the receiver applies each record once)
      const first = this.seq[i].get(sec.token) ?? 1n;
      this.seq[i].set(sec.token, first + BigInt(sec.records.length / RECORD));
      const mine: Section = { ...sec, at: BigInt(START_EPOCH_MS + Math.round(s)), first };
      const rest = secs.filter((x) => x.token !== sec.token);
      p.setShared(KEY, Buffer.concat([...rest.map(encode), encode(mine)]));
    });
  }
}
