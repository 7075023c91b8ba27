// Mesh-wide in-flight (issue 22 item 2, docs/mesh.md "Mesh-wide in-flight"): the agent's side.
//
// Every proxy's snapshot writer POSTs the proxy's in-flight counts per instance on its tick
// (filter/assembly/lib/mesh-inflight.ts has the same format); the agent keeps the last report of
// every live proxy and answers each report with the OTHER proxies' counts: the sum over its live
// proxies minus this one, plus what the other agents of the mesh reported over NATS (their own
// proxies' sums, agent/src/mesh/inflight-exchange.ts). Bounded: at most maxProxies reports (each
// expires expireReports × its interval after it came), addresses of the live fleet only (the
// `isInstance` check) and at most maxInstances of them, at most 65,535 records per document.
//
// Wire format (little-endian): u8 version (1), u8 kind (1 report, 2 answer), u16 intervalMs (a
// report: its interval; an answer or an agent's sums: the weighted mean age in ms, >= 1, of the
// counts it sums, 0 = not stated -- the filter dates the counts by it),
// u32 proxyId, u64 atMs, u16 count, count × (u8 addrLen 1..255, addr UTF-8, u32 count).
// Version 2: the same followed by the prefix-placement trailer (prefix-records.ts); a version-2
// report is answered in version 2 with the other proxies' placements (at most prefixRecords).
import { randomInt } from 'node:crypto';
import { decodePrefixTrailer, encodePrefixTrailer, PrefixFormatError, PrefixLog, type PrefixRecord } from './prefix-records';

export const INFLIGHT_CONTENT_TYPE = 'application/vnd.switchyard.inflight.v1';
export const INFLIGHT_VERSION = 1;
/** version 2: with the prefix-placement trailer */
export const INFLIGHT_VERSION_PREFIX = 2;
export const KIND_REPORT = 1;
export const KIND_ANSWER = 2;
/** an agent's own proxies' sums, on NATS (inflight-exchange.ts) */
export const KIND_AGENT = 3;
/** a pool leader's mesh-wide totals, on NATS (inflight-exchange.ts, inflight.exchange leader) */
export const KIND_TOTAL = 4;
/** an agent's (or a pool leader's relay of) prefix placements, on NATS (inflight-exchange.ts): no counts, the prefix trailer */
export const KIND_PREFIX = 5;
/**
 * The age field of an answer whose agent does not know the rest of the mesh's counts (leader mode:
 * no current total from the pool's leader, NATS lost): the filter prices without mesh in-flight at
 * once (lib/mesh-inflight.ts), never on a partial sum -- that would be cheaper than the truth.
 */
export const AGE_UNKNOWN = 65535;
export const HEADER_BYTES = 18;
export const MAX_RECORDS = 65535;
/** A report's counts stand at least this long (ms), whatever its interval. */
export const MIN_EXPIRE_MS = 100;

export interface InflightDoc {
  kind: number;
  intervalMs: number;
  proxyId: number;
  atMs: number;
  /** address -> count (> 0) */
  counts: Map<string, number>;
  version: number;
  /** version 2: the placements carried, and the malformed records dropped */
  prefix?: PrefixRecord[];
  prefixBad?: number;
}

export class InflightFormatError extends Error {}

/** Decodes a report or answer; throws InflightFormatError naming what is wrong. */
export function decodeInflight(buf: Buffer): InflightDoc {
  if (buf.length < HEADER_BYTES) throw new InflightFormatError(`body of ${buf.length} bytes is shorter than the ${HEADER_BYTES}-byte header`);
  const version = buf.readUInt8(0);
  if (version !== INFLIGHT_VERSION && version !== INFLIGHT_VERSION_PREFIX) throw new InflightFormatError(`version ${version} (expected ${INFLIGHT_VERSION} or ${INFLIGHT_VERSION_PREFIX})`);
  const kind = buf.readUInt8(1);
  if (kind !== KIND_REPORT && kind !== KIND_ANSWER && kind !== KIND_AGENT && kind !== KIND_TOTAL && kind !== KIND_PREFIX) throw new InflightFormatError(`kind ${kind} (expected ${KIND_REPORT} report, ${KIND_ANSWER} answer, ${KIND_AGENT} an agent's sums, ${KIND_TOTAL} a leader's totals or ${KIND_PREFIX} placements)`);
  const count = buf.readUInt16LE(16);
  const counts = new Map<string, number>();
  let off = HEADER_BYTES;
  for (let i = 0; i < count; i++) {
    if (off + 1 > buf.length) throw new InflightFormatError(`record ${i} of ${count} is cut off`);
    const len = buf.readUInt8(off);
    if (len === 0) throw new InflightFormatError(`record ${i} has an empty address`);
    if (off + 1 + len + 4 > buf.length) throw new InflightFormatError(`record ${i} of ${count} is cut off`);
    const addr = buf.toString('utf8', off + 1, off + 1 + len);
    const n = buf.readUInt32LE(off + 1 + len);
    if (n > 0x7fffffff) throw new InflightFormatError(`record ${i} (${addr}): count ${n} out of range`);
    if (n > 0) counts.set(addr, (counts.get(addr) ?? 0) + n);
    off += 1 + len + 4;
  }
  let prefix: PrefixRecord[] | undefined;
  let prefixBad: number | undefined;
  if (version === INFLIGHT_VERSION_PREFIX) {
    try {
      const t = decodePrefixTrailer(buf, off);
      prefix = t.records;
      prefixBad = t.bad;
      off = t.end;
    } catch (e) {
      if (e instanceof PrefixFormatError) throw new InflightFormatError(e.message);
      throw e;
    }
  }
  if (off !== buf.length) throw new InflightFormatError(`${buf.length - off} bytes after the last record`);
  return { kind, intervalMs: buf.readUInt16LE(2), proxyId: buf.readUInt32LE(4), atMs: Number(buf.readBigUInt64LE(8)), counts, version, prefix, prefixBad };
}

/** Encodes a document; zero counts and addresses over 255 bytes are left out, at most MAX_RECORDS records. */
export function encodeInflight(kind: number, intervalMs: number, proxyId: number, atMs: number, counts: Iterable<[string, number]>, prefix?: Iterable<PrefixRecord>): Buffer {
  const recs: Array<[Buffer, number]> = [];
  let size = HEADER_BYTES;
  for (const [addr, n] of counts) {
    if (!(n > 0) || recs.length >= MAX_RECORDS) continue;
    const a = Buffer.from(addr, 'utf8');
    if (a.length === 0 || a.length > 255) continue;
    recs.push([a, Math.min(n, 0x7fffffff)]);
    size += 5 + a.length;
  }
  const trailer = prefix ? encodePrefixTrailer(prefix) : undefined;
  const out = Buffer.alloc(size + (trailer?.length ?? 0));
  out.writeUInt8(trailer ? INFLIGHT_VERSION_PREFIX : INFLIGHT_VERSION, 0);
  out.writeUInt8(kind, 1);
  out.writeUInt16LE(Math.max(0, Math.min(65535, Math.round(intervalMs))), 2);
  out.writeUInt32LE(proxyId >>> 0, 4);
  out.writeBigUInt64LE(BigInt(Math.max(0, Math.floor(atMs))), 8);
  out.writeUInt16LE(recs.length, 16);
  let off = HEADER_BYTES;
  for (const [a, n] of recs) {
    out.writeUInt8(a.length, off);
    a.copy(out, off + 1);
    out.writeUInt32LE(n, off + 1 + a.length);
    off += 5 + a.length;
  }
  trailer?.copy(out, off);
  return out;
}

export interface InflightOptions {
  /** live proxies (reports) kept; a new proxy beyond it is refused */
  maxProxies: number;
  /** addresses summed; new ones beyond it are ignored */
  maxInstances: number;
  /** a report expires this many of its intervals after it came (at least MIN_EXPIRE_MS) */
  expireReports: number;
  /** the live fleet: an address the agent does not know is ignored (default: every address) */
  isInstance?: (addr: string) => boolean;
  /** clock (ms) */
  now?: () => number;
  /** prefix placements: records taken per report and given per answer at most (default PREFIX_DEFAULT_RECORDS) */
  prefixRecords?: number;
  /** prefix placements: records the agent's log holds (default PREFIX_DEFAULT_LOG) */
  prefixLog?: number;
}

/** Records per report and per answer (inflight.prefixRecords): the filter's outbox ring (MAX_RING), what a proxy absorbs per report. */
export const PREFIX_DEFAULT_RECORDS = 4096;
/** The log (inflight.prefixLog): 16 answers' worth (a proxy may miss a few reports and still get every record). */
export const PREFIX_DEFAULT_LOG = 65536;

interface Held {
  counts: Map<string, number>;
  expiresAt: number;
  /** version 2: the next prefix-log sequence this proxy has not been given */
  prefixNext?: number;
  /** when its counts were taken (ms, this agent's clock): a report's receipt; another agent's receipt minus its stated age */
  takenAt: number;
  /** its weight in the answers' age: Σ counts + 1 (a proxy with nothing in flight still says "0 now") */
  weight: number;
  /**
   * another agent's sums (or a leader's total): the age they were stated with, when they came, and
   * how long an unchanged value stays current (the sender publishes every change within it: its
   * exchangeMs). Their age is statedAge + min(time since receipt, freshMs) -- an unchanged value
   * is not re-sent, and is not older for that.
   */
  statedAge?: number;
  receivedAt?: number;
  freshMs?: number;
}

/** The age (ms) of another agent's held sums now (Held.statedAge). */
function remoteAgeOf(h: Held, now: number): number {
  const since = now - (h.receivedAt ?? now);
  return (h.statedAge ?? 0) + Math.min(since, h.freshMs ?? since);
}

/** Σ weight and Σ weight × takenAt over some Held entries: their weighted mean taking time, kept incrementally. */
class AgeSum {
  w = 0;
  wt = 0;
  add(h: Held, sign: 1 | -1): void {
    this.w += sign * h.weight;
    this.wt += sign * h.weight * h.takenAt;
  }
  reset(): void { this.w = 0; this.wt = 0; }
}

function weightOf(counts: Map<string, number>): number {
  let w = 1;
  for (const n of counts.values()) w += n;
  return w;
}

/** The u16 age field of an answer or an agent's sums: ≥ 1 ms when stated (0 = not stated). */
export function encodeAgeMs(ageMs: number): number {
  if (!Number.isFinite(ageMs)) return 0;
  return Math.max(1, Math.min(AGE_UNKNOWN - 1, Math.round(ageMs)));
}

export type ReportResult =
  | { ok: true; proxyId: number; answer: Buffer; ignored: number; remoteUnknown?: boolean }
  | { ok: false; status: number; error: string };

/** Adds `counts` (sign +1) or removes them (-1) from `total`; zero entries are deleted. */
function addInto(total: Map<string, number>, counts: Map<string, number>, sign: 1 | -1): void {
  for (const [a, n] of counts) {
    const v = (total.get(a) ?? 0) + sign * n;
    if (v > 0) total.set(a, v);
    else total.delete(a);
  }
}

export class InflightAggregator {
  private readonly proxies = new Map<number, Held>();
  /** Σ over the live proxies' reports */
  private readonly local = new Map<string, number>();
  /** per other agent (NATS): its local sum, and Σ over them */
  private readonly agents = new Map<string, Held>();
  private readonly remote = new Map<string, number>();
  /** the answers' age (docs/mesh.md "Delays"): the local reports' weighted mean taking time (the other agents' ages: othersAgeMs) */
  private readonly localAge = new AgeSum();
  private readonly now: () => number;
  private nextSweepAt = 0;
  /** counters for /metrics and the tests */
  readonly stats = {
    reports: 0, refused: 0, ignoredRecords: 0, expiredProxies: 0, expiredAgents: 0, refusedProxies: 0,
    /** prefix placements: taken from reports (and other agents), given in answers, dropped (malformed, not an instance, over the per-report bound) */
    prefixIn: 0, prefixOut: 0, prefixIgnored: 0,
  };
  /** prefix placements of every live proxy and of the other agents (prefix-records.ts) */
  readonly prefixLog: PrefixLog;
  private readonly prefixRecords: number;
  /** called with the placements this agent's proxies reported (the NATS exchange sends them on) */
  onLocalPrefix?: (records: PrefixRecord[]) => void;
  /** called when the local sum changed (the NATS exchange coalesces these) */
  onLocalChange?: () => void;
  /** set by the NATS exchange (leader mode): false while the rest of the mesh's counts are unknown */
  remoteKnown?: () => boolean;

  constructor(readonly opts: InflightOptions) {
    this.now = opts.now ?? Date.now;
    this.prefixRecords = opts.prefixRecords ?? PREFIX_DEFAULT_RECORDS;
    this.prefixLog = new PrefixLog(opts.prefixLog ?? PREFIX_DEFAULT_LOG);
  }

  /** Placements of the live fleet only, at most prefixRecords: the rest counted as ignored. */
  private keepPrefix(records: PrefixRecord[], bad: number): PrefixRecord[] {
    const kept: PrefixRecord[] = [];
    let ignored = bad;
    for (const r of records) {
      if (kept.length >= this.prefixRecords || (this.opts.isInstance && !this.opts.isInstance(r.addr))) { ignored++; continue; }
      kept.push(r);
    }
    this.stats.prefixIgnored += ignored;
    this.stats.prefixIn += kept.length;
    return kept;
  }

  /** Another agent's proxies' placements (NATS): every local proxy is given them. */
  agentPrefix(records: PrefixRecord[]): void {
    this.prefixLog.append(0, this.keepPrefix(records, 0));
  }

  get proxyCount(): number { return this.proxies.size; }
  get agentCount(): number { return this.agents.size; }
  /** this agent's proxies' counts summed (what it tells the other agents) */
  localTotals(): ReadonlyMap<string, number> { return this.local; }

  private expiryOf(intervalMs: number): number {
    return Math.max(MIN_EXPIRE_MS, this.opts.expireReports * intervalMs);
  }

  /** Drops expired reports and agents; runs at most every MIN_EXPIRE_MS / 2 (its cost is the number of proxies). */
  sweep(now = this.now(), force = false): void {
    if (!force && now < this.nextSweepAt) return;
    this.nextSweepAt = now + MIN_EXPIRE_MS / 2;
    let changed = false;
    // the age sums are recomputed here (the loops visit every entry anyway): no drift accumulates
    this.localAge.reset();
    for (const [id, h] of this.proxies) {
      if (h.expiresAt > now) { this.localAge.add(h, 1); continue; }
      addInto(this.local, h.counts, -1);
      this.proxies.delete(id);
      this.stats.expiredProxies++;
      changed = true;
    }
    for (const [id, h] of this.agents) {
      if (h.expiresAt > now) continue;
      addInto(this.remote, h.counts, -1);
      this.agents.delete(id);
      this.stats.expiredAgents++;
    }
    if (changed) this.onLocalChange?.();
  }

  /** A proxy's report (the POST body): stores it and returns the answer (the other proxies' counts). */
  report(body: Buffer): ReportResult {
    const now = this.now();
    let doc: InflightDoc;
    try {
      doc = decodeInflight(body);
    } catch (e) {
      this.stats.refused++;
      return { ok: false, status: 400, error: (e as Error).message };
    }
    if (doc.kind !== KIND_REPORT) {
      this.stats.refused++;
      return { ok: false, status: 400, error: `kind ${doc.kind} is not a report (${KIND_REPORT})` };
    }
    this.sweep(now);
    let id = doc.proxyId;
    const held = id !== 0 ? this.proxies.get(id) : undefined;
    if (!held && this.proxies.size >= this.opts.maxProxies) {
      this.stats.refusedProxies++;
      return { ok: false, status: 503, error: `${this.proxies.size} proxies report already (inflight.maxProxies)` };
    }
    if (id === 0) id = this.newId();
    // the live fleet only, and at most maxInstances addresses summed
    const counts = new Map<string, number>();
    let ignored = 0;
    let added = 0; // addresses this report adds to the sum
    for (const [a, n] of doc.counts) {
      const known = this.opts.isInstance ? this.opts.isInstance(a) : true;
      const isNew = !this.local.has(a);
      if (!known || (isNew && this.local.size + added >= this.opts.maxInstances)) { ignored++; continue; }
      if (isNew) added++;
      counts.set(a, n);
    }
    this.stats.ignoredRecords += ignored;
    if (held) { addInto(this.local, held.counts, -1); this.localAge.add(held, -1); }
    addInto(this.local, counts, 1);
    const h: Held = { counts, expiresAt: now + this.expiryOf(doc.intervalMs), takenAt: now, weight: weightOf(counts) };
    // version 2: its placements into the log; the answer gives it the others' since its last answer
    let prefixOut: PrefixRecord[] | undefined;
    if (doc.prefix) {
      const mine = this.keepPrefix(doc.prefix, doc.prefixBad ?? 0);
      const from = held?.prefixNext ?? this.prefixLog.end;
      this.prefixLog.append(id, mine);
      if (mine.length) this.onLocalPrefix?.(mine);
      const got = this.prefixLog.since(from, id, this.prefixRecords);
      h.prefixNext = got.next;
      prefixOut = got.records;
      this.stats.prefixOut += prefixOut.length;
    } else if (held?.prefixNext !== undefined) h.prefixNext = held.prefixNext;
    this.localAge.add(h, 1);
    this.proxies.set(id, h);
    this.stats.reports++;
    if (!held || !sameCounts(held.counts, counts)) this.onLocalChange?.();
    // the report is kept (its counts travel to the other agents) but the answer says "unknown"
    if (this.remoteKnown && !this.remoteKnown()) return { ok: true, proxyId: id, ignored, remoteUnknown: true, answer: encodeInflight(KIND_ANSWER, AGE_UNKNOWN, id, now, [], prefixOut) };
    return { ok: true, proxyId: id, ignored, answer: encodeInflight(KIND_ANSWER, this.othersAgeMs(h, now), id, now, this.othersOf(counts), prefixOut) };
  }

  /**
   * How old (ms) the counts an answer to the proxy of `own` sums are: the weighted mean age of the
   * other proxies' last reports and of the other agents' sums (their age when sent plus the time
   * since). The filter dates the answer's counts by it (lib/mesh-inflight.ts answerInfoMs). 0 (not
   * stated) when nothing else is summed.
   */
  private othersAgeMs(own: Held | undefined, now: number): number {
    let lw = this.localAge.w;
    let lwt = this.localAge.wt;
    if (own) { lw -= own.weight; lwt -= own.weight * own.takenAt; }
    // Σ weight × age: the local reports' (incremental), the other agents' (a few entries; at most maxAgents)
    let w = lw;
    let wa = lw * now - lwt;
    for (const h of this.agents.values()) {
      w += h.weight;
      wa += h.weight * remoteAgeOf(h, now);
    }
    if (!(w >= 0.5)) return 0;
    return encodeAgeMs(wa / w);
  }

  /** The weighted mean age (ms) of this agent's own proxies' counts (what it tells the other agents with its sums; 0: none). */
  localAgeMs(now = this.now()): number {
    if (!(this.localAge.w >= 0.5)) return 0;
    return encodeAgeMs(now - this.localAge.wt / this.localAge.w);
  }

  /** Σ over every other proxy of the mesh: local − this one's + the other agents'. */
  private *othersOf(own: Map<string, number>): Iterable<[string, number]> {
    for (const [a, n] of this.local) {
      const v = n - (own.get(a) ?? 0) + (this.remote.get(a) ?? 0);
      if (v > 0) yield [a, v];
    }
    for (const [a, n] of this.remote) if (!this.local.has(a) && n > 0) yield [a, n];
  }

  /** Another agent's local sums (NATS); `expireMs` after which they no longer count. */
  agentTotals(agentId: string, counts: Map<string, number>, expireMs: number, maxAgents: number, ageMs = 0, freshMs?: number): boolean {
    const now = this.now();
    this.sweep(now);
    const held = this.agents.get(agentId);
    if (!held && this.agents.size >= maxAgents) return false;
    const kept = new Map<string, number>();
    for (const [a, n] of counts) {
      if (this.opts.isInstance && !this.opts.isInstance(a)) continue;
      if (kept.size >= this.opts.maxInstances) break;
      if (n > 0) kept.set(a, n);
    }
    if (held) addInto(this.remote, held.counts, -1);
    addInto(this.remote, kept, 1);
    const stated = ageMs > 0 && ageMs < AGE_UNKNOWN ? ageMs : 0;
    const h: Held = { counts: kept, expiresAt: now + expireMs, takenAt: now - stated, weight: weightOf(kept), statedAge: stated, receivedAt: now, freshMs };
    this.agents.set(agentId, h);
    return true;
  }

  /** Whether another agent's (or a leader's total) entry is held. */
  hasAgent(agentId: string): boolean { return this.agents.has(agentId); }

  /** The other agents' entry for one agent disappears at once (it said goodbye). */
  dropAgent(agentId: string): void {
    const held = this.agents.get(agentId);
    if (!held) return;
    addInto(this.remote, held.counts, -1);
    this.agents.delete(agentId);
  }

  private newId(): number {
    for (;;) {
      const id = randomInt(1, 0xffffffff);
      if (!this.proxies.has(id)) return id;
    }
  }
}

function sameCounts(a: Map<string, number>, b: Map<string, number>): boolean {
  if (a.size !== b.size) return false;
  for (const [k, v] of a) if (b.get(k) !== v) return false;
  return true;
}
