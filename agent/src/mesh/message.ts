// The pool message a leader publishes on NATS: a snapshot document (docs/contracts.md framing,
// CRC-checked) with the service's INSTANCES and, for LLM services, LLM sections; header seq and
// generatedAtMs as in the agent's snapshot, bootId = the leader's id (random u32 per collector
// start). The records are exactly what a local scrape would give (the estimator output types),
// so a subscriber serves them unchanged except for dataAgeMs (+ the time since receipt).
import { decodeSnapshot, encodeDocument, encodeInstancesSection, SECTION_INSTANCES, type InstanceRecord } from '../snapshot/codec';
import { encodeLlmSection } from '../snapshot/codec';
import { SECTION_LLM, type InstanceLlmRecord } from '../snapshot/llm';

export interface PoolMessage {
  leaderId: number;
  seq: number;
  generatedAtMs: number;
  peer: string;
  service: string;
  instances: InstanceRecord[];
  /** undefined: the service publishes no LLM section */
  llm?: InstanceLlmRecord[];
}

export function encodePoolMessage(m: PoolMessage): Buffer {
  const sections = [{ type: SECTION_INSTANCES, payload: encodeInstancesSection(m.instances) }];
  if (m.llm !== undefined) sections.push({ type: SECTION_LLM, payload: encodeLlmSection(m.llm) });
  return encodeDocument({ seq: m.seq, generatedAtMs: m.generatedAtMs, bootId: m.leaderId }, sections);
}

/**
 * Decode and check a message received on the subject of (peer, service). Throws (a message the
 * subscriber counts as rejected, keeping the last good one) on a framing/CRC error, a missing
 * INSTANCES section, or a record of another pool.
 */
export function decodePoolMessage(data: Uint8Array, peer: string, service: string): PoolMessage {
  const d = decodeSnapshot(data);
  if (d.instances === undefined) throw new Error('pool message: no INSTANCES section');
  for (const r of d.instances) {
    if (r.service !== service || r.peer !== peer) throw new Error(`pool message: record ${r.service}/${r.addr} (peer "${r.peer}") on the subject of ${service} (peer "${peer}")`);
  }
  const addrs = new Set(d.instances.map((r) => r.addr));
  for (const l of d.llm ?? []) {
    if (l.service !== service || !addrs.has(l.addr)) throw new Error(`pool message: LLM record ${l.service}/${l.addr} has no INSTANCES record`);
  }
  return { leaderId: d.bootId, seq: d.seq, generatedAtMs: d.generatedAtMs, peer, service, instances: d.instances, llm: d.llm };
}

// The leader's heartbeat, per pool on <pool subject>.leader every mesh.heartbeatMs while it leads
// (and once with RESIGNED at a graceful stop): 12 bytes, magic "SYHB", version 1, flags, the
// leader's heartbeat interval (ms, so that a listener derives the silence window from the
// leader's own rate) and its mesh id. Standby collectors take over a pool whose leader is silent
// for the takeover window; every agent follows one leader per pool by it (runtime.ts).
export const HEARTBEAT_MAGIC = 0x53594842; // "SYHB"
export const HEARTBEAT_RESIGNED = 1;

export interface Heartbeat {
  leaderId: number;
  heartbeatMs: number;
  /** a graceful stop: the next leader is followed at once, without waiting for the window */
  resigned: boolean;
}

export function encodeHeartbeat(h: Heartbeat): Buffer {
  const b = Buffer.alloc(12);
  b.writeUInt32BE(HEARTBEAT_MAGIC, 0);
  b.writeUInt8(1, 4);
  b.writeUInt8(h.resigned ? HEARTBEAT_RESIGNED : 0, 5);
  b.writeUInt16BE(Math.min(0xffff, Math.max(0, Math.round(h.heartbeatMs))), 6);
  b.writeUInt32BE(h.leaderId >>> 0, 8);
  return b;
}

/** Throws on anything but a 12-byte version-1 heartbeat with a non-zero interval and id. */
export function decodeHeartbeat(data: Uint8Array): Heartbeat {
  if (data.length !== 12) throw new Error(`heartbeat: ${data.length} bytes, expected 12`);
  const b = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  if (b.readUInt32BE(0) !== HEARTBEAT_MAGIC) throw new Error('heartbeat: bad magic');
  if (b.readUInt8(4) !== 1) throw new Error(`heartbeat: version ${b.readUInt8(4)}`);
  const heartbeatMs = b.readUInt16BE(6);
  const leaderId = b.readUInt32BE(8);
  if (heartbeatMs === 0 || leaderId === 0) throw new Error('heartbeat: zero interval or id');
  return { leaderId, heartbeatMs, resigned: (b.readUInt8(5) & HEARTBEAT_RESIGNED) !== 0 };
}
