// Bench entry (AssemblyScript) for bench/request-parse.ts: the pure request modules alone,
// called the way the filter will call them on a complete body.
import { RequestParser, ParseLimits, ReqError } from "../../filter/assembly/lib/request/openai";
import { hashPromptBlocks, modelSeed, PrefixIndex, PrefixMatch, DEFAULT_BLOCK_BYTES, DEFAULT_MAX_BLOCKS } from "../../filter/assembly/lib/request/prefix";
import { parseJson } from "../../filter/assembly/lib/json";

let body: ArrayBuffer = new ArrayBuffer(0);
const parser = new RequestParser(new ParseLimits());
const hashes = new StaticArray<u64>(DEFAULT_MAX_BLOCKS);
const index = PrefixIndex.withBudget(1 << 16, 4 << 20, 600000);
const match = new PrefixMatch();

/** A fresh body buffer of `len` bytes (the host copies the body into it, as proxy_get_buffer_bytes does). */
export function bodyBuffer(len: i32): usize {
  body = new ArrayBuffer(len);
  return changetype<usize>(body);
}

/** Parse + hash + lookup + record (slot = call % 8). Returns the number of hashed blocks, or -error. */
export function run(api: u8, nowMs: u64, slot: u16): i32 {
  const r = parser.parse(body, api);
  if (r.error != ReqError.None) return -(<i32>r.error);
  const n = hashPromptBlocks(body, r.spans, modelSeed(r.model), DEFAULT_BLOCK_BYTES, DEFAULT_MAX_BLOCKS, hashes);
  index.lookup(hashes, n, nowMs, match);
  index.record(hashes, n, slot, nowMs);
  return n;
}

/** Parse only. */
export function parseOnly(api: u8): i32 {
  const r = parser.parse(body, api);
  return r.error != ReqError.None ? -(<i32>r.error) : r.spanCount();
}

/** The alternative: decode to a string and build lib/json.ts's tree. */
export function parseWithJsonTs(): i32 {
  const r = parseJson(String.UTF8.decode(body));
  if (r.value == null) return -1;
  const m = r.value!.get("model");
  return m == null ? -2 : m.s.length;
}

export function lastMatchSlots(): i32 { return match.slots.length; }
export function indexCount(): i32 { return index.count(); }

/** Parse + hash only (no index). */
export function parseHash(api: u8): i32 {
  const r = parser.parse(body, api);
  if (r.error != ReqError.None) return -(<i32>r.error);
  return hashPromptBlocks(body, r.spans, modelSeed(r.model), DEFAULT_BLOCK_BYTES, DEFAULT_MAX_BLOCKS, hashes);
}

/** Lookup + record of the last hashed blocks only. */
export function indexOnly(n: i32, nowMs: u64, slot: u16): i32 {
  index.lookup(hashes, n, nowMs, match);
  index.record(hashes, n, slot, nowMs);
  return match.slots.length;
}
