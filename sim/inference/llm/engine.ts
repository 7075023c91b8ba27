// LLM serving engine as a deterministic step function over a virtual clock (milliseconds):
// token-level chunked prefill and decode, continuous batching under a per-step token budget
// (vLLM's max_num_batched_tokens / max_num_seqs), a paged KV cache with block-level prefix reuse
// (chain-hashed full blocks, LRU eviction of unreferenced cached blocks, as vLLM's automatic
// prefix caching does; a full block is findable from the step that schedules it, so a twin
// scheduled later in the same step reuses it, as vLLM V1 caches full blocks at allocation),
// recompute-preemption when the cache runs out, and LoRA adapters with a
// load time and a cap on adapters resident at once (max_loras).
//
// Nothing here reads a clock or sleeps: the HTTP wrapper (llm-server.ts) drives it in real time,
// runVirtual() (virtual.ts) in virtual time. The same inputs give the same outputs.
import { CumHistogram } from '../queue';
import { blockHashes } from './tokens';

export interface LlmEngineConfig {
  /** tokens per KV block (vLLM default 16) */
  blockSize: number;
  /** KV cache size in blocks */
  numBlocks: number;
  /** token budget of one step (prefill chunk tokens + one per decoding sequence) */
  maxNumBatchedTokens: number;
  /** sequences running at once */
  maxNumSeqs: number;
  /** automatic prefix caching on (vLLM V1 default) */
  enablePrefixCaching: boolean;
  /** fixed cost of one engine step (ms) */
  stepBaseMs: number;
  /** cost per prefill token computed in a step (ms) */
  prefillMsPerToken: number;
  /** cost per decoding sequence in a step (ms): decode time per token grows with the batch */
  decodeMsPerSeq: number;
  /** base models served; the first is the default */
  models: string[];
  /** LoRA adapters that can be loaded: name -> base model */
  adapters: Record<string, string>;
  /** adapters resident at once (vLLM --max-loras) */
  maxLoras: number;
  /** time to load an adapter into a slot; added to the step that loads it (ms) */
  loraLoadMs: number;
  /**
   * vLLM --scheduling-policy: 'fcfs' (default) or 'priority' — waiting requests ordered by the
   * request's `priority` (lower first), then arrival; under KV pressure the running request with
   * the highest (priority, arrival) is preempted instead of the newest (vllm/v1/core/sched/scheduler.py)
   */
  schedulingPolicy: 'fcfs' | 'priority';
}

export const DEFAULT_LLM_CONFIG: LlmEngineConfig = {
  blockSize: 16,
  numBlocks: 4096,
  maxNumBatchedTokens: 2048,
  maxNumSeqs: 64,
  enablePrefixCaching: true,
  stepBaseMs: 6,
  prefillMsPerToken: 0.08,
  decodeMsPerSeq: 0.25,
  models: ['sim-llm'],
  adapters: {},
  maxLoras: 2,
  loraLoadMs: 40,
  schedulingPolicy: 'fcfs',
};

export interface LlmRequestSpec {
  id?: string;
  /** base model or adapter name */
  model: string;
  promptTokens: number[];
  maxTokens: number;
  /** the request's `priority` (vLLM: an integer, lower is served first; default 0); used only by the priority policy */
  priority?: number;
}

export type LlmPhase = 'waiting' | 'running' | 'finished' | 'aborted';

export interface LlmRequest {
  id: string;
  model: string;
  baseModel: string;
  /** adapter name, or '' for the base model */
  adapter: string;
  promptTokens: number[];
  maxTokens: number;
  arrivalMs: number;
  priority: number;
  phase: LlmPhase;
  /** tokens to prefill: the prompt, plus the tokens generated before a preemption */
  target: number[];
  /** target tokens whose KV is present (cached + computed) */
  computed: number;
  /** tokens with KV (prefilled + decoded since the last admission) */
  kvLen: number;
  /** prompt tokens found in the prefix cache at the last admission */
  cachedTokens: number;
  generated: number;
  /** KV blocks held, in sequence order */
  blocks: number[];
  firstScheduledMs?: number;
  firstTokenMs?: number;
  lastTokenMs?: number;
  finishedMs?: number;
  preemptions: number;
  /** chain hashes of the prompt's full blocks (memo) */
  hashes?: string[];
}

export interface StepResult {
  startMs: number;
  endMs: number;
  prefillTokens: number;
  decodeSeqs: number;
  /** adapters loaded by this step */
  loadedAdapters: string[];
  /** requests that produced their first token at endMs */
  firstTokens: LlmRequest[];
  /** requests that produced a (non-first) token at endMs */
  tokens: LlmRequest[];
  finished: LlmRequest[];
  preempted: LlmRequest[];
}

interface Block {
  id: number;
  /** chain hash when the block is full and registered in the prefix cache */
  hash: string | null;
  ref: number;
}

/** vLLM's TTFT buckets (seconds), vllm/v1/metrics/loggers.py */
export const TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0];
/** vLLM's time-per-output-token / inter-token-latency buckets (seconds) */
export const TPOT_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0];
/** e2e / queue / inference-time buckets with sub-second resolution (see queue.ts) */
export const E2E_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0];

export class LlmEngineStats {
  /** whole prompts (cached tokens included) counted at their first token, as vLLM's prompt_tokens_total */
  promptTokens = 0;
  generationTokens = 0;
  /** prompt tokens looked up in the prefix cache / found there (vLLM counts tokens) */
  prefixQueries = 0;
  prefixHits = 0;
  preemptions = 0;
  evictedBlocks = 0;
  adapterLoads = 0;
  finished = 0;
  aborted = 0;
  steps = 0;
  busyMs = 0;
  readonly ttft = new CumHistogram(TTFT_BUCKETS);
  readonly tpot = new CumHistogram(TPOT_BUCKETS);
  readonly itl = new CumHistogram(TPOT_BUCKETS);
  readonly e2e = new CumHistogram(E2E_BUCKETS);
  readonly queueTime = new CumHistogram(E2E_BUCKETS);
  readonly inferenceTime = new CumHistogram(E2E_BUCKETS);
}

export class LlmEngine {
  readonly cfg: LlmEngineConfig;
  clockMs = 0;
  readonly stats = new LlmEngineStats();
  readonly waiting: LlmRequest[] = [];
  readonly running: LlmRequest[] = [];
  private readonly blocks: Block[] = [];
  /** unreferenced blocks holding no prefix: reused first */
  private readonly freePlain: Block[] = [];
  /** unreferenced blocks holding a prefix, least recently freed first (Map keeps insertion
   *  order): evicted in that order when the plain ones run out */
  private readonly freeCached = new Map<number, Block>();
  private readonly byHash = new Map<string, Block>();
  /** resident adapters, least recently used first */
  private readonly loras = new Map<string, true>();
  private nextId = 1;

  constructor(cfg: Partial<LlmEngineConfig> = {}) {
    this.cfg = { ...DEFAULT_LLM_CONFIG, ...cfg };
    const c = this.cfg;
    for (const [k, v] of Object.entries({ blockSize: c.blockSize, numBlocks: c.numBlocks, maxNumBatchedTokens: c.maxNumBatchedTokens, maxNumSeqs: c.maxNumSeqs, maxLoras: c.maxLoras })) {
      if (!(Number.isInteger(v) && v >= 1)) throw new RangeError(`${k} must be an integer >= 1 (got ${v})`);
    }
    for (const [k, v] of Object.entries({ stepBaseMs: c.stepBaseMs, prefillMsPerToken: c.prefillMsPerToken, decodeMsPerSeq: c.decodeMsPerSeq, loraLoadMs: c.loraLoadMs })) {
      if (!(Number.isFinite(v) && v >= 0)) throw new RangeError(`${k} must be a finite number >= 0 (got ${v})`);
    }
    if (c.schedulingPolicy !== 'fcfs' && c.schedulingPolicy !== 'priority') throw new RangeError(`schedulingPolicy must be 'fcfs' or 'priority' (got ${c.schedulingPolicy})`);
    if (c.models.length === 0) throw new RangeError('models: at least one base model');
    for (const [a, base] of Object.entries(c.adapters)) if (!c.models.includes(base)) throw new RangeError(`adapter ${a}: unknown base model ${base}`);
    for (let i = 0; i < c.numBlocks; i++) {
      const b: Block = { id: i, hash: null, ref: 0 };
      this.blocks.push(b);
      this.freePlain.push(b);
    }
  }

  /** Resolve a request's `model` to (base model, adapter); undefined when not served. */
  resolveModel(model: string): { baseModel: string; adapter: string } | undefined {
    if (this.cfg.models.includes(model)) return { baseModel: model, adapter: '' };
    const base = this.cfg.adapters[model];
    return base === undefined ? undefined : { baseModel: base, adapter: model };
  }

  loadedAdapters(): string[] {
    return [...this.loras.keys()];
  }

  /** KV-cache usage as vLLM reports it: blocks referenced by live requests / all blocks. */
  kvUsage(): number {
    return (this.cfg.numBlocks - this.freeCount()) / this.cfg.numBlocks;
  }

  freeCount(): number {
    return this.freePlain.length + this.freeCached.size;
  }

  /** Blocks holding a registered prefix (referenced or not). */
  cachedBlocks(): number {
    return this.byHash.size;
  }

  hasWork(): boolean {
    return this.waiting.length > 0 || this.running.length > 0;
  }

  /** A request arrives at `arrivalMs` (may lie before the clock: it arrived during a step). */
  submit(spec: LlmRequestSpec, arrivalMs = this.clockMs): LlmRequest {
    const m = this.resolveModel(spec.model);
    if (!m) throw new RangeError(`model ${JSON.stringify(spec.model)} is not served`);
    if (spec.promptTokens.length < 1) throw new RangeError('prompt: at least one token');
    if (!(Number.isInteger(spec.maxTokens) && spec.maxTokens >= 1)) throw new RangeError('max_tokens must be an integer >= 1');
    const need = Math.ceil((spec.promptTokens.length + spec.maxTokens) / this.cfg.blockSize);
    if (need > this.cfg.numBlocks) throw new RangeError(`prompt + max_tokens needs ${need} KV blocks, the cache has ${this.cfg.numBlocks}`);
    const priority = spec.priority ?? 0;
    if (!Number.isInteger(priority)) throw new RangeError(`priority must be an integer (got ${priority})`);
    const r: LlmRequest = {
      id: spec.id ?? `cmpl-${this.nextId++}`,
      model: spec.model,
      ...m,
      promptTokens: spec.promptTokens,
      target: spec.promptTokens,
      kvLen: 0,
      maxTokens: spec.maxTokens,
      arrivalMs,
      priority,
      phase: 'waiting',
      computed: 0,
      cachedTokens: 0,
      generated: 0,
      blocks: [],
      preemptions: 0,
    };
    if (this.cfg.schedulingPolicy === 'priority') this.enqueueByPriority(r);
    else this.waiting.push(r);
    return r;
  }

  /** Priority policy: after every waiting request with a lower or equal (priority, arrival). */
  private enqueueByPriority(r: LlmRequest): void {
    let k = this.waiting.length;
    while (k > 0 && before(r, this.waiting[k - 1])) k--;
    this.waiting.splice(k, 0, r);
  }

  /** Drop a request (client went away): frees its blocks. */
  abort(r: LlmRequest): boolean {
    if (r.phase === 'waiting') this.waiting.splice(this.waiting.indexOf(r), 1);
    else if (r.phase === 'running') this.running.splice(this.running.indexOf(r), 1);
    else return false;
    this.release(r);
    r.phase = 'aborted';
    this.stats.aborted++;
    return true;
  }

  /** Idle until `t` (no work is pending or the caller is waiting for an arrival). */
  idleUntil(t: number): void {
    if (t > this.clockMs) this.clockMs = t;
  }

  /**
   * One engine step at the current clock: schedule (running requests first, then waiting ones in
   * FIFO order) within the token budget, compute, advance the clock by the step's duration and
   * report what happened at its end. Returns null when there is nothing to do.
   */
  step(): StepResult | null {
    if (!this.hasWork()) return null;
    const c = this.cfg;
    const start = this.clockMs;
    let budget = c.maxNumBatchedTokens;
    const res: StepResult = { startMs: start, endMs: start, prefillTokens: 0, decodeSeqs: 0, loadedAdapters: [], firstTokens: [], tokens: [], finished: [], preempted: [] };
    const plan: Array<{ r: LlmRequest; prefill: number }> = [];

    // 1. running requests: one token each when decoding, a prefill chunk otherwise
    for (let i = 0; i < this.running.length && budget > 0; i++) {
      const r = this.running[i];
      const remaining = r.target.length - r.computed;
      const n = remaining > 0 ? Math.min(remaining, budget) : 1;
      // the KV slots for the tokens of this step; preempt the newest running request if short
      if (!this.grow(r, r.kvLen + n, res)) {
        if (r.phase !== 'running') i--; // r itself was preempted
        continue;
      }
      plan.push({ r, prefill: remaining > 0 ? n : 0 });
      if (remaining > 0) this.registerFullBlocks(r, r.computed + n);
      budget -= n;
    }
    // 2. waiting requests, FIFO, while sequences, budget, KV blocks and LoRA slots allow
    //    (none after a preemption in this step, as vLLM; a request whose adapter cannot get a
    //    slot is skipped, not blocking the ones behind it)
    let w = 0;
    while (res.preempted.length === 0 && w < this.waiting.length && budget > 0 && this.running.length < c.maxNumSeqs) {
      const r = this.waiting[w];
      if (r.adapter && !this.loras.has(r.adapter)) {
        if (!this.loadAdapter(r.adapter, plan)) {
          w++;
          continue;
        }
        res.loadedAdapters.push(r.adapter);
      }
      const hit = this.lookupPrefix(r);
      const n = Math.min(r.target.length - hit.tokens, budget);
      const needBlocks = Math.ceil((hit.tokens + n) / c.blockSize) - hit.blocks.length;
      if (this.freeAfterPinning(hit.blocks) < needBlocks) break;
      this.waiting.splice(w, 1);
      for (const b of hit.blocks) this.ref(b);
      r.blocks = hit.blocks.map((b) => b.id);
      r.computed = hit.tokens;
      r.kvLen = hit.tokens;
      r.cachedTokens = hit.tokens;
      this.stats.prefixQueries += r.target.length;
      this.stats.prefixHits += hit.tokens;
      this.allocate(r, hit.tokens + n);
      // as vLLM V1 (docs/design/prefix_caching.md, "Block Allocation": a newly allocated block
      // already full of tokens is added to the cache at once, "so that the block can be reused by
      // other requests in the same batch"): the full blocks this step computes are findable by the
      // requests scheduled after it in the same step
      this.registerFullBlocks(r, hit.tokens + n);
      r.phase = 'running';
      r.firstScheduledMs ??= start;
      if (r.adapter) this.touchAdapter(r.adapter);
      this.running.push(r);
      plan.push({ r, prefill: n });
      budget -= n;
    }
    if (plan.length === 0 && res.loadedAdapters.length === 0 && res.preempted.length === 0) {
      // nothing schedulable yet (e.g. all LoRA slots pinned by running requests): wait a base step
      this.clockMs = start + Math.max(c.stepBaseMs, 0.001);
      res.endMs = this.clockMs;
      return res;
    }

    for (const p of plan) {
      if (p.prefill > 0) res.prefillTokens += p.prefill;
      else res.decodeSeqs++;
    }
    const dur = c.stepBaseMs + c.prefillMsPerToken * res.prefillTokens + c.decodeMsPerSeq * res.decodeSeqs + c.loraLoadMs * res.loadedAdapters.length;
    const end = start + dur;
    this.clockMs = end;
    res.endMs = end;
    this.stats.steps++;
    this.stats.busyMs += dur;

    for (const { r, prefill } of plan) {
      if (r.phase !== 'running') continue;
      if (prefill > 0) {
        r.computed += prefill;
        r.kvLen += prefill;
        if (r.computed < r.target.length) continue; // more prefill chunks to come
      } else r.kvLen++;
      // a token is produced: the first one when the prompt has just been completed
      r.generated++;
      this.stats.generationTokens++;
      if (r.firstTokenMs === undefined) {
        r.firstTokenMs = end;
        // as vLLM: the whole prompt (cached tokens included), once, at the first token
        this.stats.promptTokens += r.promptTokens.length;
        this.stats.ttft.observe((end - r.arrivalMs) / 1000);
        res.firstTokens.push(r);
      } else {
        this.stats.itl.observe((end - (r.lastTokenMs as number)) / 1000);
        res.tokens.push(r);
      }
      r.lastTokenMs = end;
      if (r.generated >= r.maxTokens) this.finish(r, end, res);
    }
    if (res.finished.length) {
      const done = new Set(res.finished);
      for (let i = this.running.length - 1; i >= 0; i--) if (done.has(this.running[i])) this.running.splice(i, 1);
    }
    return res;
  }

  private finish(r: LlmRequest, end: number, res: StepResult): void {
    r.phase = 'finished';
    r.finishedMs = end;
    this.release(r);
    this.stats.finished++;
    const s = this.stats;
    s.e2e.observe((end - r.arrivalMs) / 1000);
    s.queueTime.observe(((r.firstScheduledMs as number) - r.arrivalMs) / 1000);
    s.inferenceTime.observe((end - (r.firstScheduledMs as number)) / 1000);
    if (r.generated > 1) s.tpot.observe((end - (r.firstTokenMs as number)) / 1000 / (r.generated - 1));
    res.finished.push(r);
  }

  /** Longest run of the prompt's full blocks present in the cache (never the whole prompt:
   *  the last token is always computed so that the step yields logits, as vLLM does). */
  private lookupPrefix(r: LlmRequest): { tokens: number; blocks: Block[] } {
    const out: Block[] = [];
    if (!this.cfg.enablePrefixCaching) return { tokens: 0, blocks: out };
    const maxBlocks = Math.floor((r.target.length - 1) / this.cfg.blockSize);
    const hashes = this.hashesOf(r);
    for (let i = 0; i < maxBlocks; i++) {
      const b = this.byHash.get(hashes[i]);
      if (!b) break;
      out.push(b);
    }
    return { tokens: out.length * this.cfg.blockSize, blocks: out };
  }

  private freeAfterPinning(pinned: Block[]): number {
    let n = this.freeCount();
    for (const b of pinned) if (b.ref === 0) n--;
    return n;
  }

  private ref(b: Block): void {
    if (b.ref === 0) this.freeCached.delete(b.id);
    b.ref++;
  }

  /** Take the least recently freed block; a cached one loses its prefix (eviction). */
  private takeFree(): Block | undefined {
    let b = this.freePlain.pop();
    if (!b) {
      const it = this.freeCached.values().next();
      if (it.done) return undefined;
      b = it.value;
      this.freeCached.delete(b.id);
    }
    if (b.hash !== null) {
      this.byHash.delete(b.hash);
      b.hash = null;
      this.stats.evictedBlocks++;
    }
    b.ref = 1;
    return b;
  }

  /** Give r blocks for `tokens` tokens of KV; false when the cache has too few free blocks. */
  private allocate(r: LlmRequest, tokens: number): boolean {
    const need = Math.ceil(tokens / this.cfg.blockSize) - r.blocks.length;
    if (need > this.freeCount()) return false;
    for (let i = 0; i < need; i++) r.blocks.push((this.takeFree() as Block).id);
    return true;
  }

  /** Like allocate, but preempts the newest running requests (recompute) until it fits. */
  private grow(r: LlmRequest, tokens: number, res: StepResult): boolean {
    while (!this.allocate(r, tokens)) {
      let victim = this.running[this.running.length - 1];
      if (this.cfg.schedulingPolicy === 'priority') for (const x of this.running) if (before(victim, x)) victim = x;
      this.preempt(victim, res);
      if (victim === r) return false;
    }
    return true;
  }

  private preempt(r: LlmRequest, res: StepResult): void {
    this.running.splice(this.running.indexOf(r), 1);
    this.release(r);
    r.phase = 'waiting';
    // recompute mode: the prompt and the tokens generated so far are prefilled again
    r.target = r.promptTokens.concat(Array.from({ length: r.generated }, (_, i) => 0x40000000 + i));
    r.computed = 0;
    r.kvLen = 0;
    r.hashes = undefined;
    r.preemptions++;
    this.stats.preemptions++;
    if (this.cfg.schedulingPolicy === 'priority') this.enqueueByPriority(r);
    else this.waiting.unshift(r);
    res.preempted.push(r);
  }

  /** Release r's blocks: cached (hashed) ones stay findable until evicted. Newest tail first
   *  into the LRU so that a prefix's head outlives its tail (vLLM frees in reverse order). */
  private release(r: LlmRequest): void {
    for (let i = r.blocks.length - 1; i >= 0; i--) {
      const b = this.blocks[r.blocks[i]];
      b.ref--;
      if (b.ref === 0) {
        if (b.hash === null) this.freePlain.push(b);
        else this.freeCached.set(b.id, b);
      }
    }
    r.blocks = [];
  }

  /** Register r's full prompt blocks below `tokens` (those computed and those scheduled to be in
   *  this step, as vLLM V1's allocate_slots caches them) in the prefix cache. */
  private registerFullBlocks(r: LlmRequest, tokens: number): void {
    if (!this.cfg.enablePrefixCaching) return;
    const full = Math.floor(tokens / this.cfg.blockSize);
    const hashes = this.hashesOf(r);
    for (let i = 0; i < full; i++) {
      const b = this.blocks[r.blocks[i]];
      if (b.hash !== null) continue;
      if (this.byHash.has(hashes[i])) continue; // a twin computed concurrently keeps the entry
      b.hash = hashes[i];
      this.byHash.set(hashes[i], b);
    }
  }

  private hashesOf(r: LlmRequest): string[] {
    r.hashes ??= blockHashes(r.target, this.cfg.blockSize, r.adapter);
    return r.hashes;
  }

  private touchAdapter(a: string): void {
    this.loras.delete(a);
    this.loras.set(a, true);
  }

  /** Make room for adapter a (evicting the least recently used adapter no running or planned
   *  request uses); false when all slots are pinned. */
  private loadAdapter(a: string, plan: Array<{ r: LlmRequest }>): boolean {
    if (this.loras.size >= this.cfg.maxLoras) {
      const busy = new Set(this.running.map((r) => r.adapter).concat(plan.map((p) => p.r.adapter)));
      let victim: string | undefined;
      for (const k of this.loras.keys()) {
        if (!busy.has(k)) {
          victim = k;
          break;
        }
      }
      if (victim === undefined) return false;
      this.loras.delete(victim);
    }
    this.loras.set(a, true);
    this.stats.adapterLoads++;
    return true;
  }
}

/** (priority, arrival) of a is lower than b's: a is served first under the priority policy. */
function before(a: LlmRequest, b: LlmRequest): boolean {
  return a.priority < b.priority || (a.priority === b.priority && a.arrivalMs < b.arrivalMs);
}
