// Test-only encoder for snapshot format v1 (the agent's TypeScript codec is the real one).
import { crc32 } from "../assembly/lib/snapshot";

export class Bytes {
  buf: Array<u8> = [];
  u8(v: u32): Bytes { this.buf.push(<u8>v); return this; }
  u16(v: u32): Bytes { this.u8(v & 0xff); this.u8((v >> 8) & 0xff); return this; }
  u32(v: u32): Bytes { this.u16(v & 0xffff); this.u16(v >>> 16); return this; }
  u64(v: u64): Bytes { this.u32(<u32>(v & 0xffffffff)); this.u32(<u32>(v >> 32)); return this; }
  f32(v: f32): Bytes { this.u32(reinterpret<u32>(v)); return this; }
  str(s: string): Bytes { const b = Uint8Array.wrap(String.UTF8.encode(s)); this.u8(b.length); for (let i = 0; i < b.length; i++) this.u8(b[i]); return this; }
  append(o: Bytes): Bytes { for (let i = 0; i < o.buf.length; i++) this.buf.push(o.buf[i]); return this; }
  toBuffer(): ArrayBuffer { const out = new Uint8Array(this.buf.length); for (let i = 0; i < this.buf.length; i++) out[i] = this.buf[i]; return out.buffer; }
}

export function peer(name: string, degraded: bool, rtt: f32): Bytes {
  return new Bytes().str(name).u8(degraded ? 1 : 0).f32(rtt).f32(rtt).u16(3).u64(1700000000000);
}

export function section(type: u32, count: u32, body: Bytes): Bytes {
  const payload = new Bytes().u16(count).u16(0).append(body);
  return new Bytes().u16(type).u16(0).u32(payload.buf.length).append(payload);
}

export function document(seq: u64, generatedAtMs: u64, sections: Array<Bytes>): ArrayBuffer {
  const body = new Bytes();
  for (let i = 0; i < sections.length; i++) body.append(sections[i]);
  const total = 40 + body.buf.length;
  const head = new Bytes().u32(0x31595753).u16(1).u16(40).u32(total).u32(0).u64(seq).u64(generatedAtMs).u16(sections.length).u16(0).u32(0);
  head.append(body);
  const buf = head.toBuffer();
  store<u32>(changetype<usize>(buf) + 12, crc32(buf, 16, total));
  return buf;
}
