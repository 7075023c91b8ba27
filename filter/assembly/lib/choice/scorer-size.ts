// Scorer, per request: the request's own service time. With the instance's per-token times known
// (snapshot LLM section), S = uncached prompt tokens × prefill ms/token + output tokens × decode
// ms/token; otherwise the instance's E[S] less the prefill the cached prefix saves.

/** Service time (ms) of a request at an instance; NaN per-token times fall back to E[S]. */
@inline export function serviceMs(promptTokens: f64, cachedTokens: f64, outTokens: f64, prefillMs: f64, decodeMs: f64,
  fallbackPrefillMs: f64, esMs: f64): f64 {
  const cached = cachedTokens < promptTokens ? cachedTokens : promptTokens;
  if (prefillMs == prefillMs && decodeMs == decodeMs) return (promptTokens - cached) * prefillMs + outTokens * decodeMs;
  const per = prefillMs == prefillMs ? prefillMs : fallbackPrefillMs;
  const s = esMs - cached * per;
  // the saving cannot exceed the prefill part of E[S]; keep a floor of a tenth of E[S]
  const floor = esMs * 0.1;
  return s > floor ? s : floor;
}
