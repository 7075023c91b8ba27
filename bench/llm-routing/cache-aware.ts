// SGLang's router, `cache_aware` policy (sgl-router: src/policies/cache_aware.rs, the approximate
// tree in src/policies/tree.rs, defaults in py_src/sglang_router/router_args.py), implemented from
// its documented behaviour:
// - load per worker = requests the router has in flight to it (incremented when dispatched,
//   decremented when the response ends);
// - imbalanced when (max − min) > balance_abs_threshold AND max > balance_rel_threshold · min over
//   the workers' loads: then the least-loaded worker (first on a tie), and the request's text is
//   still inserted into that worker's tree;
// - else the approximate radix tree (raw characters, not tokens, one tree per model, every worker
//   a tenant): match rate = matched characters / request characters; above cache_threshold the
//   worker holding the longest match, else the worker whose tree holds the fewest characters
//   ("most available cache capacity"); the text is inserted for the chosen worker;
// - eviction every eviction_interval_secs: each tenant whose characters exceed max_tree_size loses
//   its least recently used leaves until it fits.
// Defaults (router_args.py, what `python -m sglang_router.launch_router` runs with):
// cache_threshold 0.3, balance_abs_threshold 64, balance_rel_threshold 1.5,
// eviction_interval_secs 120, max_tree_size 2^26.
import type { PolicyCtx, RouteRequest, RoutingPolicy } from './fleet';

export interface CacheAwareConfig {
  cacheThreshold: number;
  balanceAbsThreshold: number;
  balanceRelThreshold: number;
  evictionIntervalMs: number;
  maxTreeSize: number;
}

export const SGLANG_CACHE_AWARE_DEFAULTS: CacheAwareConfig = {
  cacheThreshold: 0.3, balanceAbsThreshold: 64, balanceRelThreshold: 1.5, evictionIntervalMs: 120_000, maxTreeSize: 2 ** 26,
};

interface Node {
  /** edge label from the parent */
  text: string;
  children: Map<string, Node>;
  parent: Node | null;
  /** tenant -> last access (virtual ms) */
  tenants: Map<number, number>;
}

/** The approximate multi-tenant radix tree over characters. */
export class ApproxTree {
  readonly root: Node = { text: '', children: new Map(), parent: null, tenants: new Map() };
  /** characters per tenant */
  readonly chars = new Map<number, number>();

  addTenant(t: number): void {
    if (!this.chars.has(t)) this.chars.set(t, 0);
    this.root.tenants.set(t, 0);
  }

  /** Longest match of `text`: matched characters and the tenant holding the deepest matched node
   *  (the most recently used of its tenants). */
  prefixMatch(text: string): { matched: number; tenant: number } {
    let node = this.root;
    let i = 0;
    let deepest = this.root;
    while (i < text.length) {
      const child = node.children.get(text[i]);
      if (!child) break;
      let k = 0;
      const lim = Math.min(child.text.length, text.length - i);
      while (k < lim && child.text.charCodeAt(k) === text.charCodeAt(i + k)) k++;
      i += k;
      deepest = child;
      if (k < child.text.length) break;
      node = child;
    }
    let tenant = -1;
    let last = -Infinity;
    for (const [t, at] of deepest.tenants) if (at > last) { last = at; tenant = t; }
    return { matched: deepest === this.root ? 0 : i, tenant };
  }

  insert(text: string, tenant: number, nowMs: number): void {
    this.addTenant(tenant);
    this.root.tenants.set(tenant, nowMs);
    let node = this.root;
    let i = 0;
    while (i < text.length) {
      let child = node.children.get(text[i]);
      if (!child) {
        child = { text: text.slice(i), children: new Map(), parent: node, tenants: new Map() };
        node.children.set(text[i], child);
      } else {
        let k = 0;
        const lim = Math.min(child.text.length, text.length - i);
        while (k < lim && child.text.charCodeAt(k) === text.charCodeAt(i + k)) k++;
        if (k < child.text.length) {
          // split: the child's first k characters become a new node holding its tenants
          const mid: Node = { text: child.text.slice(0, k), children: new Map(), parent: node, tenants: new Map(child.tenants) };
          child.text = child.text.slice(k);
          child.parent = mid;
          mid.children.set(child.text[0], child);
          node.children.set(mid.text[0], mid);
          child = mid;
        }
      }
      if (!child.tenants.has(tenant)) this.chars.set(tenant, (this.chars.get(tenant) ?? 0) + child.text.length);
      child.tenants.set(tenant, nowMs);
      i += child.text.length;
      node = child;
    }
  }

  /** The tenant with the fewest characters (the lowest index on a tie). */
  smallestTenant(among: number[]): number {
    let best = among[0];
    for (const t of among) if ((this.chars.get(t) ?? 0) < (this.chars.get(best) ?? 0)) best = t;
    return best;
  }

  /** Each tenant above `maxChars` loses its least recently used leaves until it fits. */
  evict(maxChars: number): void {
    for (const [t, c] of this.chars) {
      let over = c - maxChars;
      while (over > 0) {
        const leaf = this.lruLeaf(t);
        if (!leaf) break;
        leaf.tenants.delete(t);
        over -= leaf.text.length;
        this.chars.set(t, (this.chars.get(t) ?? 0) - leaf.text.length);
        if (leaf.tenants.size === 0 && leaf.parent) leaf.parent.children.delete(leaf.text[0]);
      }
    }
  }

  /** The least recently used node of tenant t with no child of t. */
  private lruLeaf(t: number): Node | undefined {
    let best: Node | undefined;
    let bestAt = Infinity;
    const walk = (n: Node): void => {
      let childOfT = false;
      for (const c of n.children.values()) if (c.tenants.has(t)) { childOfT = true; walk(c); }
      if (!childOfT && n !== this.root && n.tenants.has(t)) {
        const at = n.tenants.get(t) as number;
        if (at < bestAt) { bestAt = at; best = n; }
      }
    };
    walk(this.root);
    return best;
  }
}

export class SglangCacheAware implements RoutingPolicy {
  readonly name = 'sglang cache-aware';
  readonly scrapeMs = 0;
  private ctx!: PolicyCtx;
  private trees = new Map<string, ApproxTree>();
  load: number[] = [];
  private nextEviction: number;
  constructor(readonly cfg: CacheAwareConfig = SGLANG_CACHE_AWARE_DEFAULTS) {
    this.nextEviction = cfg.evictionIntervalMs;
  }
  init(ctx: PolicyCtx): void {
    this.ctx = ctx;
    this.load = new Array(ctx.instances.length).fill(0);
  }
  private tree(model: string, c: number[]): ApproxTree {
    let t = this.trees.get(model);
    if (!t) {
      t = new ApproxTree();
      for (const i of c) t.addTenant(i);
      this.trees.set(model, t);
    }
    return t;
  }
  route(t: number, r: RouteRequest): number {
    while (t >= this.nextEviction) {
      for (const tr of this.trees.values()) tr.evict(this.cfg.maxTreeSize);
      this.nextEviction += this.cfg.evictionIntervalMs;
    }
    const c = this.ctx.candidates(r.model);
    const tree = this.tree(r.model, c);
    let max = -Infinity, min = Infinity, minIdx = c[0];
    for (const i of c) {
      if (this.load[i] > max) max = this.load[i];
      if (this.load[i] < min) { min = this.load[i]; minIdx = i; }
    }
    let pick: number;
    if (max - min > this.cfg.balanceAbsThreshold && max > min * this.cfg.balanceRelThreshold) pick = minIdx;
    else {
      const m = tree.prefixMatch(r.text);
      const rate = r.text.length ? m.matched / r.text.length : 0;
      pick = rate > this.cfg.cacheThreshold && m.tenant >= 0 ? m.tenant : tree.smallestTenant(c);
    }
    tree.insert(r.text, pick, t);
    this.load[pick]++;
    return pick;
  }
  onComplete(_t: number, i: number): void {
    this.load[i]--;
  }
}
