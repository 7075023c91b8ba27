// Snapshot binary format v1: the one TypeScript implementation (docs/contracts.md, "Snapshot
// binary format v1"). Little-endian; strings are UTF-8 with a u8 length prefix.
//
//   document = header (HEADER offsets below) + sections
//   section  = u16 type, u16 reserved(0), u32 payloadLength, payload
//
// Each section type is one SectionCodec (a write and a read of its payload); a new section type
// is one more codec plus one line in encodeSnapshot/decodeSnapshot. The meaning of the numbers
// and addresses (what is invalid, what is unknown) is in ./rules.ts and is applied by both
// encodeSnapshot (before writing) and decodeSnapshot (after reading).
//
// decodeSnapshot has no production caller: the agent only writes. It stays as the test oracle —
// the golden fixtures (test/fixtures/snapshot/) are decoded by it and by the filter, so the two
// decoders are held to the same rules — and for tools (`GET /v1/snapshot` checks in tests).
//
// seq, generatedAtMs and lastSampleAtMs are u64 on the wire and `number` here: a value above
// 2^53 is a structural error on both sides.
import * as zlib from 'node:zlib';
import { decodeLines, kvCapacities, LLM_DECODE_SECTION, LLM_KV_SECTION, LLM_SECTION, llmToJson, mergeDecodeLines, mergeKvCapacities, sanitizeLlm, SECTION_LLM, SECTION_LLM_DECODE, SECTION_LLM_KV, type InstanceLlmRecord, type LlmDecodeRecord, type LlmKvRecord } from './llm';
import { firstInvalidNumber, isEndpointAddress, judge, normalizeRtt, SLOTS_RULE, type InstanceNumberField } from './rules';
import { RULES_SECTION, SECTION_RULES_TYPE } from './rules-section';
import { readEndpoint, readRecords, writeRecords } from './records';
import type { RuleDecision } from '../rules/engine';

export const MAGIC = Buffer.from('SWY1', 'ascii');
export const FORMAT_VERSION = 1;
/** Byte offsets of the header fields (the filter's copy is filter/assembly/lib/snapshot.ts `H_*`). */
export const HEADER = {
  magic: 0,
  version: 4,
  headerLength: 6,
  totalLength: 8,
  crc: 12,
  /** the CRC covers bytes [crcFrom, totalLength) */
  crcFrom: 16,
  seq: 16,
  generatedAtMs: 24,
  sectionCount: 32,
  /** 34..35 reserved, zero */
  bootId: 36,
  length: 40,
} as const;
export const HEADER_LENGTH = HEADER.length;
export const SECTION_HEADER_LENGTH = 8;
export const MAX_DOCUMENT_SIZE = 1024 * 1024;
export const SECTION_PEERS = 1;
export const SECTION_INSTANCES = 2;
export const SECTION_RULES = SECTION_RULES_TYPE;
export const CONTENT_TYPE = 'application/vnd.switchyard.snapshot.v1';
export const MAX_SAFE_U64 = Number.MAX_SAFE_INTEGER;

export type PeerState = 'normal' | 'degraded';

export interface PeerRecord {
  name: string;
  state: PeerState;
  /** NaN (JSON: null) when the last sample failed or there was no sample yet; any value outside [0, 3.6e6] ms is carried as NaN. */
  lastRttMs: number;
  /** EWMA (alpha 0.2) of successful RTTs; NaN (JSON: null) before the first one. Same range as lastRttMs. */
  avgRttMs: number;
  /** consecutive samples below the recover threshold (saturates at 65535 on the wire) */
  recoverStreak: number;
  /** unix epoch ms of the last sample; 0 = none yet */
  lastSampleAtMs: number;
}

export const INSTANCE_REASONS = ['ok', 'unreachable', 'http_error', 'parse_error', 'stale', 'no_data', 'invalid_data'] as const;
export type InstanceReason = (typeof INSTANCE_REASONS)[number];
/** Where `slots` came from (flags bits 1-2). */
export const SLOTS_SOURCES = ['inferred', 'configured', 'exporter'] as const;
export type SlotsSource = (typeof SLOTS_SOURCES)[number];
/** Where E[S] came from (flags bits 3-4): measured on the instance, the median of the service's measured instances, or the configured prior (priorServiceMs). Code 3 is reserved and read as 'measured'. */
export const ES_SOURCES = ['measured', 'service-median', 'prior'] as const;
export type EsSource = (typeof ES_SOURCES)[number];

export interface InstanceRecord {
  service: string;
  /** "a.b.c.d:port" or "[ipv6]:port" (rules.ts isEndpointAddress) */
  addr: string;
  /** "" = local cloud */
  peer: string;
  healthy: boolean;
  reason: InstanceReason;
  rho: number;
  esMs: number;
  es2Ms2: number;
  lambdaPerS: number;
  queueDepth: number;
  p50Ms: number;
  p99Ms: number;
  baselineP99Ms: number;
  /** 0..1, NaN unknown */
  gpuUtil: number;
  dataAgeMs: number;
  /** concurrency c: requests served at once, 1..65535 (f32). Optional on input: default 1. */
  slots?: number;
  /** Optional on input: default 'inferred'. */
  slotsSource?: SlotsSource;
  /** Where esMs/es2Ms2 came from (flags bits 3-4; cold start, docs/contracts.md). Optional on input: default 'measured'. */
  esSource?: EsSource;
  /** flags bit 5: `slots` is a floor, not a capacity — inferred from the largest batch seen while the server never queued (or no batch yet). Optional: default false (old agents: a capacity). */
  slotsFloor?: boolean;
  /** flags bit 6: the server's own waiting count rose over each of the last QUEUE_GROWTH_SCRAPES scrapes (evidence of sustained excess, lib/overload.ts). Optional: default false. */
  queueGrowing?: boolean;
}

export interface Snapshot {
  seq: number;
  generatedAtMs: number;
  /** u32 chosen at agent start; seq is ordered only within one boot. Optional on input: default 0. */
  bootId?: number;
  peers: PeerRecord[];
  /** omitted (no section written) when undefined */
  instances?: InstanceRecord[];
  /** LLM section (type 4, ./llm.ts); omitted (no section written) when undefined */
  llm?: InstanceLlmRecord[];
  /** RULES section: one decision per rule set (docs/rules.md); omitted when undefined */
  rules?: RuleDecision[];
}

export class SnapshotDecodeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SnapshotDecodeError';
  }
}

let crcTable: Uint32Array | undefined;
/** Portable table CRC-32 (IEEE), used when zlib.crc32 is missing (Node < 20.15). */
export function crc32Portable(b: Uint8Array): number {
  if (!crcTable) {
    crcTable = new Uint32Array(256);
    for (let n = 0; n < 256; n++) {
      let c = n;
      for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
      crcTable[n] = c >>> 0;
    }
  }
  let c = 0xffffffff;
  for (let i = 0; i < b.length; i++) c = crcTable[(c ^ b[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** CRC-32 (IEEE). Node >= 20.15 has zlib.crc32; otherwise the table implementation. */
export const crc32: (buf: Uint8Array) => number = (() => {
  const native = (zlib as unknown as { crc32?: (b: Uint8Array) => number }).crc32;
  return typeof native === 'function' ? (b: Uint8Array) => native(b) >>> 0 : crc32Portable;
})();

// ---------------------------------------------------------------- the values' rules

/** One instance number the encoder found invalid (D1: the instance goes unhealthy, reason invalid_data). */
export interface InvalidNumber {
  service: string;
  addr: string;
  field: InstanceNumberField;
  value: number;
}

/**
 * The instance as it must be published: a healthy instance with a number that is non-finite or
 * out of its range becomes unhealthy with reason invalid_data; slots outside 1..65535 are
 * carried as 1 (whatever the health) so no reader divides by a bad concurrency.
 */
export function sanitizeInstance(r: InstanceRecord, onInvalid?: (i: InvalidNumber) => void): InstanceRecord {
  const slots = r.slots ?? 1;
  const slotsBad = judge(slots, SLOTS_RULE) === 'invalid';
  // an unhealthy instance is never priced: its numbers are carried as they are, and its reason
  // (more specific than invalid_data) is kept
  if (!r.healthy) return slotsBad ? { ...r, slots: 1 } : r;
  const field = firstInvalidNumber(r, slots);
  if (field === undefined) return r;
  onInvalid?.({ service: r.service, addr: r.addr, field, value: field === 'slots' ? slots : r[field] });
  const out: InstanceRecord = { ...r, healthy: false, reason: 'invalid_data' };
  if (slotsBad) out.slots = 1;
  return out;
}

export function sanitizePeer(p: PeerRecord): PeerRecord {
  const lastRttMs = normalizeRtt(p.lastRttMs);
  const avgRttMs = normalizeRtt(p.avgRttMs);
  return Object.is(lastRttMs, p.lastRttMs) && Object.is(avgRttMs, p.avgRttMs) ? p : { ...p, lastRttMs, avgRttMs };
}

/** The snapshot with the rules applied (records that need no change are shared, not copied). */
export function sanitizeSnapshot(s: Snapshot, onInvalid?: (i: InvalidNumber) => void): Snapshot {
  const out: Snapshot = { ...s, peers: s.peers.map(sanitizePeer) };
  if (s.instances !== undefined) out.instances = s.instances.map((r) => sanitizeInstance(r, onInvalid));
  if (s.llm !== undefined) out.llm = s.llm.map(sanitizeLlm);
  return out;
}

// ---------------------------------------------------------------- wire primitives

export class Writer {
  private chunks: Buffer[] = [];
  length = 0;
  private push(b: Buffer): void {
    this.chunks.push(b);
    this.length += b.length;
  }
  u8(v: number): void {
    const b = Buffer.allocUnsafe(1);
    b.writeUInt8(v, 0);
    this.push(b);
  }
  u16(v: number): void {
    const b = Buffer.allocUnsafe(2);
    b.writeUInt16LE(v, 0);
    this.push(b);
  }
  u32(v: number): void {
    const b = Buffer.allocUnsafe(4);
    b.writeUInt32LE(v, 0);
    this.push(b);
  }
  u64(v: number): void {
    const b = Buffer.allocUnsafe(8);
    b.writeBigUInt64LE(BigInt(v), 0);
    this.push(b);
  }
  f32(v: number): void {
    const b = Buffer.allocUnsafe(4);
    b.writeFloatLE(v, 0);
    this.push(b);
  }
  str(s: string, field: string): void {
    const b = Buffer.from(s, 'utf8');
    if (b.length > 255) throw new RangeError(`${field}: string longer than 255 bytes`);
    this.u8(b.length);
    this.push(b);
  }
  /** a string with a u16 length prefix, at most `max` bytes */
  str16(s: string, max: number, field: string): void {
    const b = Buffer.from(s, 'utf8');
    if (b.length > max) throw new RangeError(`${field}: string longer than ${max} bytes`);
    this.u16(b.length);
    this.push(b);
  }
  bytes(b: Buffer): void {
    this.push(b);
  }
  toBuffer(): Buffer {
    return Buffer.concat(this.chunks, this.length);
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true });
const MAX_SAFE_BIG = BigInt(MAX_SAFE_U64);

function fieldName(list: string, index: number, prop: string): string {
  return index < 0 ? list : `${list}[${index}].${prop}`;
}

export class Reader {
  constructor(private buf: Buffer, public pos: number, private end: number, private what: string) {}
  private need(n: number): void {
    if (this.pos + n > this.end) throw new SnapshotDecodeError(`${this.what}: truncated at offset ${this.pos}`);
  }
  u8(): number {
    this.need(1);
    return this.buf.readUInt8(this.pos++);
  }
  u16(): number {
    this.need(2);
    const v = this.buf.readUInt16LE(this.pos);
    this.pos += 2;
    return v;
  }
  u32(): number {
    this.need(4);
    const v = this.buf.readUInt32LE(this.pos);
    this.pos += 4;
    return v;
  }
  /** the field is named as list[index].prop (or list alone when index < 0), built only on error */
  u64(list: string, index = -1, prop = ''): number {
    this.need(8);
    const v = this.buf.readBigUInt64LE(this.pos);
    this.pos += 8;
    if (v > MAX_SAFE_BIG) throw new SnapshotDecodeError(`${this.what}: ${fieldName(list, index, prop)} ${v} exceeds 2^53`);
    return Number(v);
  }
  f32(): number {
    this.need(4);
    const v = this.buf.readFloatLE(this.pos);
    this.pos += 4;
    return v;
  }
  str(list: string, index: number, prop: string): string {
    return this.strOf(this.u8(), list, index, prop);
  }
  /** a string with a u16 length prefix */
  str16(list: string, index: number, prop: string): string {
    return this.strOf(this.u16(), list, index, prop);
  }
  private strOf(n: number, list: string, index: number, prop: string): string {
    this.need(n);
    const end = this.pos + n;
    let s = this.buf.toString('utf8', this.pos, end);
    // toString replaces invalid sequences with U+FFFD; only then is the strict decoder needed
    if (s.includes('\uFFFD')) {
      try {
        s = utf8.decode(this.buf.subarray(this.pos, end));
      } catch {
        throw new SnapshotDecodeError(`${this.what}: ${fieldName(list, index, prop)} is not valid UTF-8`);
      }
    }
    this.pos = end;
    return s;
  }
  fail(msg: string): never {
    throw new SnapshotDecodeError(`${this.what}: ${msg}`);
  }
}

function checkUint(v: number, max: number, field: string): number {
  if (!Number.isInteger(v) || v < 0 || v > max) throw new RangeError(`${field}: must be an integer in 0..${max}`);
  return v;
}

function sat(v: number, max: number): number {
  if (!Number.isFinite(v) || v < 0) return 0;
  return Math.min(Math.floor(v), max);
}

// ---------------------------------------------------------------- sections

/**
 * One section type: its wire type and how its payload is written and read. write() checks only
 * what the layout needs (lengths, enums); the public encoders add the rules (addresses, numbers),
 * so the fixture generator can write documents that break them on purpose.
 */
export interface SectionCodec<T> {
  readonly type: number;
  readonly name: string;
  write(w: Writer, value: T): void;
  read(r: Reader): T;
}

export const PEERS_SECTION: SectionCodec<PeerRecord[]> = {
  type: SECTION_PEERS,
  name: 'PEERS',
  write(w, peers) {
    writeRecords(w, 'peers', peers, (p, i) => {
      if (!p.name) throw new RangeError(`peers[${i}].name: must not be empty`);
      w.str(p.name, `peers[${i}].name`);
      if (p.state !== 'normal' && p.state !== 'degraded') throw new RangeError(`peers[${i}].state: must be normal|degraded`);
      w.u8(p.state === 'degraded' ? 1 : 0);
      w.f32(p.lastRttMs);
      w.f32(p.avgRttMs);
      w.u16(sat(p.recoverStreak, 0xffff));
      w.u64(checkUint(Math.floor(p.lastSampleAtMs), MAX_SAFE_U64, `peers[${i}].lastSampleAtMs`));
    });
  },
  read(r) {
    return readRecords(r, 'peers', (i): PeerRecord => {
      const name = r.str('peers', i, 'name');
      if (!name) r.fail(`peers[${i}]: empty name`);
      const st = r.u8();
      if (st > 1) r.fail(`peers[${i}]: bad state ${st}`);
      return {
        name,
        state: st === 1 ? 'degraded' : 'normal',
        lastRttMs: r.f32(),
        avgRttMs: r.f32(),
        recoverStreak: r.u16(),
        lastSampleAtMs: r.u64('peers', i, 'lastSampleAtMs'),
      };
    });
  },
};

/** Flags byte of an INSTANCES record: bit0 healthy, bits 1-2 slotsSource, bits 3-4 esSource (informational: the filter ignores them), bit 5 slotsFloor, bit 6 queueGrowing (both 0 in older agents' documents, read as before), bit 7 written 0 and ignored. */
export const FLAG_HEALTHY = 1;
export const FLAG_SLOTS_FLOOR = 1 << 5;
export const FLAG_QUEUE_GROWING = 1 << 6;
export const SLOTS_SOURCE_SHIFT = 1;
export const SLOTS_SOURCE_MASK = 3;
export const ES_SOURCE_SHIFT = 3;
export const ES_SOURCE_MASK = 3;

export const INSTANCES_SECTION: SectionCodec<InstanceRecord[]> = {
  type: SECTION_INSTANCES,
  name: 'INSTANCES',
  write(w, instances) {
    writeRecords(w, 'instances', instances, (r, i) => {
      if (!r.service) throw new RangeError(`instances[${i}].service: must not be empty`);
      const src = SLOTS_SOURCES.indexOf(r.slotsSource ?? 'inferred');
      if (src < 0) throw new RangeError(`instances[${i}].slotsSource: must be one of ${SLOTS_SOURCES.join('|')}`);
      const reason = INSTANCE_REASONS.indexOf(r.reason);
      if (reason < 0) throw new RangeError(`instances[${i}].reason: must be one of ${INSTANCE_REASONS.join('|')}`);
      if (r.healthy && reason !== 0) throw new RangeError(`instances[${i}].reason: a healthy instance has reason ok, got ${r.reason}`);
      w.str(r.service, `instances[${i}].service`);
      w.str(r.addr, `instances[${i}].addr`);
      w.str(r.peer ?? '', `instances[${i}].peer`);
      const esSrc = ES_SOURCES.indexOf(r.esSource ?? 'measured');
      if (esSrc < 0) throw new RangeError(`instances[${i}].esSource: must be one of ${ES_SOURCES.join('|')}`);
      w.u8((r.healthy ? FLAG_HEALTHY : 0) | (src << SLOTS_SOURCE_SHIFT) | (esSrc << ES_SOURCE_SHIFT) |
        (r.slotsFloor ? FLAG_SLOTS_FLOOR : 0) | (r.queueGrowing ? FLAG_QUEUE_GROWING : 0));
      w.u8(reason);
      for (const v of [r.rho, r.esMs, r.es2Ms2, r.lambdaPerS, r.queueDepth, r.p50Ms, r.p99Ms, r.baselineP99Ms, r.gpuUtil]) w.f32(v);
      w.u32(sat(r.dataAgeMs, 0xffffffff));
      w.f32(r.slots ?? 1);
    });
  },
  read(r) {
    return readRecords(r, 'instances', (i): InstanceRecord => {
      const { service, addr } = readEndpoint(r, 'instances', i);
      const peer = r.str('instances', i, 'peer');
      const flags = r.u8();
      const reasonCode = r.u8();
      const reason = INSTANCE_REASONS[reasonCode];
      if (reason === undefined) r.fail(`instances[${i}]: unknown reason code ${reasonCode}`);
      if ((flags & FLAG_HEALTHY) === FLAG_HEALTHY && reasonCode !== 0) r.fail(`instances[${i}]: healthy with failure reason ${reasonCode}`);
      const slotsSource = SLOTS_SOURCES[(flags >> SLOTS_SOURCE_SHIFT) & SLOTS_SOURCE_MASK];
      if (slotsSource === undefined) r.fail(`instances[${i}]: unknown slots source ${(flags >> SLOTS_SOURCE_SHIFT) & SLOTS_SOURCE_MASK}`);
      return {
        service,
        addr,
        peer,
        healthy: (flags & FLAG_HEALTHY) === FLAG_HEALTHY,
        reason,
        rho: r.f32(),
        esMs: r.f32(),
        es2Ms2: r.f32(),
        lambdaPerS: r.f32(),
        queueDepth: r.f32(),
        p50Ms: r.f32(),
        p99Ms: r.f32(),
        baselineP99Ms: r.f32(),
        gpuUtil: r.f32(),
        dataAgeMs: r.u32(),
        slots: r.f32(),
        slotsSource,
        esSource: ES_SOURCES[(flags >> ES_SOURCE_SHIFT) & ES_SOURCE_MASK] ?? 'measured',
        // only when set: documents without them decode as before
        ...((flags & FLAG_SLOTS_FLOOR) !== 0 ? { slotsFloor: true } : {}),
        ...((flags & FLAG_QUEUE_GROWING) !== 0 ? { queueGrowing: true } : {}),
      };
    });
  },
};

/** The payload of one section (no section header). */
export function encodeSection<T>(codec: SectionCodec<T>, value: T): Buffer {
  const w = new Writer();
  codec.write(w, value);
  return w.toBuffer();
}

/** Reads one section payload (structure only; the callers below apply the rules). */
export function decodeSection<T>(codec: SectionCodec<T>, payload: Uint8Array, what = `section ${codec.name}`): T {
  const buf = Buffer.isBuffer(payload) ? payload : Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength);
  const r = new Reader(buf, 0, buf.length, what);
  // bytes after the last record are skipped, as the filter does
  return codec.read(r);
}

/** PEERS payload, rules applied (RTTs outside their range carried as NaN). */
export function encodePeersSection(peers: PeerRecord[]): Buffer {
  return encodeSection(PEERS_SECTION, peers.map(sanitizePeer));
}

/** INSTANCES payload, rules applied (D1: invalid numbers -> unhealthy, invalid_data). */
export function encodeInstancesSection(instances: InstanceRecord[], onInvalid?: (i: InvalidNumber) => void): Buffer {
  instances.forEach((r, i) => {
    if (!isEndpointAddress(r.addr)) throw new RangeError(`instances[${i}].addr: ${JSON.stringify(r.addr)} is not ip:port`);
  });
  return encodeSection(INSTANCES_SECTION, instances.map((r) => sanitizeInstance(r, onInvalid)));
}

/** LLM payload, rules applied (terms and KV usage out of range carried as NaN). */
export function encodeLlmSection(records: InstanceLlmRecord[]): Buffer {
  records.forEach((r, i) => {
    if (!isEndpointAddress(r.addr)) throw new RangeError(`llm[${i}].addr: ${JSON.stringify(r.addr)} is not ip:port`);
  });
  return encodeSection(LLM_SECTION, records.map(sanitizeLlm));
}

export function decodePeersSection(payload: Uint8Array): PeerRecord[] {
  return decodeSection(PEERS_SECTION, payload).map(sanitizePeer);
}

export function decodeInstancesSection(payload: Uint8Array): InstanceRecord[] {
  return decodeSection(INSTANCES_SECTION, payload).map((r) => sanitizeInstance(r));
}

// ---------------------------------------------------------------- documents

export interface DocumentHeader {
  seq: number;
  generatedAtMs: number;
  bootId?: number;
}

export interface EncodedSection {
  type: number;
  payload: Buffer;
}

/** Frames sections into a document: header, section headers, total length and CRC. */
export function encodeDocument(h: DocumentHeader, sections: EncodedSection[]): Buffer {
  let total = HEADER_LENGTH;
  for (const s of sections) total += SECTION_HEADER_LENGTH + s.payload.length;
  if (total > MAX_DOCUMENT_SIZE) throw new RangeError(`snapshot: ${total} bytes exceeds the 1 MiB maximum`);
  const doc = Buffer.alloc(total);
  MAGIC.copy(doc, HEADER.magic);
  doc.writeUInt16LE(FORMAT_VERSION, HEADER.version);
  doc.writeUInt16LE(HEADER_LENGTH, HEADER.headerLength);
  doc.writeUInt32LE(total, HEADER.totalLength);
  doc.writeBigUInt64LE(BigInt(checkUint(h.seq, MAX_SAFE_U64, 'seq')), HEADER.seq);
  doc.writeBigUInt64LE(BigInt(checkUint(Math.floor(h.generatedAtMs), MAX_SAFE_U64, 'generatedAtMs')), HEADER.generatedAtMs);
  doc.writeUInt16LE(checkUint(sections.length, 0xffff, 'sections.length'), HEADER.sectionCount);
  doc.writeUInt32LE(checkUint(h.bootId ?? 0, 0xffffffff, 'bootId'), HEADER.bootId);
  let pos = HEADER_LENGTH;
  for (const s of sections) {
    doc.writeUInt16LE(s.type, pos);
    doc.writeUInt32LE(s.payload.length, pos + 4);
    s.payload.copy(doc, pos + SECTION_HEADER_LENGTH);
    pos += SECTION_HEADER_LENGTH + s.payload.length;
  }
  doc.writeUInt32LE(crc32(doc.subarray(HEADER.crcFrom)), HEADER.crc);
  return doc;
}

export function encodeSnapshot(s: Snapshot, onInvalid?: (i: InvalidNumber) => void): Buffer {
  const sections: EncodedSection[] = [{ type: SECTION_PEERS, payload: encodePeersSection(s.peers) }];
  if (s.instances !== undefined) sections.push({ type: SECTION_INSTANCES, payload: encodeInstancesSection(s.instances, onInvalid) });
  if (s.llm !== undefined) sections.push({ type: SECTION_LLM, payload: encodeLlmSection(s.llm) });
  // the decode lines ride in their own section (type 5), so a decoder that predates them skips it
  const lines = s.llm !== undefined ? decodeLines(s.llm) : [];
  if (lines.length > 0) sections.push({ type: SECTION_LLM_DECODE, payload: encodeSection(LLM_DECODE_SECTION, lines) });
  // the KV capacities too (type 6): a decoder that predates them skips it and keeps its index size
  const kv = s.llm !== undefined ? kvCapacities(s.llm) : [];
  if (kv.length > 0) sections.push({ type: SECTION_LLM_KV, payload: encodeSection(LLM_KV_SECTION, kv) });
  if (s.rules !== undefined) sections.push({ type: SECTION_RULES, payload: encodeSection(RULES_SECTION, s.rules) });
  return encodeDocument(s, sections);
}

export interface DecodedSnapshot extends Snapshot {
  bootId: number;
  /** section types that were skipped because they are unknown */
  unknownSections: number[];
}

export function decodeSnapshot(input: Uint8Array): DecodedSnapshot {
  const buf = Buffer.isBuffer(input) ? input : Buffer.from(input.buffer, input.byteOffset, input.byteLength);
  if (buf.length < HEADER_LENGTH) throw new SnapshotDecodeError(`header: truncated (${buf.length} < ${HEADER_LENGTH} bytes)`);
  if (buf.length > MAX_DOCUMENT_SIZE) throw new SnapshotDecodeError(`document: ${buf.length} bytes exceeds 1 MiB`);
  if (!buf.subarray(HEADER.magic, HEADER.magic + 4).equals(MAGIC)) throw new SnapshotDecodeError('header: bad magic');
  const version = buf.readUInt16LE(HEADER.version);
  if (version !== FORMAT_VERSION) throw new SnapshotDecodeError(`header: unsupported version ${version}`);
  const headerLen = buf.readUInt16LE(HEADER.headerLength);
  if (headerLen < HEADER_LENGTH) throw new SnapshotDecodeError(`header: header length ${headerLen} < ${HEADER_LENGTH}`);
  const total = buf.readUInt32LE(HEADER.totalLength);
  if (total !== buf.length) throw new SnapshotDecodeError(`header: total length ${total} != body length ${buf.length}`);
  if (headerLen > total) throw new SnapshotDecodeError(`header: header length ${headerLen} > total ${total}`);
  const crc = buf.readUInt32LE(HEADER.crc);
  const actual = crc32(buf.subarray(HEADER.crcFrom, total));
  if (crc !== actual) throw new SnapshotDecodeError(`header: CRC mismatch (stored ${crc.toString(16)}, computed ${actual.toString(16)})`);
  const h = new Reader(buf, HEADER.seq, HEADER_LENGTH, 'header');
  const seq = h.u64('seq');
  const generatedAtMs = h.u64('generatedAtMs');
  const sectionCount = buf.readUInt16LE(HEADER.sectionCount);
  const bootId = buf.readUInt32LE(HEADER.bootId);

  const out: DecodedSnapshot = { seq, generatedAtMs, bootId, peers: [], unknownSections: [] };
  let pos = headerLen;
  let sawPeers = false;
  let lines: LlmDecodeRecord[] | undefined;
  let kv: LlmKvRecord[] | undefined;
  for (let i = 0; i < sectionCount; i++) {
    const sh = new Reader(buf, pos, total, `section ${i} header`);
    const type = sh.u16();
    sh.u16();
    const len = sh.u32();
    const start = sh.pos;
    if (start + len > total) throw new SnapshotDecodeError(`section ${i} (type ${type}): payload truncated`);
    const payload = buf.subarray(start, start + len);
    if (type === SECTION_PEERS) {
      if (sawPeers) throw new SnapshotDecodeError(`section ${i}: duplicate section type ${type}`);
      sawPeers = true;
      out.peers = decodeSection(PEERS_SECTION, payload, `section ${i} (type ${type})`).map(sanitizePeer);
    } else if (type === SECTION_INSTANCES) {
      if (out.instances) throw new SnapshotDecodeError(`section ${i}: duplicate section type ${type}`);
      out.instances = decodeSection(INSTANCES_SECTION, payload, `section ${i} (type ${type})`).map((r) => sanitizeInstance(r));
    } else if (type === SECTION_LLM) {
      if (out.llm) throw new SnapshotDecodeError(`section ${i}: duplicate section type ${type}`);
      out.llm = decodeSection(LLM_SECTION, payload, `section ${i} (type ${type})`).map(sanitizeLlm);
    } else if (type === SECTION_LLM_DECODE) {
      if (lines) throw new SnapshotDecodeError(`section ${i}: duplicate section type ${type}`);
      lines = decodeSection(LLM_DECODE_SECTION, payload, `section ${i} (type ${type})`);
    } else if (type === SECTION_LLM_KV) {
      if (kv) throw new SnapshotDecodeError(`section ${i}: duplicate section type ${type}`);
      kv = decodeSection(LLM_KV_SECTION, payload, `section ${i} (type ${type})`);
    } else if (type === SECTION_RULES) {
      if (out.rules) throw new SnapshotDecodeError(`section ${i}: duplicate section type ${type}`);
      out.rules = decodeSection(RULES_SECTION, payload, `section ${i} (type ${type})`);
    } else {
      if (out.unknownSections.includes(type)) throw new SnapshotDecodeError(`section ${i}: duplicate section type ${type}`);
      out.unknownSections.push(type);
    }
    pos = start + len;
  }
  if (pos !== total) throw new SnapshotDecodeError(`document: ${total - pos} trailing bytes after ${sectionCount} sections`);
  if (lines && out.llm) out.llm = mergeDecodeLines(out.llm, lines);
  if (kv && out.llm) out.llm = mergeKvCapacities(out.llm, kv);
  return out;
}

// ---------------------------------------------------------------- JSON view

const num = (v: number): number | null => (Number.isFinite(v) ? v : null);
/** f32 rounding so the JSON view shows what the binary carries */
const f32 = (v: number): number | null => num(Math.fround(v));

/** The JSON document served by `GET /v1/snapshot?format=json` (NaN -> null, f32 precision). */
export function snapshotToJson(s: Snapshot): Record<string, unknown> {
  const doc: Record<string, unknown> = {
    formatVersion: FORMAT_VERSION,
    seq: s.seq,
    bootId: s.bootId ?? 0,
    generatedAtMs: s.generatedAtMs,
    generatedAt: new Date(s.generatedAtMs).toISOString(),
    peers: s.peers.map((p) => ({
      name: p.name,
      state: p.state,
      lastRttMs: f32(p.lastRttMs),
      avgRttMs: f32(p.avgRttMs),
      recoverStreak: Math.min(Math.max(0, Math.floor(p.recoverStreak)), 0xffff),
      lastSampleAtMs: p.lastSampleAtMs,
    })),
  };
  if (s.instances !== undefined) {
    doc.instances = s.instances.map((r) => ({
      service: r.service,
      addr: r.addr,
      peer: r.peer,
      healthy: r.healthy,
      reason: r.reason,
      rho: f32(r.rho),
      esMs: f32(r.esMs),
      es2Ms2: f32(r.es2Ms2),
      lambdaPerS: f32(r.lambdaPerS),
      queueDepth: f32(r.queueDepth),
      p50Ms: f32(r.p50Ms),
      p99Ms: f32(r.p99Ms),
      baselineP99Ms: f32(r.baselineP99Ms),
      gpuUtil: f32(r.gpuUtil),
      dataAgeMs: r.dataAgeMs,
      slots: f32(r.slots ?? 1),
      slotsSource: r.slotsSource ?? 'inferred',
      esSource: r.esSource ?? 'measured',
      ...(r.slotsFloor ? { slotsFloor: true } : {}),
      ...(r.queueGrowing ? { queueGrowing: true } : {}),
    }));
  }
  if (s.llm !== undefined) doc.llm = s.llm.map(llmToJson);
  if (s.rules !== undefined) doc.rules = s.rules;
  return doc;
}
