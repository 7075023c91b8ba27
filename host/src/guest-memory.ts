// Guest memory as the host functions see it (cpp-host WasmVm getMemory/setWord and
// WasmBase::copyToPointerSize), with a decode cache for the short strings that repeat from request
// to request (header names and values). WasmVm extends it, so host functions call these methods on
// the VM directly (no extra indirection on the per-call path).

import { lowerAscii as lowerAscii_ } from './header-map';

const lowerAscii = lowerAscii_;

const PTR_MEMO_MASK = 1023;

export interface WAMemory { readonly buffer: ArrayBuffer }

/** Guest strings up to this length go through WasmVm's decode cache (longer ones are decoded). */
const STR_CACHE_MAX_LEN = 64;
/**
 * Slots of the decode cache (direct-mapped): room for the filter's header names plus the values
 * that repeat, e.g. one endpoint address per instance of a 256-instance fleet, without thrashing.
 */
const STR_CACHE_MASK = 2047;

export abstract class GuestMemory {
  memory!: WAMemory;

  private u8cache: Buffer = Buffer.alloc(0);
  private dvCache: DataView = new DataView(new ArrayBuffer(0));
  /** Guest memory as 32-bit words, for comparing 4-byte-aligned strings a word at a time. */
  private i32cache: Int32Array = new Int32Array(0);
  private abCache: ArrayBuffer | null = null;
  // Decode cache of short guest strings: slot → string, its byte length (-1: empty slot) and bytes.
  private readonly strCache: string[] = new Array<string>(STR_CACHE_MASK + 1).fill('');
  private readonly strCacheLower: (string | null)[] = new Array<string | null>(STR_CACHE_MASK + 1).fill(null);
  private readonly strCacheLen = new Int32Array(STR_CACHE_MASK + 1).fill(-1);
  private readonly strCacheBytes = Buffer.alloc((STR_CACHE_MASK + 1) * STR_CACHE_MAX_LEN);
  private readonly strCacheView = new DataView(this.strCacheBytes.buffer, this.strCacheBytes.byteOffset, this.strCacheBytes.length);
  /** Address → the slot last found for it (PTR_MEMO_MASK + 1 entries; -1: none). */
  private readonly ptrMemoAt = new Int32Array(PTR_MEMO_MASK + 1).fill(-1);
  private readonly ptrMemoSlot = new Int32Array(PTR_MEMO_MASK + 1);
  /** The same bytes as words (Buffer.alloc of this size is a fresh, aligned ArrayBuffer). */
  private readonly strCacheWords = new Int32Array(this.strCacheBytes.buffer, this.strCacheBytes.byteOffset, this.strCacheBytes.length >> 2);

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
      this.i32cache = new Int32Array(ab, 0, ab.byteLength >> 2);
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
    // A guest passes its constant names and values from the same addresses on every request: the
    // slot last found for this address is tried first (the comparison still decides).
    const pi = ((ptr >>> 2) ^ (ptr >>> 13)) & PTR_MEMO_MASK;
    if (this.ptrMemoAt[pi] === ptr) {
      const s = this.ptrMemoSlot[pi];
      if (this.strCacheLen[s] === size && this.sameBytes(m, ptr, size, s * STR_CACHE_MAX_LEN)) return s;
    }
    // Slot from a hash of every byte (strings that differ in one digit, like the addresses of a
    // fleet, must not share a slot); the full comparison below decides.
    let h = size;
    let i = 0;
    if ((ptr & 3) === 0) {
      const g = this.i32cache;
      const gw = ptr >>> 2;
      const words = size >>> 2;
      for (let w = 0; w < words; w++) {
        h = Math.imul(h ^ g[gw + w], 0x9e3779b1);
        h ^= h >>> 15;
      }
      i = words << 2;
    }
    for (; i < size; i++) {
      h = Math.imul(h ^ m[ptr + i], 0x9e3779b1);
      h ^= h >>> 15;
    }
    h = Math.imul(h, 0x85ebca6b);
    h ^= h >>> 13;
    const slot = (h ^ (h >>> 12)) & STR_CACHE_MASK;
    this.ptrMemoAt[pi] = ptr;
    this.ptrMemoSlot[pi] = slot;
    if (this.strCacheLen[slot] === size && this.sameBytes(m, ptr, size, slot * STR_CACHE_MAX_LEN)) return slot;
    this.strCache[slot] = size === 0 ? '' : m.toString('latin1', ptr, end);
    this.strCacheLower[slot] = null;
    this.strCacheLen[slot] = size;
    m.copy(this.strCacheBytes, slot * STR_CACHE_MAX_LEN, ptr, end);
    return slot;
  }

  /** Guest bytes [ptr, ptr + size) equal the cached bytes at `at` (a multiple of STR_CACHE_MAX_LEN). */
  private sameBytes(m: Buffer, ptr: number, size: number, at: number): boolean {
    let i = 0;
    if ((ptr & 3) === 0) {
      // Word at a time: guest allocators align their objects (AssemblyScript to 16 bytes).
      const g = this.i32cache;
      const c = this.strCacheWords;
      const gw = ptr >>> 2;
      const cw = at >>> 2;
      const words = size >>> 2;
      for (let w = 0; w < words; w++) if (g[gw + w] !== c[cw + w]) return false;
      i = words << 2;
    } else {
      const dv = this.dvCache;
      const cdv = this.strCacheView;
      for (; i + 4 <= size; i += 4) if (dv.getUint32(ptr + i) !== cdv.getUint32(at + i)) return false;
    }
    const bytes = this.strCacheBytes;
    for (; i < size; i++) if (bytes[at + i] !== m[ptr + i]) return false;
    return true;
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

  /** setU64 of a non-negative integer double below 2^64 (exact: no BigInt needed). */
  setU64Number(ptr: number, v: number): boolean {
    ptr >>>= 0;
    const m = this.mem();
    if (ptr + 8 > m.length) return false;
    const hi = Math.floor(v / 4294967296);
    const dv = this.dvCache;
    dv.setUint32(ptr, v - hi * 4294967296, true);
    dv.setUint32(ptr + 4, hi, true);
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
