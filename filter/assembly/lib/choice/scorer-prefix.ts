// Scorer, per request: prefix-cache locality. The tokens of the prompt's leading blocks an instance
// was last sent (PrefixIndex, lib/request/prefix.ts) are assumed still in its KV cache, discounted
// as its KV cache fills: a cache near full evicts the very prefixes that made the instance
// attractive (linear from 1 at kvFull − 0.2 to 0 at kvFull; unknown use counts as empty).

/** Fraction of a remembered prefix assumed still cached at KV-cache use `kv` (NaN: unknown). */
@inline export function prefixKeep(kv: f64, kvFull: f64): f64 {
  if (!(kv == kv)) return 1;
  if (kv >= kvFull) return 0;
  const soft = kvFull - 0.2;
  if (kv <= soft) return 1;
  return (kvFull - kv) / 0.2;
}

/** Tokens assumed cached at an instance that was sent `blocks` leading blocks of `blockBytes` bytes. */
@inline export function cachedTokens(blocks: i32, blockBytes: i32, bytesPerToken: f64, kv: f64, kvFull: f64): f64 {
  if (blocks <= 0) return 0;
  return <f64>blocks * <f64>blockBytes / bytesPerToken * prefixKeep(kv, kvFull);
}
