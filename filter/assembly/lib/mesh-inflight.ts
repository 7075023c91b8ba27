// Mesh-wide in-flight (issue 22 item 2, docs/mesh.md "Mesh-wide in-flight", docs/contracts.md).
//
// The snapshot writer VM of each proxy reports the proxy's in-flight counts per instance (its own
// plus its other workers', lib/inflight.ts) to its agent every loadAware.meshReportMs; the agent
// answers with the OTHER proxies' counts per instance (the mesh total minus this report). Every VM
// of the proxy adopts the answer on its tick (the writer passes it on through shared data) and
// prices an instance's backlog as q_scrape − n_all(at scrape) + n_all(now), n_all = own + the
// other proxies' (Inflight.setMesh / rebase). Nothing here runs per request.
//
// Wire format (both directions, little-endian):
//   u8 version (1), u8 kind (1 report, 2 answer), u16 intervalMs (report: meshReportMs; answer: the
//   count-weighted mean age in ms, at least 1, of the counts it sums; 0 = not stated; 65535 = the
//   agent does not know the rest of the mesh: unknown),
//   u32 proxyId (report: the id the agent gave, 0 = none yet; answer: this proxy's id),
//   u64 atMs (the sender's clock), u16 count, count × (u8 addrLen (1..255), addr UTF-8, u32 count).
// Only non-zero counts travel; an address absent from an answer has 0 in flight from other proxies.
// Version 2 (lib/mesh-prefix.ts): the same, followed by the prefix-placement trailer.
import { Inflight } from "./inflight";
import { MESH_VERSION_PREFIX, checkPrefixTrailer } from "./mesh-prefix";

export const MESH_VERSION: u8 = 1;
export const MESH_REPORT: u8 = 1;
export const MESH_ANSWER: u8 = 2;
export const MESH_HEADER_BYTES: i32 = 18;
/** Records per document: the u16 count field. */
export const MAX_MESH_RECORDS: i32 = 65535;
/** Largest answer the filter reads: 65,535 records of the longest address. */
export const MAX_MESH_ANSWER_BYTES: i32 = MESH_HEADER_BYTES + MAX_MESH_RECORDS * (1 + 255 + 4);
/** Remote counts older than this many report intervals are unknown (no answer came since). */
export const MESH_EXPIRE_REPORTS: i32 = 5;
/** ... and never before this (ms): a report round trip plus a few ticks. */
export const MESH_EXPIRE_MIN_MS: f64 = 100;

/** How long (ms) an answer's counts stand: MESH_EXPIRE_REPORTS intervals, at least MESH_EXPIRE_MIN_MS. */
export function meshExpiryMs(reportMs: i32): f64 {
  const e = <f64>reportMs * <f64>MESH_EXPIRE_REPORTS;
  return e > MESH_EXPIRE_MIN_MS ? e : MESH_EXPIRE_MIN_MS;
}

/**
 * The report: this proxy's in-flight count per live slot (local + other workers', i.e. without the
 * other proxies' counts), non-zero ones only, at most MAX_MESH_RECORDS of them. Runs on the tick
 * of one VM per proxy; its cost is the live fleet.
 */
export function encodeReport(inflight: Inflight, proxyId: u32, intervalMs: i32, nowMs: u64, trailer: ArrayBuffer | null = null): ArrayBuffer {
  const live = inflight.liveList();
  const addrs = inflight.addresses();
  let size = MESH_HEADER_BYTES;
  let count = 0;
  for (let k = 0; k < live.length && count < MAX_MESH_RECORDS; k++) {
    const s = unchecked(live[k]);
    const len = String.UTF8.byteLength(unchecked(addrs[s]));
    if (inflight.own(s) > 0 && len > 0 && len <= 255) { size += 5 + len; count++; }
  }
  const extra = trailer == null ? 0 : trailer.byteLength;
  const out = new ArrayBuffer(size + extra);
  const p = changetype<usize>(out);
  store<u8>(p, trailer == null ? MESH_VERSION : MESH_VERSION_PREFIX);
  store<u8>(p + 1, MESH_REPORT);
  store<u16>(p + 2, <u16>(intervalMs > 65535 ? 65535 : intervalMs));
  store<u32>(p + 4, proxyId);
  store<u64>(p + 8, nowMs);
  store<u16>(p + 16, <u16>count);
  let o = p + <usize>MESH_HEADER_BYTES;
  let written = 0;
  for (let k = 0; k < live.length && written < count; k++) {
    const s = unchecked(live[k]);
    const a = unchecked(addrs[s]);
    const len = String.UTF8.byteLength(a);
    const n = inflight.own(s);
    if (n <= 0 || len == 0 || len > 255) continue;
    store<u8>(o, <u8>len);
    String.UTF8.encodeUnsafe(changetype<usize>(a), a.length, o + 1);
    store<u32>(o + 1 + <usize>len, <u32>n);
    o += 5 + <usize>len;
    written++;
  }
  if (trailer != null) memory.copy(p + <usize>size, changetype<usize>(trailer), <usize>extra);
  return out;
}

/** A checked answer: its proxy id and where its records are (or why it was refused). */
export class MeshAnswer {
  ok: bool = false;
  error: string = "";
  proxyId: u32 = 0;
  count: i32 = 0;
  /** How old (ms) the agent says the counts it sums are (the u16 after the kind; 0: not stated). */
  ageMs: i32 = 0;
  /** Version 2: where the prefix trailer starts (-1: none, a version-1 answer). */
  prefixAt: i32 = -1;
}

/**
 * The age an agent states when it does not know the rest of the mesh's counts (its pool leader's
 * totals are missing, NATS is lost): the answer carries none, and the other proxies' counts are
 * unknown at once -- the price without mesh in-flight, never a partial (cheaper) sum.
 */
export const MESH_AGE_UNKNOWN: i32 = 65535;

/**
 * When (ms, the receiver's clock) the counts of an answer received at `receivedAtMs` were taken:
 * the agent's stated age of them, or (0: an agent that does not state it) half a report interval --
 * each other proxy's last report is up to one interval old when the agent answers.
 */
export function answerInfoMs(receivedAtMs: f64, ageMs: i32, reportMs: i32): f64 {
  return receivedAtMs - answerAgeMs(ageMs, reportMs);
}

/** The age an answer's counts are taken to have: the agent's statement, else half a report interval. */
export function answerAgeMs(ageMs: i32, reportMs: i32): f64 {
  return ageMs > 0 && ageMs != MESH_AGE_UNKNOWN ? <f64>ageMs : <f64>reportMs / 2;
}

/** Weight of a new answer's age in the running age (MeshReporter): about the last 10 answers, half a second. */
export const MESH_AGE_SMOOTHING: f64 = 0.1;

/**
 * The running age of the answers (ms; prev < 0: none yet). One answer's stated age is the mean
 * over the reports it sums, which scatters by up to a report interval from one answer to the next
 * (the reports' phases); taken one by one it made the counts' dates jump back and forth (a later
 * answer dated before an earlier one) and measured worse in the DES (fleet A, rho 0.95, K = 64:
 * 1.09 / 1.20x on seeds 1 / 2 against 0.96 / 1.07x with a constant half interval). The running
 * mean keeps the systematic part -- another agent's exchange and NATS hops add tens of ms -- and
 * drops the scatter.
 */
export function smoothAgeMs(prev: f64, sample: f64): f64 {
  return prev < 0 ? sample : prev + MESH_AGE_SMOOTHING * (sample - prev);
}

/**
 * Checks an answer's framing without applying it: version, kind, every record inside the body,
 * nothing after the last. A refused answer changes nothing (the last good counts stand until they
 * expire).
 */
export function checkAnswer(doc: ArrayBuffer): MeshAnswer {
  const a = new MeshAnswer();
  const n = doc.byteLength;
  const p = changetype<usize>(doc);
  if (n < MESH_HEADER_BYTES) { a.error = "answer of " + n.toString() + " bytes is shorter than its " + MESH_HEADER_BYTES.toString() + "-byte header"; return a; }
  const v = load<u8>(p);
  if (v != MESH_VERSION && v != MESH_VERSION_PREFIX) { a.error = "version " + v.toString() + " (expected " + MESH_VERSION.toString() + " or " + MESH_VERSION_PREFIX.toString() + ")"; return a; }
  const kind = load<u8>(p + 1);
  if (kind != MESH_ANSWER) { a.error = "kind " + kind.toString() + " is not an answer (" + MESH_ANSWER.toString() + ")"; return a; }
  const count = <i32>load<u16>(p + 16);
  let off = MESH_HEADER_BYTES;
  for (let i = 0; i < count; i++) {
    if (off + 1 > n) { a.error = "record " + i.toString() + " of " + count.toString() + " is cut off"; return a; }
    const len = <i32>load<u8>(p + <usize>off);
    if (len == 0) { a.error = "record " + i.toString() + " has an empty address"; return a; }
    if (off + 1 + len + 4 > n) { a.error = "record " + i.toString() + " of " + count.toString() + " is cut off"; return a; }
    const c = load<u32>(p + <usize>(off + 1 + len));
    if (c > 0x7fffffff) { a.error = "record " + i.toString() + " count " + c.toString() + " is out of range"; return a; }
    off += 1 + len + 4;
  }
  if (v == MESH_VERSION_PREFIX) {
    const t = checkPrefixTrailer(doc, off);
    if (!t.ok) { a.error = t.error; return a; }
    a.prefixAt = off;
    off = t.end;
  }
  if (off != n) { a.error = (n - off).toString() + " bytes after the last record"; return a; }
  a.ok = true;
  a.proxyId = load<u32>(p + 4);
  a.count = count;
  a.ageMs = <i32>load<u16>(p + 2);
  return a;
}

/**
 * Adopts a checked answer: every live slot's remote count is set (0 when the answer does not name
 * its address); addresses we hold no slot for are ignored (the document is input: never
 * allocates a slot). Returns the number of records that matched a slot.
 */
export function applyAnswer(doc: ArrayBuffer, checked: MeshAnswer, inflight: Inflight): i32 {
  const live = inflight.liveList();
  for (let k = 0; k < live.length; k++) inflight.setMesh(unchecked(live[k]), 0);
  const p = changetype<usize>(doc);
  let off = MESH_HEADER_BYTES;
  let matched = 0;
  for (let i = 0; i < checked.count; i++) {
    const len = <i32>load<u8>(p + <usize>off);
    const addr = String.UTF8.decodeUnsafe(p + <usize>off + 1, <usize>len);
    const c = <i32>load<u32>(p + <usize>(off + 1 + len));
    const s = inflight.slotOf(addr);
    if (s >= 0) { inflight.setMesh(s, c); matched++; }
    off += 1 + len + 4;
  }
  return matched;
}

/**
 * What the writer shares with its proxy's other VMs: `u64 receivedAtMs` (the writer's clock when
 * the answer came) followed by the answer as received. Every VM adopts a new one on its tick.
 */
export function wrapReceived(answer: ArrayBuffer, receivedAtMs: u64): ArrayBuffer {
  const out = new ArrayBuffer(8 + answer.byteLength);
  store<u64>(changetype<usize>(out), receivedAtMs);
  memory.copy(changetype<usize>(out) + 8, changetype<usize>(answer), <usize>answer.byteLength);
  return out;
}

/** The receive time of a wrapped answer (0 if too short). */
export function receivedAt(wrapped: ArrayBuffer): u64 {
  return wrapped.byteLength >= 8 ? load<u64>(changetype<usize>(wrapped)) : 0;
}

/** The answer inside a wrapped one. */
export function unwrapAnswer(wrapped: ArrayBuffer): ArrayBuffer {
  return wrapped.byteLength >= 8 ? wrapped.slice(8) : new ArrayBuffer(0);
}
