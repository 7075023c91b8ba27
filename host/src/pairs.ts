// Serialized header pairs (proxy-wasm-cpp-host src/pairs_util.cc):
//   u32 count, then count × (u32 key_len, u32 value_len), then per pair key\0value\0.
// Strings are handled as latin1 so bytes round-trip exactly.

export type Pair = [string, string];

/** cpp-host PROXY_WASM_HOST_PAIRS_MAX_BYTES / _MAX_COUNT. */
export const PAIRS_MAX_BYTES = 1024 * 1024;
export const PAIRS_MAX_COUNT = 1024;

export function pairsSize(pairs: readonly Pair[]): number {
  let size = 4;
  for (let i = 0; i < pairs.length; i++) {
    const e = pairs[i];
    size += 10 + e[0].length + e[1].length;
  }
  return size;
}

/** Strings up to this length are copied code unit by code unit (a Buffer#write call costs more). */
const SHORT = 64;

/**
 * Serializes into `out` at `off` (which must have pairsSize(pairs) bytes). Strings are latin1:
 * each UTF-16 code unit keeps its low byte, as Buffer#write(…, 'latin1') does.
 */
export function writePairs(pairs: readonly Pair[], out: Buffer, off: number): void {
  const n = pairs.length;
  putU32(out, off, n);
  let p = off + 4;
  for (let i = 0; i < n; i++) {
    const e = pairs[i];
    putU32(out, p, e[0].length);
    putU32(out, p + 4, e[1].length);
    p += 8;
  }
  for (let i = 0; i < n; i++) {
    const e = pairs[i];
    p = putLatin1(out, p, e[0]);
    out[p++] = 0;
    p = putLatin1(out, p, e[1]);
    out[p++] = 0;
  }
}

function putU32(out: Buffer, p: number, v: number): void {
  out[p] = v;
  out[p + 1] = v >>> 8;
  out[p + 2] = v >>> 16;
  out[p + 3] = v >>> 24;
}

function putLatin1(out: Buffer, p: number, s: string): number {
  const n = s.length;
  if (n > SHORT) return p + out.write(s, p, 'latin1');
  for (let i = 0; i < n; i++) out[p + i] = s.charCodeAt(i);
  return p + n;
}

export function serializePairs(pairs: readonly Pair[]): Buffer {
  const out = Buffer.allocUnsafe(pairsSize(pairs));
  writePairs(pairs, out, 0);
  return out;
}

/** Like PairsUtil::toPairs: any malformed input (or over the limits) yields an empty list. */
export function parsePairs(buf: Uint8Array): Pair[] {
  const n = buf.length;
  if (n > PAIRS_MAX_BYTES || n < 4) return [];
  const b = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  const count = b.readUInt32LE(0);
  if (count > PAIRS_MAX_COUNT) return [];
  let p = 4;
  if (p + count * 8 > n) return [];
  const sizes: number[] = new Array(count * 2);
  for (let i = 0; i < count; i++) {
    sizes[2 * i] = b.readUInt32LE(p);
    sizes[2 * i + 1] = b.readUInt32LE(p + 4);
    p += 8;
  }
  const pairs: Pair[] = new Array(count);
  for (let i = 0; i < count; i++) {
    const kl = sizes[2 * i];
    const vl = sizes[2 * i + 1];
    if (p + kl + 1 > n) return [];
    const k = b.toString('latin1', p, p + kl);
    p += kl;
    if (b[p++] !== 0) return [];
    if (p + vl + 1 > n) return [];
    const v = b.toString('latin1', p, p + vl);
    p += vl;
    if (b[p++] !== 0) return [];
    pairs[i] = [k, v];
  }
  if (p !== n) return [];
  return pairs;
}
