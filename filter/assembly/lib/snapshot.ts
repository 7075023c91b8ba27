// Decoder for the agent's binary snapshot (docs/contracts.md, "Snapshot binary format v1").
// Input is untrusted bytes from the network: every read is bounds-checked and a bad document
// yields an error string, never a trap. Decoding happens once per snapshot version per VM.

import { RuleDecision } from "./rules";

export const MAGIC: u32 = 0x31595753; // "SWY1" little-endian
export const HEADER_LEN: i32 = 40;
export const MAX_SNAPSHOT_BYTES: i32 = 1 << 20;
export const SECTION_PEERS: u16 = 1;
export const SECTION_INSTANCES: u16 = 2;

export class PeerState {
  name: string = "";
  degraded: bool = false;
  lastRttMs: f32 = 0;
  avgRttMs: f32 = 0;
  recoverStreak: u16 = 0;
  lastSampleAtMs: u64 = 0;
}

export class InstanceState {
  service: string = "";
  addr: string = "";
  peer: string = "";
  healthy: bool = false;
  reason: u8 = 0;
  rho: f32 = 0;
  esMs: f32 = 0;
  es2Ms2: f32 = 0;
  lambdaPerS: f32 = 0;
  queueDepth: f32 = 0;
  p50Ms: f32 = 0;
  p99Ms: f32 = 0;
  baselineP99Ms: f32 = 0;
  gpuUtil: f32 = 0;
  dataAgeMs: u32 = 0;
  slots: f32 = 1;
}

export class Snapshot {
  seq: u64 = 0;
  generatedAtMs: u64 = 0;
  peers: Array<PeerState> = [];
  instances: Array<InstanceState> = [];
  /** RULES section: one decision per rule set (lib/rules.ts) */
  rules: Array<RuleDecision> = [];

  peerIndex(name: string): i32 {
    for (let i = 0; i < this.peers.length; i++) if (this.peers[i].name == name) return i;
    return -1;
  }
}

export class DecodeResult {
  snapshot: Snapshot | null = null;
  error: string = "";
}

let crcTable: StaticArray<u32> | null = null;

function table(): StaticArray<u32> {
  let t = crcTable;
  if (t == null) {
    t = new StaticArray<u32>(256);
    for (let n: u32 = 0; n < 256; n++) {
      let c = n;
      for (let k = 0; k < 8; k++) c = (c & 1) ? (0xedb88320 ^ (c >>> 1)) : (c >>> 1);
      t[n] = c;
    }
    crcTable = t;
  }
  return t;
}

/** CRC-32 (IEEE 802.3, as zlib) of bytes [from, to) of buf. */
export function crc32(buf: ArrayBuffer, from: i32, to: i32): u32 {
  const t = table();
  const p = changetype<usize>(buf);
  let c: u32 = 0xffffffff;
  for (let i = from; i < to; i++) c = unchecked(t[(c ^ <u32>load<u8>(p + <usize>i)) & 0xff]) ^ (c >>> 8);
  return c ^ 0xffffffff;
}

/** Reads the seq of a document without decoding it (0 when it is too short). */
export function peekSeq(buf: ArrayBuffer): u64 {
  if (buf.byteLength < HEADER_LEN) return 0;
  return load<u64>(changetype<usize>(buf) + 16);
}

class Reader {
  pos: i32;
  err: string = "";
  constructor(public buf: ArrayBuffer, start: i32, public end: i32) { this.pos = start; }
  private need(n: i32): bool {
    if (this.err.length > 0) return false;
    if (this.pos + n > this.end) { this.err = "truncated at offset " + this.pos.toString(); return false; }
    return true;
  }
  u8(): u8 { if (!this.need(1)) return 0; const v = load<u8>(changetype<usize>(this.buf) + <usize>this.pos); this.pos += 1; return v; }
  u16(): u16 { if (!this.need(2)) return 0; const v = load<u16>(changetype<usize>(this.buf) + <usize>this.pos); this.pos += 2; return v; }
  u32(): u32 { if (!this.need(4)) return 0; const v = load<u32>(changetype<usize>(this.buf) + <usize>this.pos); this.pos += 4; return v; }
  u64(): u64 { if (!this.need(8)) return 0; const v = load<u64>(changetype<usize>(this.buf) + <usize>this.pos); this.pos += 8; return v; }
  f32(): f32 { if (!this.need(4)) return 0; const v = load<f32>(changetype<usize>(this.buf) + <usize>this.pos); this.pos += 4; return v; }
  str(): string {
    const n = <i32>this.u8();
    if (!this.need(n)) return "";
    const s = String.UTF8.decodeUnsafe(changetype<usize>(this.buf) + <usize>this.pos, <usize>n);
    this.pos += n;
    return s;
  }
}

function decodePeers(r: Reader, out: Array<PeerState>): void {
  const count = <i32>r.u16();
  r.u16();
  for (let i = 0; i < count && r.err.length == 0; i++) {
    const p = new PeerState();
    p.name = r.str();
    const state = r.u8();
    if (state > 1 && r.err.length == 0) { r.err = "peer " + i.toString() + ": unknown state " + state.toString(); return; }
    p.degraded = state == 1;
    p.lastRttMs = r.f32();
    p.avgRttMs = r.f32();
    p.recoverStreak = r.u16();
    p.lastSampleAtMs = r.u64();
    if (p.name.length == 0 && r.err.length == 0) { r.err = "peer " + i.toString() + ": empty name"; return; }
    out.push(p);
  }
}

function decodeInstances(r: Reader, out: Array<InstanceState>): void {
  const count = <i32>r.u16();
  r.u16();
  for (let i = 0; i < count && r.err.length == 0; i++) {
    const s = new InstanceState();
    s.service = r.str();
    s.addr = r.str();
    s.peer = r.str();
    s.healthy = (r.u8() & 1) != 0;
    s.reason = r.u8();
    s.rho = r.f32();
    s.esMs = r.f32();
    s.es2Ms2 = r.f32();
    s.lambdaPerS = r.f32();
    s.queueDepth = r.f32();
    s.p50Ms = r.f32();
    s.p99Ms = r.f32();
    s.baselineP99Ms = r.f32();
    s.gpuUtil = r.f32();
    s.dataAgeMs = r.u32();
    s.slots = r.f32();
    if (r.err.length == 0 && !(s.slots >= 1)) { r.err = "instance " + i.toString() + ": slots must be >= 1"; return; }
    if (r.err.length == 0 && (s.service.length == 0 || s.addr.length == 0)) { r.err = "instance " + i.toString() + ": empty service or address"; return; }
    out.push(s);
  }
}

export function decodeSnapshot(buf: ArrayBuffer): DecodeResult {
  const res = new DecodeResult();
  const n = buf.byteLength;
  if (n < HEADER_LEN) { res.error = "snapshot shorter than its header (" + n.toString() + " bytes)"; return res; }
  if (n > MAX_SNAPSHOT_BYTES) { res.error = "snapshot larger than 1 MiB"; return res; }
  const p = changetype<usize>(buf);
  if (load<u32>(p) != MAGIC) { res.error = "bad magic"; return res; }
  const version = load<u16>(p + 4);
  if (version != 1) { res.error = "unsupported format version " + version.toString(); return res; }
  const hlen = <i32>load<u16>(p + 6);
  if (hlen < HEADER_LEN || hlen > n) { res.error = "bad header length " + hlen.toString(); return res; }
  const total = <i32>load<u32>(p + 8);
  if (total != n) { res.error = "length mismatch: header says " + total.toString() + ", got " + n.toString(); return res; }
  const crc = load<u32>(p + 12);
  if (crc32(buf, 16, n) != crc) { res.error = "checksum mismatch"; return res; }
  const s = new Snapshot();
  s.seq = load<u64>(p + 16);
  s.generatedAtMs = load<u64>(p + 24);
  const sections = <i32>load<u16>(p + 32);
  const r = new Reader(buf, hlen, n);
  for (let i = 0; i < sections && r.err.length == 0; i++) {
    const type = r.u16();
    r.u16();
    const len = <i32>r.u32();
    if (r.err.length > 0) break;
    if (len < 0 || r.pos + len > n) { r.err = "section " + i.toString() + " overruns the document"; break; }
    const end = r.pos + len;
    const sr = new Reader(buf, r.pos, end);
    if (type == SECTION_PEERS) decodePeers(sr, s.peers);
    else if (type == SECTION_INSTANCES) decodeInstances(sr, s.instances);
    if (sr.err.length > 0) { r.err = "section " + type.toString() + ": " + sr.err; break; }
    r.pos = end; // unknown section types are skipped by length
  }
  if (r.err.length == 0 && r.pos != n) r.err = "trailing bytes after the last section";
  if (r.err.length > 0) { res.error = r.err; return res; }
  res.snapshot = s;
  return res;
}
