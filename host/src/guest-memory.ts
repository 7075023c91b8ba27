// Guest memory as the host functions see it (cpp-host WasmVm getMemory/setWord and
// WasmBase::copyToPointerSize), with a decode cache for the short strings that repeat from request
// to request (header names and values). WasmVm extends it, so host functions call these methods on
// the VM directly (no extra indirection on the per-call path).

import { lowerAscii as lowerAscii_ } from './header-map';

const lowerAscii = lowerAscii_;

export interface WAMemory { readonly buffer: ArrayBuffer }

/** Guest strings up to this length go through WasmVm's decode cache (longer ones are decoded). */
const STR_CACHE_MAX_LEN = 64;
const STR_CACHE_MASK = 255;

export abstract class GuestMemory {
  memory!: WAMemory;

  private u8cache: Buffer = Buffer.alloc(0);
  private dvCache: DataView = new DataView(new ArrayBuffer(0));
  private abCache: ArrayBuffer | null = null;
  // Decode cache of short guest strings: slot → string, its byte length (-1: empty slot) and bytes.
  private readonly strCache: string[] = new Array<string>(STR_CACHE_MASK + 1).fill('');
  private readonly strCacheLower: (string | null)[] = new Array<string | null>(STR_CACHE_MASK + 1).fill(null);
  private readonly strCacheLen = new Int32Array(STR_CACHE_MASK + 1).fill(-1);
  private readonly strCacheBytes = Buffer.alloc((STR_CACHE_MASK + 1) * STR_CACHE_MAX_LEN);
  private readonly strCacheView = new DataView(this.strCacheBytes.buffer, this.strCacheBytes.byteOffset, this.strCacheBytes.length);

  /**
   * Byte view of guest memory. The view is cached and only rebuilt when it went stale: growing a
   * (non-shared) WebAssembly.Memory — from JS or by memory.grow in the guest — detaches the old
   * ArrayBuffer, and views of a detached buffer have length 0. This avoids the `memory.buffer`
   * getter (a call into the engine) on every host function call.
   */
  mem(): Buffer {
    const m = this.u8cache;
    return m.length !== 0 ? m : this.refreshMem();
  }

  private refreshMem(): Buffer {
    const ab = this.memory.buffer;
    if (ab !== this.abCache) {
      this.abCache = ab;
      this.u8cache = Buffer.from(ab);
      this.dvCache = new DataView(ab);
    }
    return this.u8cache;
  }

  /** View of guest memory, or null if out of bounds (WasmVm::getMemory). */
  view(ptr: number, size: number): Buffer | null {
    ptr >>>= 0;
    size >>>= 0;
    const m = this.mem();
    if (ptr + size > m.length) return null;
    return m.subarray(ptr, ptr + size);
  }

  /** Guest bytes as a latin1 string (bytes round-trip exactly), or null if out of bounds. */
  str(ptr: number, size: number): string | null {
    ptr >>>= 0;
    size >>>= 0;
    const m = this.mem();
    if (ptr + size > m.length) return null;
    if (size > STR_CACHE_MAX_LEN) return m.toString('latin1', ptr, ptr + size);
    return this.strCache[this.strSlot(m, ptr, size)];
  }

  /** A header name from guest memory, lower-cased like Http::LowerCaseString; null if out of bounds. */
  key(ptr: number, size: number): string | null {
    ptr >>>= 0;
    size >>>= 0;
    const m = this.mem();
    if (ptr + size > m.length) return null;
    if (size > STR_CACHE_MAX_LEN) return lowerAscii(m.toString('latin1', ptr, ptr + size));
    const slot = this.strSlot(m, ptr, size);
    let k = this.strCacheLower[slot];
    if (k === null) k = this.strCacheLower[slot] = lowerAscii(this.strCache[slot]);
    return k;
  }

  /**
   * Short strings (header names and values) repeat from request to request: a small
   * content-addressed, direct-mapped cache keeps the decoded string of the bytes last seen in
   * each slot, so the common case allocates nothing and later hashing/comparisons reuse the
   * same string. Returns the slot holding exactly these bytes (in bounds, size <= max).
   */
  private strSlot(m: Buffer, ptr: number, size: number): number {
    const end = ptr + size;
    // Slot from the length and a few sampled bytes (the full comparison below decides).
    let h = size;
    if (size !== 0) {
      h = Math.imul(h, 31) + m[ptr];
      h = Math.imul(h, 31) + m[end - 1];
      h = Math.imul(h, 31) + m[ptr + (size >>> 1)];
      h = Math.imul(h, 31) + m[ptr + (size >>> 2)];
      h = Math.imul(h, 31) + m[end - 1 - (size >>> 2)];
    }
    const slot = (h ^ (h >>> 8) ^ (h >>> 16)) & STR_CACHE_MASK;
    const bytes = this.strCacheBytes;
    const at = slot * STR_CACHE_MAX_LEN;
    if (this.strCacheLen[slot] === size) {
      // Compare 4 bytes at a time, then the tail.
      const dv = this.dvCache;
      const cdv = this.strCacheView;
      let i = 0;
      while (i + 4 <= size && dv.getUint32(ptr + i) === cdv.getUint32(at + i)) i += 4;
      if (i + 4 > size) {
        while (i < size && bytes[at + i] === m[ptr + i]) i++;
        if (i === size) return slot;
      }
    }
    this.strCache[slot] = size === 0 ? '' : m.toString('latin1', ptr, end);
    this.strCacheLower[slot] = null;
    this.strCacheLen[slot] = size;
    m.copy(bytes, at, ptr, end);
    return slot;
  }

  setU32(ptr: number, v: number): boolean {
    ptr >>>= 0;
    const m = this.mem();
    if (ptr + 4 > m.length) return false;
    this.dvCache.setUint32(ptr, v >>> 0, true);
    return true;
  }

  setU64(ptr: number, v: bigint): boolean {
    ptr >>>= 0;
    const m = this.mem();
    if (ptr + 8 > m.length) return false;
    this.dvCache.setBigUint64(ptr, BigInt.asUintN(64, v), true);
    return true;
  }

  /** WasmBase::allocMemory: guest malloc; null on failure. */
  abstract alloc(size: number): number | null;

  /** WasmBase::copyToPointerSize. */
  copyOut(data: Buffer | string, ptrPtr: number, sizePtr: number): boolean {
    const size = typeof data === 'string' ? data.length : data.length;
    let p = 0;
    if (size > 0) {
      const a = this.alloc(size);
      if (a === null) return false;
      p = a;
      const m = this.mem();
      if (typeof data !== 'string') data.copy(m, p);
      else if (size <= STR_CACHE_MAX_LEN) {
        // Like Buffer#write(…, 'latin1'): each UTF-16 code unit keeps its low byte.
        for (let i = 0; i < size; i++) m[p + i] = data.charCodeAt(i);
      } else m.write(data, p, size, 'latin1');
    }
    return this.setU32(ptrPtr, p) && this.setU32(sizePtr, size);
  }

}
