// INSTANCES section (type 2) records and their payload bytes.
//
// The record type and the wire encoder are the snapshot codec's (agent/src/snapshot/codec.ts,
// which already writes section type 2 inside encodeSnapshot but does not export the section
// encoder on its own). encodeInstancesSection() therefore runs the codec and cuts the type-2
// payload out of the document, so there is exactly one implementation of the byte layout.
import {
  type InstanceReason,
  type InstanceRecord,
  INSTANCE_REASONS,
  HEADER_LENGTH,
  crc32,
  SECTION_INSTANCES,
  decodeSnapshot,
  encodeSnapshot,
} from '../snapshot/codec';

export type { InstanceRecord, InstanceReason };
export { INSTANCE_REASONS };

/** Wire code of a reason (contracts.md: 0 ok, 1 unreachable, 2 http_error, 3 parse_error, 4 stale, 5 no_data). */
export function reasonCode(r: InstanceReason): number {
  return INSTANCE_REASONS.indexOf(r);
}

/** Fixed bytes per record besides the three strings: 3 length bytes + flags + reason + 9 f32 + u32 dataAgeMs + f32 slots. */
export const INSTANCE_FIXED_BYTES = 3 + 1 + 1 + 9 * 4 + 4 + 4;

/** Payload size of the INSTANCES section for these records (u16 count + u16 reserved + records). */
export function instancesSectionSize(records: InstanceRecord[]): number {
  let n = 4;
  for (const r of records) n += INSTANCE_FIXED_BYTES + Buffer.byteLength(r.service) + Buffer.byteLength(r.addr) + Buffer.byteLength(r.peer ?? '');
  return n;
}

/** The INSTANCES section payload (starting with the u16 count), as the codec writes it. */
export function encodeInstancesSection(records: InstanceRecord[]): Buffer {
  const doc = encodeSnapshot({ seq: 0, generatedAtMs: 0, peers: [], instances: records });
  let pos = HEADER_LENGTH;
  const count = doc.readUInt16LE(32);
  for (let i = 0; i < count; i++) {
    const type = doc.readUInt16LE(pos);
    const len = doc.readUInt32LE(pos + 4);
    if (type === SECTION_INSTANCES) return Buffer.from(doc.subarray(pos + 8, pos + 8 + len));
    pos += 8 + len;
  }
  throw new Error('codec wrote no INSTANCES section');
}

/** Decode an INSTANCES payload (via the codec's decoder; for tests and tools). */
export function decodeInstancesSection(payload: Buffer): InstanceRecord[] {
  const doc = encodeSnapshot({ seq: 0, generatedAtMs: 0, peers: [], instances: [] });
  // replace the (empty) instances section by this payload and re-seal
  const head = doc.subarray(0, doc.length - 4 - 8);
  const sec = Buffer.alloc(8);
  sec.writeUInt16LE(SECTION_INSTANCES, 0);
  sec.writeUInt32LE(payload.length, 4);
  const out = Buffer.concat([head, sec, payload]);
  out.writeUInt32LE(out.length, 8);
  out.writeUInt32LE(crc32(out.subarray(16)), 12);
  return decodeSnapshot(out).instances ?? [];
}
