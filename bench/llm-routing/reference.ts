// Reference policies, as their owners define them. Each sees only the proxy's own counters, the
// request body and (where the owner scrapes) the per-instance vLLM metrics of its last scrape.
// RR and LEAST_REQUEST get the instances that serve the request's model (one Envoy cluster per
// model: a header route), as they cannot read the body.
import { mulberry32, type Rng } from '../../sim/inference/prng';
import type { PolicyCtx, RouteRequest, RoutingPolicy } from './fleet';
import { GIE_BLOCK_BYTES, GIE_MAX_BLOCKS, GieIndexer, hashPromptBlocks } from './prefix';
import type { Scraped } from './scrape';

/** Envoy ROUND_ROBIN (equal weights) over the model's cluster. */
export class RoundRobin implements RoutingPolicy {
  readonly name = 'round-robin';
  readonly scrapeMs = 0;
  private ctx!: PolicyCtx;
  private next = new Map<string, number>();
  init(ctx: PolicyCtx): void {
    this.ctx = ctx;
  }
  route(_t: number, r: RouteRequest): number {
    const c = this.ctx.candidates(r.model);
    const k = this.next.get(r.model) ?? 0;
    this.next.set(r.model, k + 1);
    return c[k % c.length];
  }
}

/**
 * Envoy LEAST_REQUEST with equal weights (`unweightedHostPick`): `choice_count` (default 2) hosts
 * drawn uniformly with replacement; a drawn host replaces the current candidate only when it has
 * strictly fewer active requests (ties keep the first drawn). Active requests = this proxy's
 * requests in flight to the host (rq_active).
 */
export class LeastRequest implements RoutingPolicy {
  readonly name = 'least-request';
  readonly scrapeMs = 0;
  private ctx!: PolicyCtx;
  private rng!: Rng;
  active: number[] = [];
  constructor(readonly choiceCount = 2) {}
  init(ctx: PolicyCtx): void {
    this.ctx = ctx;
    this.rng = mulberry32(ctx.seed ^ 0x1ea57);
    this.active = new Array(ctx.instances.length).fill(0);
  }
  route(_t: number, r: RouteRequest): number {
    const c = this.ctx.candidates(r.model);
    let best = -1;
    for (let k = 0; k < this.choiceCount; k++) {
      const h = c[Math.floor(this.rng() * c.length)];
      if (best < 0 || this.active[h] < this.active[best]) best = h;
    }
    this.active[best]++;
    return best;
  }
  onComplete(_t: number, i: number): void {
    this.active[i]--;
  }
}

/** Weights of the Inference Extension's default scheduling profile (config/charts/inferencepool/
 *  templates/epp-config.yaml: queue-scorer 2, kv-cache-utilization-scorer 2, prefix-cache-scorer 3). */
export const GIE_DEFAULT_WEIGHTS = { queue: 2, kvCacheUtilization: 2, prefixCache: 3 } as const;
/** Saturation detector defaults (pkg/epp/common/config: DefaultQueueThresholdCritical 5,
 *  DefaultKVCacheThreshold 0.8) and the EPP's metrics refresh (--refresh-metrics-interval 50ms). */
export const GIE_SATURATION = { queueDepthThreshold: 5, kvCacheUtilThreshold: 0.8 } as const;
export const GIE_REFRESH_METRICS_MS = 50;

export interface GieWeights {
  queue: number;
  kvCacheUtilization: number;
  prefixCache: number;
}

/**
 * The Inference Extension's endpoint picker with its default plugin set:
 * - queue-scorer: (max − q) / (max − min) over the candidates' vllm:num_requests_waiting, 1 when
 *   all equal;
 * - kv-cache-utilization-scorer: 1 − vllm:kv_cache_usage_perc;
 * - prefix-cache-scorer: matched / total blocks, hashes = [hash(model), block 1..n] of 64-byte
 *   blocks (≤ 256), longest leading match in a per-server LRU index (31 250 entries per server),
 *   the chosen server recorded in PreRequest;
 * - weighted sum, max-score-picker (random tie-break);
 * - admission: a sheddable request (priority < 0) gets 429 when the saturation detector says the
 *   pool is saturated — no candidate has waiting ≤ 5 and KV usage ≤ 0.8; other requests always pass.
 * With `weights` = prefix only (and scrapeMs 0) this is the prefix-only affinity router.
 */
export class GieScheduler implements RoutingPolicy {
  readonly name: string;
  readonly scrapeMs: number;
  private ctx!: PolicyCtx;
  private rng!: Rng;
  private m: Array<Scraped | undefined> = [];
  readonly indexer = new GieIndexer();
  shed = 0;
  constructor(
    readonly weights: GieWeights = GIE_DEFAULT_WEIGHTS,
    opts: { name?: string; scrapeMs?: number; admission?: boolean; modelBlock?: boolean } = {},
  ) {
    this.name = opts.name ?? 'gie-default';
    this.scrapeMs = opts.scrapeMs ?? GIE_REFRESH_METRICS_MS;
    this.admission = opts.admission ?? true;
    this.modelBlock = opts.modelBlock ?? true;
  }
  private readonly admission: boolean;
  private readonly modelBlock: boolean;
  init(ctx: PolicyCtx): void {
    this.ctx = ctx;
    this.rng = mulberry32(ctx.seed ^ 0x61e);
    this.m = new Array(ctx.instances.length).fill(undefined);
  }
  onScrape(_t: number, i: number, m: Scraped): void {
    this.m[i] = m;
  }
  /** GIE hashPrompt: block 0 is the model's hash, then the prompt's 64-byte blocks. */
  hashes(r: RouteRequest): string[] {
    if (r.text.length < GIE_BLOCK_BYTES) return [];
    const blocks = hashPromptBlocks(r.model, r.text, GIE_BLOCK_BYTES, GIE_MAX_BLOCKS);
    return this.modelBlock ? ['model:' + r.model, ...blocks] : blocks;
  }
  saturated(c: number[]): boolean {
    for (const i of c) {
      const m = this.m[i];
      if (!m) continue;
      if (m.numRequestsWaiting <= GIE_SATURATION.queueDepthThreshold && m.kvCacheUsagePerc <= GIE_SATURATION.kvCacheUtilThreshold) return false;
    }
    return true;
  }
  scores(c: number[], hashes: string[]): number[] {
    const w = this.weights;
    const q = c.map((i) => this.m[i]?.numRequestsWaiting ?? 0);
    const qMin = Math.min(...q);
    const qMax = Math.max(...q);
    const match = w.prefixCache ? this.indexer.matchLongestPrefix(hashes) : new Map<number, number>();
    const total = hashes.length;
    return c.map((i, k) => {
      const qs = qMax === qMin ? 1 : (qMax - q[k]) / (qMax - qMin);
      const kv = 1 - (this.m[i]?.kvCacheUsagePerc ?? 0);
      const p = total === 0 ? 0 : (match.get(i) ?? 0) / total;
      return w.queue * qs + w.kvCacheUtilization * kv + w.prefixCache * p;
    });
  }
  route(_t: number, r: RouteRequest): number {
    const c = this.ctx.candidates(r.model);
    if (this.admission && r.criticality === 'sheddable' && this.saturated(c)) {
      this.shed++;
      return -1;
    }
    const hashes = this.hashes(r);
    const s = this.scores(c, hashes);
    // max-score-picker: shuffle, stable sort by score: uniform among the best
    let best = -Infinity;
    let pick = -1;
    let ties = 0;
    for (let k = 0; k < c.length; k++) {
      if (s[k] > best) {
        best = s[k];
        pick = c[k];
        ties = 1;
      } else if (s[k] === best && this.rng() * ++ties < 1) pick = c[k];
    }
    if (this.weights.prefixCache && hashes.length) this.indexer.add(hashes, pick);
    return pick;
  }
}

/**
 * Prefix-only affinity: the prefix-cache-scorer alone with the max-score-picker (no metrics), the
 * longest leading match over the prompt's own blocks; no match: a random instance. GIE's scorer
 * also counts its block 0 = hash(model), which every instance that ever served the model matches:
 * alone (no load scorer to break the tie), that sends every request to the first instance that
 * served the model, so this router leaves block 0 out.
 */
export function prefixOnly(): GieScheduler {
  return new GieScheduler({ queue: 0, kvCacheUtilization: 0, prefixCache: 1 }, { name: 'prefix-only', scrapeMs: 0, admission: false, modelBlock: false });
}
