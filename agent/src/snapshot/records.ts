// The record list that every snapshot section's payload is (docs/contracts.md, "Sections"), and the
// endpoint key that opens most records: one place for the count bound and the address check.
import { isEndpointAddress } from './rules';
import type { Reader, Writer } from './codec';

/**
 * The record list every section payload is: u16 count, u16 reserved (0), then the records.
 * write checks the count against 0..max (the field named `<list>.length`); read refuses a count
 * above max before reading any record, so a hostile count costs nothing.
 */
export function writeRecords<T>(w: Writer, list: string, records: readonly T[], each: (rec: T, i: number) => void, max = 0xffff): void {
  if (!Number.isInteger(records.length) || records.length > max) throw new RangeError(`${list}.length: must be an integer in 0..${max}`);
  w.u16(records.length);
  w.u16(0);
  records.forEach(each);
}

export function readRecords<T>(r: Reader, list: string, each: (i: number) => T, max = 0xffff): T[] {
  const count = r.u16();
  r.u16();
  if (count > max) r.fail(`${list}: at most ${max} records, got ${count}`);
  const out: T[] = [];
  for (let i = 0; i < count; i++) out.push(each(i));
  return out;
}

/** The service and ip:port address that open an endpoint record, refused when empty / not ip:port. */
export function readEndpoint(r: Reader, list: string, i: number): { service: string; addr: string } {
  const service = r.str(list, i, 'service');
  const addr = r.str(list, i, 'addr');
  if (!service) r.fail(`${list}[${i}]: empty service`);
  if (!isEndpointAddress(addr)) r.fail(`${list}[${i}]: address ${JSON.stringify(addr)} is not ip:port`);
  return { service, addr };
}
