// Prompt block hashing and the two prefix indexes the benchmark's policies use.
//
// hashPromptBlocks: the prompt TEXT cut into `blockBytes`-byte blocks (a trailing partial block is
// not hashed), chained (block i's hash covers blocks 0..i) and seeded with the model name, at most
// `maxBlocks` blocks — the estimator of the Gateway API Inference Extension's prefix-cache-scorer
// (`hashPrompt`: 64-byte blocks, i.e. vLLM's 16-token block at ~4 characters per token, at most 256
// blocks, model name hashed into block 0) and of the filter's lib/request/prefix.ts (same defaults).
// The hash function differs (xxhash there, a 2×32-bit FNV/Murmur mix here): only equality matters.
//
// GieIndexer: GIE's indexer — per server an LRU of `lruCapacityPerServer` block hashes (31 250);
//   lookup = for each server, the number of leading blocks found, greedy from block 0 (stops at
//   the first block no server has).
// SlotIndex: the filter's PrefixIndex (lib/request/prefix.ts) — set-associative: a hash picks one
//   set of 8 ways (sets = the largest power of two with 8 × sets ≤ capacity), a full set evicts its
//   least recently recorded way; aged (`maxAgeMs`), the last 4 instance slots each hash was sent to.

export const GIE_BLOCK_BYTES = 64;
export const GIE_MAX_BLOCKS = 256;
export const GIE_LRU_CAPACITY_PER_SERVER = 31250;

/** Chain hashes (as strings "a.b") of the prompt's full blocks. Text is ASCII in the workloads, so
 *  UTF-16 code units = bytes; a non-ASCII code unit is mixed in whole (equality is what matters). */
export function hashPromptBlocks(model: string, text: string, blockBytes = GIE_BLOCK_BYTES, maxBlocks = GIE_MAX_BLOCKS): string[] {
  const n = Math.min(Math.floor(text.length / blockBytes), maxBlocks);
  const out: string[] = new Array(n);
  let a = 0x811c9dc5;
  let b = 0x9747b28c;
  for (let k = 0; k < model.length; k++) {
    a = Math.imul(a ^ model.charCodeAt(k), 0x01000193);
    b = Math.imul(b ^ model.charCodeAt(k), 0x5bd1e995);
  }
  for (let i = 0; i < n; i++) {
    const end = (i + 1) * blockBytes;
    for (let k = i * blockBytes; k < end; k++) {
      const c = text.charCodeAt(k);
      a = Math.imul(a ^ c, 0x01000193);
      b = Math.imul(b ^ c, 0x5bd1e995);
      b ^= b >>> 15;
    }
    out[i] = (a >>> 0).toString(36) + '.' + (b >>> 0).toString(36);
  }
  return out;
}

/** GIE's approximate prefix index: per-server LRU of block hashes. */
export class GieIndexer {
  private readonly byHash = new Map<string, Set<number>>();
  private readonly perServer = new Map<number, Map<string, true>>();
  constructor(readonly capacityPerServer = GIE_LRU_CAPACITY_PER_SERVER) {}

  add(hashes: string[], server: number): void {
    let lru = this.perServer.get(server);
    if (!lru) this.perServer.set(server, (lru = new Map()));
    for (const h of hashes) {
      lru.delete(h);
      lru.set(h, true);
      let s = this.byHash.get(h);
      if (!s) this.byHash.set(h, (s = new Set()));
      s.add(server);
      if (lru.size > this.capacityPerServer) {
        const old = lru.keys().next().value as string;
        lru.delete(old);
        const os = this.byHash.get(old);
        if (os) {
          os.delete(server);
          if (os.size === 0) this.byHash.delete(old);
        }
      }
    }
  }

  /** server -> leading blocks matched (GIE matchLongestPrefix: greedy, stops at the first miss). */
  matchLongestPrefix(hashes: string[]): Map<number, number> {
    const res = new Map<number, number>();
    for (const h of hashes) {
      const s = this.byHash.get(h);
      if (!s || s.size === 0) break;
      for (const srv of s) res.set(srv, (res.get(srv) ?? 0) + 1);
    }
    return res;
  }

  entries(server: number): number {
    return this.perServer.get(server)?.size ?? 0;
  }
}

export const SLOTS_PER_ENTRY = 4;
/** ways per set, as the filter's index (lib/request/prefix.ts WAYS) */
export const WAYS = 8;

interface SlotEntry {
  h: string;
  set: number;
  atMs: number;
  slots: number[]; // most recent first, at most SLOTS_PER_ENTRY
}

/** The set of a (string) block hash: any well-mixed function of it (the filter uses the hash's low bits). */
function setOf(h: string, mask: number): number {
  let x = 0x9e3779b9;
  for (let k = 0; k < h.length; k++) {
    x = Math.imul(x ^ h.charCodeAt(k), 0x85ebca6b);
    x ^= x >>> 13;
  }
  return (x >>> 0) & mask;
}

/** The filter's index (lib/request/prefix.ts PrefixIndex) in TypeScript: hash -> last 4 slots, in sets of WAYS. */
export class SlotIndex {
  private readonly map = new Map<string, SlotEntry>();
  private readonly sets: SlotEntry[][];
  private readonly mask: number;
  evictions = 0;
  expirations = 0;
  constructor(
    readonly capacity: number,
    readonly maxAgeMs: number,
  ) {
    let n = 1;
    while (n * 2 * WAYS <= capacity) n *= 2;
    this.sets = Array.from({ length: n }, () => []);
    this.mask = n - 1;
  }

  get size(): number {
    return this.map.size;
  }

  record(hashes: string[], slot: number, nowMs: number): void {
    for (const h of hashes) {
      const e = this.map.get(h);
      if (e) {
        const k = e.slots.indexOf(slot);
        if (k >= 0) e.slots.splice(k, 1);
        e.slots.unshift(slot);
        if (e.slots.length > SLOTS_PER_ENTRY) e.slots.length = SLOTS_PER_ENTRY;
        e.atMs = nowMs;
        continue;
      }
      const set = setOf(h, this.mask);
      const ways = this.sets[set];
      const fresh: SlotEntry = { h, set, atMs: nowMs, slots: [slot] };
      if (ways.length < WAYS) ways.push(fresh);
      else {
        let v = 0;
        for (let k = 1; k < ways.length; k++) if (ways[k].atMs < ways[v].atMs) v = k;
        if (nowMs - ways[v].atMs > this.maxAgeMs) this.expirations++;
        else this.evictions++;
        this.map.delete(ways[v].h);
        ways[v] = fresh;
      }
      this.map.set(h, fresh);
    }
  }

  private drop(e: SlotEntry): void {
    this.map.delete(e.h);
    const ways = this.sets[e.set];
    ways.splice(ways.indexOf(e), 1);
    this.expirations++;
  }

  /** slot -> leading blocks (from block 0, consecutive) it was sent; aged entries are dropped. */
  lookup(hashes: string[], nowMs: number): Map<number, number> {
    const res = new Map<number, number>();
    let alive: Set<number> | null = null;
    for (let i = 0; i < hashes.length; i++) {
      const e = this.map.get(hashes[i]);
      if (e && nowMs - e.atMs > this.maxAgeMs) {
        this.drop(e);
        break;
      }
      if (!e) break;
      const here = new Set(e.slots);
      const next = new Set<number>();
      for (const s of here) if (alive === null || alive.has(s)) next.add(s);
      if (next.size === 0) break;
      for (const s of next) res.set(s, i + 1);
      alive = next;
    }
    return res;
  }

  forgetSlot(slot: number): void {
    for (const e of this.map.values()) {
      const k = e.slots.indexOf(slot);
      if (k >= 0) e.slots.splice(k, 1);
    }
  }
}
