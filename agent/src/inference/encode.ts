// INSTANCES section (type 2) records and their payload bytes: the snapshot codec's section
// encoder and decoder (agent/src/snapshot/codec.ts), re-exported for the inference room.
import {
  type InstanceReason,
  type InstanceRecord,
  type SlotsSource,
  INSTANCE_REASONS,
  SLOTS_SOURCES,
  encodeInstancesSection,
  decodeInstancesSection,
} from '../snapshot/codec';

export type { InstanceRecord, InstanceReason, SlotsSource };
export { INSTANCE_REASONS, SLOTS_SOURCES, encodeInstancesSection, decodeInstancesSection };

/** Wire code of a reason (contracts.md: 0 ok, 1 unreachable, 2 http_error, 3 parse_error, 4 stale, 5 no_data, 6 invalid_data). */
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
