// How many sequences an LLM instance's KV cache holds, learned from its own gauges: running
// sequences ÷ KV-cache usage, smoothed over scrapes. With continuous batching the KV cache, not
// the sequence cap, is what makes a vLLM instance queue (it admits a waiting request only when
// blocks free up), and the slot count the load estimator infers (the largest `running` seen while
// requests waited) is only a floor until the instance has queued. The filter sheds on the backlog
// as a share of this capacity (docs/architecture-choice.md, "Shedding"; docs/contracts.md, kvSeqs).
//
// Scrapes with usage under MIN_USAGE are skipped (a few sequences over a nearly empty cache say
// little: prefix blocks shared by several of them dominate), and so is a scrape without a running
// sequence. Cached blocks held by no request count as free in vLLM V1's usage, so sequences
// sharing a prefix count once per block, as the cache holds them.
export const MIN_USAGE = 0.1;
/** weight of the newest scrape (about the last ten scrapes count) */
export const ALPHA = 0.2;
/** published range; outside it (or before the first usable scrape) the value is NaN, unknown */
export const KV_SEQS_MAX = 65535;

export class KvCapacity {
  private v = NaN;

  /** One scrape: `running` sequences at `usage` (0..1) of the KV cache. Returns the estimate. */
  observe(running: number | undefined, usage: number | undefined): number {
    if (running === undefined || usage === undefined) return this.v;
    if (!(Number.isFinite(running) && running >= 1 && Number.isFinite(usage) && usage >= MIN_USAGE && usage <= 1)) return this.v;
    const c = running / usage;
    this.v = Number.isNaN(this.v) ? c : (1 - ALPHA) * this.v + ALPHA * c;
    return this.v;
  }

  /** Sequences the KV cache holds; NaN while unknown. */
  value(): number {
    return this.v >= 1 && this.v <= KV_SEQS_MAX ? this.v : NaN;
  }
}
