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
