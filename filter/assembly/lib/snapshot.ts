// Decoder for the agent's binary snapshot (docs/contracts.md, "Snapshot binary format v1").
// Input is untrusted bytes from the network: every read is bounds-checked and a bad document
// yields an error string, never a trap. Decoding happens once per snapshot version per VM.
//
// D1: a structural defect (framing, CRC, duplicate section, unknown reason code or slots source,
// u64 above 2^53, invalid UTF-8, an address that is not ip:port) rejects the whole document; a
// number out of its range (lib/snapshot-rules.ts) only marks that instance unhealthy, reason
// invalid_data. The agent's codec applies the same rules; the golden fixtures hold both to them.
import {
  rhoOk, esMsOk, es2Ms2Ok, lambdaOk, queueOk, latencyOk, gpuUtilOk, slotsOk, normalizeRtt,
  isValidUtf8, isEndpointAddress,
} from "./snapshot-rules";
import { InstanceLlm, SECTION_LLM, decodeLlm, SECTION_LLM_DECODE, DecodeLine, decodeLlmDecode, mergeDecodeLines, SECTION_LLM_KV, KvCapacity, decodeLlmKv, mergeKvCapacity } from "./snapshot-llm";

import {
  RuleDecision, SplitTarget, Because, decisionProblem, MAX_RULE_SETS, MAX_BECAUSE,
  ACTION_ROUTE, ACTION_LINK_STATUS, ACTION_SPLIT, ACTION_LOCAL_REPLY,
} from "./rule-decisions";
import { STATUS_DEGRADED, STATUS_NORMAL } from "./config";

export const MAGIC: u32 = 0x31595753; // "SWY1" little-endian
// Header byte offsets (the agent's copy: HEADER in agent/src/snapshot/codec.ts).
export const H_MAGIC: i32 = 0;
export const H_VERSION: i32 = 4;
export const H_HEADER_LEN: i32 = 6;
export const H_TOTAL_LEN: i32 = 8;
export const H_CRC: i32 = 12;
/** the CRC covers bytes [H_CRC_FROM, total) */
export const H_CRC_FROM: i32 = 16;
export const H_SEQ: i32 = 16;
export const H_GENERATED_AT: i32 = 24;
export const H_SECTION_COUNT: i32 = 32;
export const H_BOOT_ID: i32 = 36;
export const HEADER_LEN: i32 = 40;
export const MAX_SNAPSHOT_BYTES: i32 = 1 << 20;
export const MAX_SAFE_U64: u64 = 9007199254740991; // 2^53 - 1
export const SECTION_PEERS: u16 = 1;
export const SECTION_INSTANCES: u16 = 2;
export const SECTION_RULES: u16 = 3;

export const REASON_OK: u8 = 0;
export const REASON_INVALID_DATA: u8 = 6;
export const MAX_REASON: u8 = 6;
export const SLOTS_INFERRED: u8 = 0;
export const SLOTS_CONFIGURED: u8 = 1;
export const SLOTS_EXPORTER: u8 = 2;

export class PeerState {
  name: string = "";
  degraded: bool = false;
  /** NaN: no usable sample (failed, none yet, or a value outside [0, 3.6e6] ms) */
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
  /** where slots came from: SLOTS_INFERRED, SLOTS_CONFIGURED or SLOTS_EXPORTER (flags bits 1-2) */
  slotsSource: u8 = SLOTS_INFERRED;
  /** flags bit 5: slots is a floor (inferred without the server ever queueing), not a capacity to shed on */
  slotsFloor: bool = false;
  /** flags bit 6: the server's waiting count rose at each of the last scrapes (evidence of sustained excess, lib/overload.ts) */
  queueGrowing: bool = false;
}

export class Snapshot {
  seq: u64 = 0;
  generatedAtMs: u64 = 0;
  bootId: u32 = 0;
  peers: Array<PeerState> = [];
  instances: Array<InstanceState> = [];
  /** LLM section (type 4): per-instance inference details; empty when the section is absent */
  llm: Array<InstanceLlm> = [];
  /** RULES section: one decision per rule set (lib/rule-decisions.ts) */
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

/** Boot id, seq and generatedAtMs of a document: enough to order it without decoding. */
export class SnapshotStamp {
  constructor(public bootId: u32, public seq: u64, public generatedAtMs: u64) {}
  sameVersion(o: SnapshotStamp): bool { return this.bootId == o.bootId && this.seq == o.seq; }
}

/** The stamp of a document's header (null when it is shorter than a header; nothing is validated). */
export function readStamp(buf: ArrayBuffer): SnapshotStamp | null {
  if (buf.byteLength < HEADER_LEN) return null;
  const p = changetype<usize>(buf);
  return new SnapshotStamp(load<u32>(p + <usize>H_BOOT_ID), load<u64>(p + <usize>H_SEQ), load<u64>(p + <usize>H_GENERATED_AT));
}

export function stampOf(s: Snapshot): SnapshotStamp {
  return new SnapshotStamp(s.bootId, s.seq, s.generatedAtMs);
}

/** Reads the seq of a document without decoding it (0 when it is too short). */
export function peekSeq(buf: ArrayBuffer): u64 {
  if (buf.byteLength < HEADER_LEN) return 0;
  return load<u64>(changetype<usize>(buf) + <usize>H_SEQ);
}

export class Reader {
  pos: i32;
  err: string = "";
  constructor(public buf: ArrayBuffer, start: i32, public end: i32) { this.pos = start; }
  private need(n: i32): bool {
    if (this.err.length > 0) return false;
    if (this.pos + n > this.end) { this.err = "truncated at offset " + this.pos.toString(); return false; }
    return true;
  }
  fail(msg: string): void { if (this.err.length == 0) this.err = msg; }
  u8(): u8 { if (!this.need(1)) return 0; const v = load<u8>(changetype<usize>(this.buf) + <usize>this.pos); this.pos += 1; return v; }
  u16(): u16 { if (!this.need(2)) return 0; const v = load<u16>(changetype<usize>(this.buf) + <usize>this.pos); this.pos += 2; return v; }
  u32(): u32 { if (!this.need(4)) return 0; const v = load<u32>(changetype<usize>(this.buf) + <usize>this.pos); this.pos += 4; return v; }
  /** u64 that must be exact as a double (<= 2^53 - 1): the agent's numbers are. */
  u64(what: string): u64 {
    if (!this.need(8)) return 0;
    const v = load<u64>(changetype<usize>(this.buf) + <usize>this.pos);
    this.pos += 8;
    if (v > MAX_SAFE_U64) this.fail(what + " " + v.toString() + " exceeds 2^53");
    return v;
  }
  f32(): f32 { if (!this.need(4)) return 0; const v = load<f32>(changetype<usize>(this.buf) + <usize>this.pos); this.pos += 4; return v; }
  str(what: string): string { return this.strOf(<i32>this.u8(), what); }
  /** a string with a u16 length prefix */
  str16(what: string): string { return this.strOf(<i32>this.u16(), what); }
  private strOf(n: i32, what: string): string {
    if (!this.need(n)) return "";
    const at = changetype<usize>(this.buf) + <usize>this.pos;
    if (!isValidUtf8(at, n)) { this.fail(what + " is not valid UTF-8"); return ""; }
    const s = String.UTF8.decodeUnsafe(at, <usize>n);
    this.pos += n;
    return s;
  }
}

function decodePeers(r: Reader, out: Array<PeerState>): void {
  const count = <i32>r.u16();
  r.u16();
  for (let i = 0; i < count && r.err.length == 0; i++) {
    const p = new PeerState();
    p.name = r.str("peer " + i.toString() + " name");
    const state = r.u8();
    if (state > 1) { r.fail("peer " + i.toString() + ": unknown state " + state.toString()); return; }
    p.degraded = state == 1;
    p.lastRttMs = normalizeRtt(r.f32());
    p.avgRttMs = normalizeRtt(r.f32());
    p.recoverStreak = r.u16();
    p.lastSampleAtMs = r.u64("peer " + i.toString() + " lastSampleAtMs");
    if (r.err.length > 0) return;
    if (p.name.length == 0) { r.fail("peer " + i.toString() + ": empty name"); return; }
    out.push(p);
  }
}

/** D1: the first number out of its range makes a healthy instance unhealthy (invalid_data); bad slots read as 1. */
function applyNumberRules(s: InstanceState): void {
  const slotsValid = slotsOk(s.slots);
  if (!slotsValid) s.slots = 1;
  if (!s.healthy) return;
  if (slotsValid && rhoOk(s.rho) && esMsOk(s.esMs) && es2Ms2Ok(s.es2Ms2) && lambdaOk(s.lambdaPerS) && queueOk(s.queueDepth) &&
    latencyOk(s.p50Ms) && latencyOk(s.p99Ms) && latencyOk(s.baselineP99Ms) && gpuUtilOk(s.gpuUtil)) return;
  s.healthy = false;
  s.reason = REASON_INVALID_DATA;
}

function decodeInstances(r: Reader, out: Array<InstanceState>): void {
  const count = <i32>r.u16();
  r.u16();
  for (let i = 0; i < count && r.err.length == 0; i++) {
    const s = new InstanceState();
    const at = "instance " + i.toString();
    s.service = r.str(at + " service");
    s.addr = r.str(at + " address");
    s.peer = r.str(at + " peer");
    const flags = r.u8();
    s.healthy = (flags & 1) != 0;
    s.slotsSource = (flags >> 1) & 3;
    s.slotsFloor = (flags & 32) != 0;
    s.queueGrowing = (flags & 64) != 0;
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
    if (r.err.length > 0) return;
    if (s.service.length == 0) { r.fail(at + ": empty service"); return; }
    // the address goes into x-switchyard-endpoint: only ever a validated ip:port
    if (!isEndpointAddress(s.addr)) { r.fail(at + ": address is not ip:port"); return; }
    if (s.reason > MAX_REASON) { r.fail(at + ": unknown reason code " + s.reason.toString()); return; }
    if (s.slotsSource > SLOTS_EXPORTER) { r.fail(at + ": unknown slots source " + s.slotsSource.toString()); return; }
    // healthy means reason ok: a record claiming both is not one the agent writes
    if (s.healthy && s.reason != 0) { r.fail(at + ": healthy with failure reason " + s.reason.toString()); return; }
    applyNumberRules(s);
    out.push(s);
  }
}

/** RULES section (docs/contracts.md): any bound broken is structural (D1), the document is refused. */
function decodeRules(r: Reader, out: Array<RuleDecision>): void {
  const count = <i32>r.u16();
  r.u16();
  if (count > MAX_RULE_SETS) { r.fail("at most " + MAX_RULE_SETS.toString() + " rule sets, got " + count.toString()); return; }
  for (let i = 0; i < count && r.err.length == 0; i++) {
    const at = "rules[" + i.toString() + "]";
    const d = new RuleDecision();
    d.set = r.str(at + " set");
    const nAuth = <i32>r.u8();
    for (let k = 0; k < nAuth; k++) d.authorities.push(r.str(at + " authority"));
    d.routeHeader = r.str(at + " routeHeader");
    d.version = r.u64(at + " version");
    d.ruleId = r.str(at + " ruleId");
    d.sinceMs = r.u64(at + " sinceMs");
    d.kind = r.u8();
    if (d.kind == ACTION_ROUTE) {
      d.target = r.str(at + " target");
    } else if (d.kind == ACTION_LINK_STATUS) {
      const st = r.u8();
      if (st > 1) { r.fail(at + ": unknown link status " + st.toString()); return; }
      d.linkStatus = st == 1 ? STATUS_DEGRADED : STATUS_NORMAL;
    } else if (d.kind == ACTION_SPLIT) {
      const n = <i32>r.u8();
      for (let k = 0; k < n && r.err.length == 0; k++) {
        const t = r.str(at + " split target");
        d.targets.push(new SplitTarget(t, r.u32()));
      }
    } else if (d.kind == ACTION_LOCAL_REPLY) {
      d.replyStatus = <i32>r.u16();
      const n = <i32>r.u8();
      for (let k = 0; k < n && r.err.length == 0; k++) {
        const name = r.str(at + " reply header name");
        if (d.replyHeaderNames.includes(name)) { r.fail(at + ": duplicate reply header " + name); return; }
        d.replyHeaderNames.push(name);
        d.replyHeaderValues.push(r.str16(at + " reply header value"));
      }
      d.replyBody = r.str16(at + " reply body");
    } else {
      if (r.err.length == 0) r.fail("set " + d.set + ": unknown action kind " + d.kind.toString());
      return;
    }
    const nBecause = <i32>r.u8();
    if (nBecause > MAX_BECAUSE) { r.fail("set " + d.set + ": at most " + MAX_BECAUSE.toString() + " variables in because"); return; }
    for (let k = 0; k < nBecause && r.err.length == 0; k++) {
      const name = r.str(at + " because name");
      const v = r.u8();
      if (v > 1) { r.fail("set " + d.set + ": because value " + v.toString() + " is not 0 or 1"); return; }
      d.because.push(new Because(name, v == 1));
    }
    const has = r.u8();
    if (has > 1) { r.fail("set " + d.set + ": override flag " + has.toString() + " is not 0 or 1"); return; }
    if (has == 1) {
      const by = r.u8();
      if (by > 1) { r.fail("set " + d.set + ": unknown override kind " + by.toString()); return; }
      r.str(at + " override rule");
      d.overridden = true;
      d.overrideAuthor = r.str(at + " override author");
      d.overrideReason = r.str(at + " override reason");
      r.u64(at + " override setAtMs");
      d.overrideExpiresAtMs = r.u64(at + " override expiresAtMs");
    }
    if (r.err.length > 0) return;
    const why = decisionProblem(d);
    if (why.length > 0) { r.fail(why); return; }
    for (let k = 0; k < out.length; k++) if (out[k].set == d.set) { r.fail("duplicate rule set " + d.set); return; }
    out.push(d);
  }
}

export function decodeSnapshot(buf: ArrayBuffer): DecodeResult {
  const res = new DecodeResult();
  const n = buf.byteLength;
  if (n < HEADER_LEN) { res.error = "snapshot shorter than its header (" + n.toString() + " bytes)"; return res; }
  if (n > MAX_SNAPSHOT_BYTES) { res.error = "snapshot larger than 1 MiB"; return res; }
  const p = changetype<usize>(buf);
  if (load<u32>(p + <usize>H_MAGIC) != MAGIC) { res.error = "bad magic"; return res; }
  const version = load<u16>(p + <usize>H_VERSION);
  if (version != 1) { res.error = "unsupported format version " + version.toString(); return res; }
  const hlen = <i32>load<u16>(p + <usize>H_HEADER_LEN);
  if (hlen < HEADER_LEN || hlen > n) { res.error = "bad header length " + hlen.toString(); return res; }
  const total = <i32>load<u32>(p + <usize>H_TOTAL_LEN);
  if (total != n) { res.error = "length mismatch: header says " + total.toString() + ", got " + n.toString(); return res; }
  const crc = load<u32>(p + <usize>H_CRC);
  if (crc32(buf, H_CRC_FROM, n) != crc) { res.error = "checksum mismatch"; return res; }
  const s = new Snapshot();
  const h = new Reader(buf, H_SEQ, HEADER_LEN);
  s.seq = h.u64("seq");
  s.generatedAtMs = h.u64("generatedAtMs");
  if (h.err.length > 0) { res.error = h.err; return res; }
  s.bootId = load<u32>(p + <usize>H_BOOT_ID);
  const sections = <i32>load<u16>(p + <usize>H_SECTION_COUNT);
  const r = new Reader(buf, hlen, n);
  let sawPeers = false, sawInstances = false, sawLlm = false, sawRules = false, sawDecode = false, sawKv = false;
  const lines = new Array<DecodeLine>();
  const kv = new Array<KvCapacity>();
  let unknownSeen: Set<u16> | null = null;
  for (let i = 0; i < sections && r.err.length == 0; i++) {
    const type = r.u16();
    r.u16();
    const len = <i32>r.u32();
    if (r.err.length > 0) break;
    if (len < 0 || r.pos + len > n) { r.err = "section " + i.toString() + " overruns the document"; break; }
    const end = r.pos + len;
    const sr = new Reader(buf, r.pos, end);
    if (type == SECTION_PEERS) {
      if (sawPeers) { r.err = "section " + i.toString() + ": duplicate section type 1"; break; }
      sawPeers = true;
      decodePeers(sr, s.peers);
    } else if (type == SECTION_INSTANCES) {
      if (sawInstances) { r.err = "section " + i.toString() + ": duplicate section type 2"; break; }
      sawInstances = true;
      decodeInstances(sr, s.instances);
    } else if (type == SECTION_LLM) {
      if (sawLlm) { r.err = "section " + i.toString() + ": duplicate section type " + type.toString(); break; }
      sawLlm = true;
      decodeLlm(sr, s.llm);
    } else if (type == SECTION_LLM_DECODE) {
      if (sawDecode) { r.err = "section " + i.toString() + ": duplicate section type " + type.toString(); break; }
      sawDecode = true;
      decodeLlmDecode(sr, lines);
    } else if (type == SECTION_LLM_KV) {
      if (sawKv) { r.err = "section " + i.toString() + ": duplicate section type " + type.toString(); break; }
      sawKv = true;
      decodeLlmKv(sr, kv);
    } else if (type == SECTION_RULES) {
      if (sawRules) { r.err = "section " + i.toString() + ": duplicate section type 3"; break; }
      sawRules = true;
      decodeRules(sr, s.rules);
    } else {
      // unknown section types are skipped by length, but only once each
      if (unknownSeen == null) unknownSeen = new Set<u16>();
      if (unknownSeen.has(type)) { r.err = "section " + i.toString() + ": duplicate section type " + type.toString(); break; }
      unknownSeen.add(type);
    }
    if (sr.err.length > 0) { r.err = "section " + type.toString() + ": " + sr.err; break; }
    r.pos = end;
  }
  if (r.err.length == 0 && r.pos != n) r.err = "trailing bytes after the last section";
  if (r.err.length > 0) { res.error = r.err; return res; }
  if (lines.length > 0) mergeDecodeLines(s.llm, lines);
  if (kv.length > 0) mergeKvCapacity(s.llm, kv);
  res.snapshot = s;
  return res;
}
