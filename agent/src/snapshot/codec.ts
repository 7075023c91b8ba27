// Snapshot binary format v1 (docs/contracts.md, "Snapshot binary format v1").
// Little-endian. Strings are UTF-8 with a u8 length prefix.
//
//   header (40 bytes): magic "SWY1", u16 version=1, u16 headerLen=40, u32 totalLen,
//                      u32 crc32(bytes[16,total)), u64 seq, u64 generatedAtMs,
//                      u16 sectionCount, 6 reserved zero bytes
//   section:           u16 type, u16 reserved(0), u32 payloadLength, payload
//   type 1 PEERS:      u16 count, u16 reserved, then peers
//   type 2 INSTANCES:  u16 count, u16 reserved, then instances (..., u32 dataAgeMs, f32 slots)
//
// The encoder refuses what the filter's decoder (filter/assembly/lib/snapshot.ts) would
// reject: empty peer names, empty instance service/addr, slots < 1.
//
// seq and generatedAtMs are u64 on the wire; in TypeScript they are `number`
// (exact up to 2^53, i.e. seq = boot-ms x 1000 stays exact until the year ~2255).
import * as zlib from 'node:zlib';

export const MAGIC = Buffer.from('SWY1', 'ascii');
export const FORMAT_VERSION = 1;
export const HEADER_LENGTH = 40;
export const MAX_DOCUMENT_SIZE = 1024 * 1024;
export const SECTION_PEERS = 1;
export const SECTION_INSTANCES = 2;
export const CONTENT_TYPE = 'application/vnd.switchyard.snapshot.v1';

export type PeerState = 'normal' | 'degraded';

export interface PeerRecord {
  name: string;
  state: PeerState;
  /** NaN (JSON: null) when the last sample failed or there was no sample yet. */
  lastRttMs: number;
  /** EWMA (alpha 0.2) of successful RTTs; NaN (JSON: null) before the first one. */
  avgRttMs: number;
  /** consecutive samples below the recover threshold (saturates at 65535 on the wire) */
  recoverStreak: number;
  /** unix epoch ms of the last sample; 0 = none yet */
  lastSampleAtMs: number;
}

export const INSTANCE_REASONS = ['ok', 'unreachable', 'http_error', 'parse_error', 'stale', 'no_data'] as const;
export type InstanceReason = (typeof INSTANCE_REASONS)[number];

export interface InstanceRecord {
  service: string;
  /** "ip:port" */
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
  /** concurrency c: requests served at once, >= 1 (f32). Optional on input: default 1. */
  slots?: number;
  /** where `slots` came from (decision D2; flags bits 1-2). Optional on input: default 'inferred'. */
  slotsSource?: 'inferred' | 'configured' | 'exporter';
}

export interface Snapshot {
  seq: number;
  generatedAtMs: number;
  peers: PeerRecord[];
  /** omitted (no section written) when undefined */
  instances?: InstanceRecord[];
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

// ---------------------------------------------------------------- encoding

class Writer {
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
  bytes(b: Buffer): void {
    this.push(b);
  }
  toBuffer(): Buffer {
    return Buffer.concat(this.chunks, this.length);
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

function encodePeers(peers: PeerRecord[]): Buffer {
  const w = new Writer();
  w.u16(checkUint(peers.length, 0xffff, 'peers.length'));
  w.u16(0);
  peers.forEach((p, i) => {
    if (!p.name) throw new RangeError(`peers[${i}].name: must not be empty`);
    w.str(p.name, `peers[${i}].name`);
    if (p.state !== 'normal' && p.state !== 'degraded') throw new RangeError(`peers[${i}].state: must be normal|degraded`);
    w.u8(p.state === 'degraded' ? 1 : 0);
    w.f32(p.lastRttMs);
    w.f32(p.avgRttMs);
    w.u16(sat(p.recoverStreak, 0xffff));
    w.u64(checkUint(Math.floor(p.lastSampleAtMs), Number.MAX_SAFE_INTEGER, `peers[${i}].lastSampleAtMs`));
  });
  return w.toBuffer();
}

function encodeInstances(instances: InstanceRecord[]): Buffer {
  const w = new Writer();
  w.u16(checkUint(instances.length, 0xffff, 'instances.length'));
  w.u16(0);
  instances.forEach((r, i) => {
    if (!r.service) throw new RangeError(`instances[${i}].service: must not be empty`);
    if (!r.addr) throw new RangeError(`instances[${i}].addr: must not be empty`);
    const slots = r.slots ?? 1;
    if (!(slots >= 1)) throw new RangeError(`instances[${i}].slots: must be >= 1`);
    w.str(r.service, `instances[${i}].service`);
    w.str(r.addr, `instances[${i}].addr`);
    w.str(r.peer ?? '', `instances[${i}].peer`);
    w.u8(r.healthy ? 1 : 0);
    const reason = INSTANCE_REASONS.indexOf(r.reason);
    if (reason < 0) throw new RangeError(`instances[${i}].reason: must be one of ${INSTANCE_REASONS.join('|')}`);
    w.u8(reason);
    for (const v of [r.rho, r.esMs, r.es2Ms2, r.lambdaPerS, r.queueDepth, r.p50Ms, r.p99Ms, r.baselineP99Ms, r.gpuUtil]) w.f32(v);
    w.u32(sat(r.dataAgeMs, 0xffffffff));
    w.f32(slots);
  });
  return w.toBuffer();
}

function section(type: number, payload: Buffer): Buffer {
  const h = Buffer.alloc(8);
  h.writeUInt16LE(type, 0);
  h.writeUInt16LE(0, 2);
  h.writeUInt32LE(payload.length, 4);
  return Buffer.concat([h, payload]);
}

export function encodeSnapshot(s: Snapshot): Buffer {
  const sections: Buffer[] = [section(SECTION_PEERS, encodePeers(s.peers))];
  if (s.instances !== undefined) sections.push(section(SECTION_INSTANCES, encodeInstances(s.instances)));
  const body = Buffer.concat(sections);
  const total = HEADER_LENGTH + body.length;
  if (total > MAX_DOCUMENT_SIZE) throw new RangeError(`snapshot: ${total} bytes exceeds the 1 MiB maximum`);
  const doc = Buffer.alloc(total);
  MAGIC.copy(doc, 0);
  doc.writeUInt16LE(FORMAT_VERSION, 4);
  doc.writeUInt16LE(HEADER_LENGTH, 6);
  doc.writeUInt32LE(total, 8);
  doc.writeBigUInt64LE(BigInt(checkUint(s.seq, Number.MAX_SAFE_INTEGER, 'seq')), 16);
  doc.writeBigUInt64LE(BigInt(checkUint(Math.floor(s.generatedAtMs), Number.MAX_SAFE_INTEGER, 'generatedAtMs')), 24);
  doc.writeUInt16LE(sections.length, 32);
  // 34..39 reserved, already zero
  body.copy(doc, HEADER_LENGTH);
  doc.writeUInt32LE(crc32(doc.subarray(16)), 12);
  return doc;
}

// ---------------------------------------------------------------- decoding

class Reader {
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
  u64(): number {
    this.need(8);
    const v = this.buf.readBigUInt64LE(this.pos);
    this.pos += 8;
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new SnapshotDecodeError(`${this.what}: u64 ${v} exceeds 2^53`);
    return Number(v);
  }
  f32(): number {
    this.need(4);
    const v = this.buf.readFloatLE(this.pos);
    this.pos += 4;
    return v;
  }
  str(): string {
    const n = this.u8();
    this.need(n);
    const s = this.buf.toString('utf8', this.pos, this.pos + n);
    this.pos += n;
    return s;
  }
  get remaining(): number {
    return this.end - this.pos;
  }
}

export interface DecodedSnapshot extends Snapshot {
  /** section types that were skipped because they are unknown */
  unknownSections: number[];
}

export function decodeSnapshot(input: Uint8Array): DecodedSnapshot {
  const buf = Buffer.isBuffer(input) ? input : Buffer.from(input.buffer, input.byteOffset, input.byteLength);
  if (buf.length < HEADER_LENGTH) throw new SnapshotDecodeError(`header: truncated (${buf.length} < ${HEADER_LENGTH} bytes)`);
  if (buf.length > MAX_DOCUMENT_SIZE) throw new SnapshotDecodeError(`document: ${buf.length} bytes exceeds 1 MiB`);
  if (!buf.subarray(0, 4).equals(MAGIC)) throw new SnapshotDecodeError('header: bad magic');
  const version = buf.readUInt16LE(4);
  if (version !== FORMAT_VERSION) throw new SnapshotDecodeError(`header: unsupported version ${version}`);
  const headerLen = buf.readUInt16LE(6);
  if (headerLen < HEADER_LENGTH) throw new SnapshotDecodeError(`header: header length ${headerLen} < ${HEADER_LENGTH}`);
  const total = buf.readUInt32LE(8);
  if (total !== buf.length) throw new SnapshotDecodeError(`header: total length ${total} != body length ${buf.length}`);
  if (headerLen > total) throw new SnapshotDecodeError(`header: header length ${headerLen} > total ${total}`);
  const crc = buf.readUInt32LE(12);
  const actual = crc32(buf.subarray(16, total));
  if (crc !== actual) throw new SnapshotDecodeError(`header: CRC mismatch (stored ${crc.toString(16)}, computed ${actual.toString(16)})`);
  const h = new Reader(buf, 16, HEADER_LENGTH, 'header');
  const seq = h.u64();
  const generatedAtMs = h.u64();
  const sectionCount = h.u16();

  const out: DecodedSnapshot = { seq, generatedAtMs, peers: [], unknownSections: [] };
  let pos = headerLen;
  let sawPeers = false;
  for (let i = 0; i < sectionCount; i++) {
    const sh = new Reader(buf, pos, total, `section ${i} header`);
    const type = sh.u16();
    sh.u16();
    const len = sh.u32();
    const start = sh.pos;
    if (start + len > total) throw new SnapshotDecodeError(`section ${i} (type ${type}): payload truncated`);
    const r = new Reader(buf, start, start + len, `section ${i} (type ${type})`);
    if (type === SECTION_PEERS) {
      if (sawPeers) throw new SnapshotDecodeError(`section ${i}: duplicate PEERS section`);
      sawPeers = true;
      out.peers = decodePeers(r);
    } else if (type === SECTION_INSTANCES) {
      if (out.instances) throw new SnapshotDecodeError(`section ${i}: duplicate INSTANCES section`);
      out.instances = decodeInstances(r);
    } else {
      out.unknownSections.push(type);
    }
    pos = start + len;
  }
  if (pos !== total) throw new SnapshotDecodeError(`document: ${total - pos} trailing bytes after ${sectionCount} sections`);
  return out;
}

function decodePeers(r: Reader): PeerRecord[] {
  const count = r.u16();
  r.u16();
  const peers: PeerRecord[] = [];
  for (let i = 0; i < count; i++) {
    const name = r.str();
    if (!name) throw new SnapshotDecodeError(`peers[${i}]: empty name`);
    const st = r.u8();
    if (st > 1) throw new SnapshotDecodeError(`peers[${i}]: bad state ${st}`);
    peers.push({
      name,
      state: st === 1 ? 'degraded' : 'normal',
      lastRttMs: r.f32(),
      avgRttMs: r.f32(),
      recoverStreak: r.u16(),
      lastSampleAtMs: r.u64(),
    });
  }
  return peers;
}

function decodeInstances(r: Reader): InstanceRecord[] {
  const count = r.u16();
  r.u16();
  const out: InstanceRecord[] = [];
  for (let i = 0; i < count; i++) {
    const service = r.str();
    const addr = r.str();
    const peer = r.str();
    const flags = r.u8();
    const reasonCode = r.u8();
    const reason = INSTANCE_REASONS[reasonCode];
    if (reason === undefined) throw new SnapshotDecodeError(`instances[${i}]: bad reason ${reasonCode}`);
    if (!service || !addr) throw new SnapshotDecodeError(`instances[${i}]: empty service or address`);
    const rec: InstanceRecord = {
      service,
      addr,
      peer,
      healthy: (flags & 1) === 1,
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
    };
    if (!((rec.slots as number) >= 1)) throw new SnapshotDecodeError(`instances[${i}]: slots must be >= 1`);
    out.push(rec);
  }
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
    }));
  }
  return doc;
}
