// The inference side of one service's candidates, built once per snapshot beside the Plan (same
// candidate order): per-token prefill/decode times, KV-cache use, adapter capacity and which models
// each instance serves (lib/snapshot-llm.ts), as flat arrays for the per-request scoring pass
// (score-request.ts). Models are columns: flags[m * n + i] is candidate i's MODEL_* flags for model m.
import { InstanceLlm, MODEL_BASE, MODEL_LOADED, MODEL_WAITING } from "../snapshot-llm";

/** Plan-internal flag (bits 3-7 are zero on the wire): the instance lists this model at all. */
export const MODEL_LISTED: u8 = 0x80;
import { Plan } from "./plan";

export class LlmPlan {
  n: i32 = 0;
  /** Whether any candidate has LLM data (no data: no model restriction). */
  hasData: bool = false;
  /**
   * Per-token terms per candidate, in ms: the pool's median of the measured values, the same for
   * every candidate (poolTerms): one engine model, so neither an unknown term nor a lucky window
   * makes an instance cheaper. NaN in every candidate: no candidate measured that term
   * (score-request.ts then prices prefill at request.fallbackPrefillMsPerToken and leaves decode out).
   */
  prefillMs: StaticArray<f64> = new StaticArray<f64>(0);
  /** Each candidate's own measured prefill ms per token where it stands out of its base model pool's spread, else that pool's median (ownByPool; NaN: unknown): critical requests' speed term (picker-calm.ts). */
  prefillOwn: StaticArray<f64> = new StaticArray<f64>(0);
  decodeMs: StaticArray<f64> = new StaticArray<f64>(0);
  /** The decode line (section type 5): ms per output token at batch n = decodeIdle + decodePerSeq · n,
   *  the pool's (medians of the instances' lines: poolDecodeLines); NaN both: no instance has one. */
  decodeIdle: StaticArray<f64> = new StaticArray<f64>(0);
  decodePerSeq: StaticArray<f64> = new StaticArray<f64>(0);
  /** Candidates whose prefill / decode term was filled from the fleet (debug, tests). */
  prefillFilled: i32 = 0;
  decodeFilled: i32 = 0;
  kv: StaticArray<f64> = new StaticArray<f64>(0);
  /** sequences the KV cache holds (NaN: unknown): the shedding pressure's denominator where known */
  kvSeqs: StaticArray<f64> = new StaticArray<f64>(0);
  /** Adapter capacity left: maxLoras − adapters loaded (−1: unknown / no LoRA). */
  loraRoom: StaticArray<i32> = new StaticArray<i32>(0);
  /** Adapters this proxy sent to be loaded since the scrape (adapter-sends.ts): slots of loraRoom taken. */
  loraSent: StaticArray<i32> = new StaticArray<i32>(0);
  /** Adapters the instance runs at once (vLLM max_loras; −1: unknown / no LoRA). */
  maxLoras: StaticArray<i32> = new StaticArray<i32>(0);
  /** E[S] per candidate (the body-blind service time) and the rest of the static wait (RTT, queueing). */
  esMs: StaticArray<f64> = new StaticArray<f64>(0);
  restMs: StaticArray<f64> = new StaticArray<f64>(0);
  /** 1/weight (scorer-health.ts). */
  inv: StaticArray<f64> = new StaticArray<f64>(0);
  modelIndex: Map<string, i32> = new Map();
  /** Model name per column, and its hash (modelHash: adapter-share.ts, adapter-streams.ts). */
  names: Array<string> = [];
  hashes: StaticArray<u32> = new StaticArray<u32>(0);
  /** Per model: served by some candidate as a base model (else only as an adapter). */
  isBase: Array<bool> = [];
  /**
   * Per model: its pool, the name the overload state is kept under (lib/overload.ts) — a base
   * model's own name; an adapter's base model (the base of the first candidate that lists it), as
   * its requests load the same instances and KV caches as the base model's.
   */
  poolOf: Array<string> = [];
  flags: StaticArray<u8> = new StaticArray<u8>(0);
  /** The flags as the snapshot gave them, before any adapter mark (adapter-sends.ts, adapter-share.ts). */
  snapFlags: StaticArray<u8> = new StaticArray<u8>(0);

  /** Back to the snapshot's flags and no LoRA slot taken: the marks are applied again after this. */
  resetMarks(): void {
    memory.copy(changetype<usize>(this.flags), changetype<usize>(this.snapFlags), <usize>this.flags.length);
    for (let i = 0; i < this.loraSent.length; i++) unchecked(this.loraSent[i] = 0);
  }

  /** Column of `model`, -1 when no candidate lists it. */
  modelColumn(model: string): i32 {
    return this.modelIndex.has(model) ? this.modelIndex.get(model) : -1;
  }

  @inline flagsOf(col: i32, i: i32): u8 { return unchecked(this.flags[col * this.n + i]); }
}

/**
 * Builds the LLM side of `plan` from the snapshot's LLM records of `service`; `esMs`/`weight` are
 * the candidates' E[S] and health weight in plan order. Records of other services or of addresses
 * not in the plan are ignored; the model table is bounded by what the live fleet lists.
 */
export function buildLlmPlan(plan: Plan, service: string, llm: Array<InstanceLlm>, esMs: Array<f64>, weight: Array<f64>): LlmPlan {
  const n = plan.n;
  const lp = new LlmPlan();
  lp.n = n;
  lp.prefillMs = new StaticArray<f64>(n);
  lp.decodeMs = new StaticArray<f64>(n);
  lp.decodeIdle = new StaticArray<f64>(n);
  lp.decodePerSeq = new StaticArray<f64>(n);
  lp.kv = new StaticArray<f64>(n);
  lp.kvSeqs = new StaticArray<f64>(n);
  lp.loraRoom = new StaticArray<i32>(n);
  lp.loraSent = new StaticArray<i32>(n);
  lp.maxLoras = new StaticArray<i32>(n);
  lp.esMs = new StaticArray<f64>(n);
  lp.restMs = new StaticArray<f64>(n);
  lp.inv = new StaticArray<f64>(n);
  const byAddr = new Map<string, InstanceLlm>();
  for (let k = 0; k < llm.length; k++) if (llm[k].service == service) byAddr.set(llm[k].addr, llm[k]);
  const rec = new Array<InstanceLlm | null>(n);
  for (let i = 0; i < n; i++) {
    const w = weight[i];
    lp.inv[i] = w > 0 ? 1.0 / w : Infinity;
    lp.esMs[i] = esMs[i];
    lp.restMs[i] = plan.baseWaitMs[i] - esMs[i];
    lp.prefillMs[i] = NaN; lp.decodeMs[i] = NaN; lp.decodeIdle[i] = NaN; lp.decodePerSeq[i] = NaN; lp.kv[i] = NaN; lp.kvSeqs[i] = NaN; lp.loraRoom[i] = -1; lp.maxLoras[i] = -1;
    const a = plan.addr[i];
    const r: InstanceLlm | null = byAddr.has(a) ? byAddr.get(a) : null;
    rec[i] = r;
    if (r == null) continue;
    lp.hasData = true;
    lp.prefillMs[i] = positiveOrNaN(<f64>r.prefillMsPerToken);
    lp.decodeMs[i] = positiveOrNaN(<f64>r.decodeMsPerToken);
    const idle = <f64>r.decodeIdleMs, per = <f64>r.decodeMsPerSeq;
    if (idle >= 0 && idle < Infinity && per >= 0 && per < Infinity && lp.decodeMs[i] == lp.decodeMs[i]) { lp.decodeIdle[i] = idle; lp.decodePerSeq[i] = per; }
    const kv = <f64>r.kvCacheUsage;
    lp.kv[i] = kv >= 0 && kv <= 1 ? kv : NaN;
    const q = <f64>r.kvSeqs;
    lp.kvSeqs[i] = q >= 1 && q <= 65535 ? q : NaN;
    const m = min(r.models.length, r.modelFlags.length);
    let loaded = 0;
    for (let k = 0; k < m; k++) {
      if ((r.modelFlags[k] & MODEL_LOADED) != 0) loaded++;
      if (!lp.modelIndex.has(r.models[k])) { lp.modelIndex.set(r.models[k], lp.isBase.length); lp.isBase.push(false); lp.names.push(r.models[k]); }
      if ((r.modelFlags[k] & MODEL_BASE) != 0) lp.isBase[lp.modelIndex.get(r.models[k])] = true;
    }
    lp.loraRoom[i] = r.maxLoras > 0 ? max(0, <i32>r.maxLoras - loaded) : -1;
    lp.maxLoras[i] = r.maxLoras > 0 ? <i32>r.maxLoras : -1;
  }
  const cols = lp.isBase.length;
  lp.hashes = new StaticArray<u32>(cols);
  for (let c = 0; c < cols; c++) lp.hashes[c] = modelHash(lp.names[c]);
  lp.flags = new StaticArray<u8>(cols * n);
  for (let i = 0; i < n; i++) {
    const r = rec[i];
    if (r == null) continue;
    const m = min(r.models.length, r.modelFlags.length);
    for (let k = 0; k < m; k++) {
      const col = lp.modelIndex.get(r.models[k]);
      // LISTED marks every model the instance names, flags 0 included (an adapter it can load)
      lp.flags[col * n + i] |= (r.modelFlags[k] & (MODEL_BASE | MODEL_LOADED | MODEL_WAITING)) | MODEL_LISTED;
    }
  }
  // one engine model per pool (docs/inference-llm.md, "One price in ms"): every candidate is priced
  // with the pool's median of the measured per-token terms and decode lines
  lp.prefillOwn = new StaticArray<f64>(n);
  for (let i = 0; i < n; i++) lp.prefillOwn[i] = lp.prefillMs[i];
  ownByPool(lp);
  lp.prefillFilled = poolTerms(lp.prefillMs);
  lp.decodeFilled = poolTerms(lp.decodeMs);
  poolDecodeLines(lp);
  lp.poolOf = new Array<string>(cols);
  for (let c = 0; c < cols; c++) lp.poolOf[c] = poolName(lp, c);
  lp.snapFlags = new StaticArray<u8>(lp.flags.length);
  memory.copy(changetype<usize>(lp.snapFlags), changetype<usize>(lp.flags), <usize>lp.flags.length);
  return lp;
}

/** Column c's pool: its own name for a base model, else the base model of the first candidate listing it (its own name when none has one). */
function poolName(lp: LlmPlan, c: i32): string {
  if (lp.isBase[c]) return lp.names[c];
  const n = lp.n, cols = lp.names.length;
  for (let i = 0; i < n; i++) {
    if ((lp.flags[c * n + i] & MODEL_LISTED) == 0) continue;
    for (let b = 0; b < cols; b++) if ((lp.flags[b * n + i] & MODEL_BASE) != 0) return lp.names[b];
  }
  return lp.names[c];
}

/** FNV-1a over the name's UTF-16 code units: the model names are the snapshot's, the same in every VM. */
export function modelHash(name: string): u32 {
  let h: u32 = 0x811c9dc5;
  for (let i = 0; i < name.length; i++) {
    h ^= <u32>name.charCodeAt(i);
    h *= 0x01000193;
  }
  return h;
}

/**
 * One value of a per-token term for every candidate: the median of the measured ones (NaN entries
 * unknown; none measured: left NaN, the term then left out for every candidate). Returns how many
 * entries were unknown (0 when none is known).
 *
 * Why not each instance's own: on identical workers (issue 20's matrix, 8 × the same engine) the
 * agent's per-instance estimates differ by the interference each instance happened to see in its
 * window — prefill 0.12–0.29 ms per token, decode lines from (29.8 ms, 0 per sequence) to
 * (0 ms, 5.1 per sequence) — and those differences, priced × 2,271 prompt or × 256 output tokens,
 * were seconds: every request went to the instance with the flattest line or the luckiest prefill
 * window (no-shared-prefix TTFT P99 2.07 s against round robin's 0.33 s). The median is the
 * engine's value whatever a few instances measured; what differs between instances — their
 * queue, their pending prefill, their cached prefix, their health weight — is still priced.
 */
export function poolTerms(t: StaticArray<f64>): i32 {
  const m = medianKnown(t);
  if (m != m) return 0;
  let missing = 0;
  for (let i = 0; i < t.length; i++) {
    if (unchecked(t[i]) != unchecked(t[i])) missing++;
    unchecked(t[i] = m);
  }
  return missing;
}

/** Median of the finite entries (NaN: none). Bounded by the candidates (a copy, insertion sort). */
export function medianKnown(t: StaticArray<f64>): f64 {
  let k = 0;
  for (let i = 0; i < t.length; i++) if (unchecked(t[i]) == unchecked(t[i])) k++;
  if (k == 0) return NaN;
  const v = new StaticArray<f64>(k);
  let j = 0;
  for (let i = 0; i < t.length; i++) {
    const x = unchecked(t[i]);
    if (x != x) continue;
    let p = j++;
    while (p > 0 && unchecked(v[p - 1]) > x) { unchecked(v[p] = v[p - 1]); p--; }
    unchecked(v[p] = x);
  }
  return (k & 1) != 0 ? unchecked(v[k >> 1]) : 0.5 * (unchecked(v[(k >> 1) - 1]) + unchecked(v[k >> 1]));
}

/** Hampel's outlier bound: an estimate is told apart from the others' beyond 3 median absolute deviations (about 2 standard deviations of normal noise). */
export const OUTLIER_MADS: f64 = 3;

/**
 * Each instance's own per-token rate, kept only where it stands out of the instances' spread: the
 * median m of the known ones plus the part of each one's difference from m beyond OUTLIER_MADS
 * median absolute deviations (m itself where it is within). On identical workers the estimates
 * differ by the interference each window saw (0.12-0.29 ms/token, poolTerms): that spread is the
 * estimate's own error, and a difference inside it is no measured speed. NaN entries stay NaN.
 */
export function ownBeyondSpread(t: StaticArray<f64>): void {
  const m = medianKnown(t);
  if (m != m) return;
  const dev = new StaticArray<f64>(t.length);
  for (let i = 0; i < t.length; i++) { const x = unchecked(t[i]); unchecked(dev[i] = x == x ? Math.abs(x - m) : NaN); }
  const bound = OUTLIER_MADS * medianKnown(dev);
  for (let i = 0; i < t.length; i++) {
    const x = unchecked(t[i]);
    if (x != x) continue;
    const over = Math.abs(x - m) - bound;
    unchecked(t[i] = over > 0 ? (x > m ? m + over : m - over) : m);
  }
}

/**
 * ownBeyondSpread within each base model's pool (the instances serving it as their base model;
 * an instance serving none is a pool of its own): a critical request's candidates are one pool
 * (the model filter), and a pool's own spread is what its rates are told apart by. Across pools
 * the engines differ (another model, another size), which says nothing of one pool's instances.
 */
function ownByPool(lp: LlmPlan): void {
  const n = lp.n, cols = lp.isBase.length;
  const key = new StaticArray<i32>(n);
  for (let i = 0; i < n; i++) {
    let k = -1 - i;
    for (let b = 0; b < cols; b++) if (lp.isBase[b] && (lp.flags[b * n + i] & MODEL_BASE) != 0) { k = b; break; }
    key[i] = k;
  }
  const done = new StaticArray<u8>(n);
  for (let i = 0; i < n; i++) {
    // an instance serving no base model is a pool of one: its own rate is its pool's median (and
    // skipping it keeps the pass O(n × pools), not O(n²) for a fleet without LLM data yet)
    if (done[i] != 0 || key[i] < 0) continue;
    let m = 0;
    for (let j = i; j < n; j++) if (key[j] == key[i]) m++;
    const sub = new StaticArray<f64>(m);
    let q = 0;
    for (let j = i; j < n; j++) if (key[j] == key[i]) sub[q++] = lp.prefillOwn[j];
    ownBeyondSpread(sub);
    q = 0;
    for (let j = i; j < n; j++) if (key[j] == key[i]) { lp.prefillOwn[j] = sub[q++]; done[j] = 1; }
  }
}

/** Least of the finite entries (NaN: none). */
export function leastKnown(t: StaticArray<f64>): f64 {
  let m: f64 = NaN;
  for (let i = 0; i < t.length; i++) { const x = unchecked(t[i]); if (x == x && !(x >= m)) m = x; }
  return m;
}

/**
 * The pool's decode line for every candidate: the median of the lines' intercepts and the least of
 * their slopes (no line anywhere: none, each candidate keeps the occupancy rule on the pool's time
 * per token). The least slope, not the median: the prefill chunks sharing the fitted intervals'
 * steps come with load, so they bias every slope up (docs/inference-llm.md, "What it folds in") —
 * on identical A100 workers (true slope 0.2 ms per sequence) the fits ranged 0–5.1 ms, and a
 * median slope of a few ms priced each request in flight at ~1 s of decode, which outweighed the
 * prefill queued ahead (Poisson 90 %: the warm-up's TTFT tail went to a worker prefilling 3–5).
 */
function poolDecodeLines(lp: LlmPlan): void {
  const idle = medianKnown(lp.decodeIdle), per = leastKnown(lp.decodePerSeq);
  if (idle != idle || per != per) return;
  for (let i = 0; i < lp.n; i++) { lp.decodeIdle[i] = idle; lp.decodePerSeq[i] = per; }
}

/** A per-token term as the contract bounds it (docs/contracts.md: 1e-6 .. 60000 ms), else NaN (unknown). */
function positiveOrNaN(x: f64): f64 { return x >= TERM_MIN_MS && x <= TERM_MAX_MS ? x : NaN; }
export const TERM_MIN_MS: f64 = 1e-6;
export const TERM_MAX_MS: f64 = 60000;

