// K-proxy mode of the published-workload matrix (issue 22 item 2): does the per-proxy state of the
// filter — the prefix index, the pending prefill per instance, the adapter streams — pay to share
// across proxies? K independent copies of the compiled filter (each its own embedded host, so its
// own prefix index, pending prefill and in-flight table, as the shipped filter keeps them per
// proxy), the arrivals split across them round robin (or seeded random, `--split random`), every
// copy fed the same scrapes of the same fleet by its own agent (the agent code is deterministic:
// the K agents publish the same snapshots, as K proxies polling one agent would read). Without
// `--mesh on` a proxy sees the other proxies' requests only through the next scrape's waiting +
// running (mesh in-flight off); with it, through the agent's mesh in-flight answers. K = 1 sees
// every request: the upper bound of what sharing all three states (and in-flight) could give.
//
// `--split prefix` (attribution): the arrivals split by a hash of the prompt's first bytes, so every
// request of one shared prefix reaches the same proxy — that proxy's prefix index holds everything
// a shared one would for that prefix, while the pending prefill and in-flight stay split. The
// gap K=1 → K/prefix is then the pending prefill's (and in-flight's) share; K/prefix → K/rr the
// prefix index's.
//
// `--split adapter` (attribution, proxies-lora.ts): every LoRA-adapter request to proxy 0, the rest
// round robin over all K — proxy 0 then sees every adapter stream and adapter send of the mesh (what
// sharing them across proxies could give the adapter requests), the in-flight and pending prefill
// still split.
//
// `--mesh off,on`: without and with mesh in-flight (the proxies' POST /v1/inflight answered by one
// agent's InflightAggregator, agent/src/mesh/inflight.ts, on the virtual clock); off (the default)
// the agent answers 404 as with `inflight.enabled: false`, which is what the matrix's filter row sees.
//
// `tsx bench/llm-routing/proxies.ts [--quick] [--proxies 1,4,16] [--split rr|random|prefix] [--mesh off,on]
//   [--seed N] [--seeds K] [--workloads p60,p90,mt,grouped,ev] [--refs] [--wasm path] [--out build/bench]`
// `--workloads ph,over1`: the project's own fleet with LoRA adapters instead (proxies-lora.ts): run.ts's
// prefix-heavy and 1× overload, the adapter requests' TTFT against the base model's per K.
// `--refs` adds SGLang's cache-aware router and llm-d's default (central pickers that see every
// request) on the same sample paths.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { runFleet, type PolicyCtx, type RouteRequest, type RoutingPolicy } from './fleet';
import { SwitchyardFilterPolicy } from './filter';
import type { ClusterRequest, ClusterResponse } from '../../host/src';
import { SglangCacheAware } from './cache-aware';
import { calibratedPeakPrefill, LlmdOptimizedBaseline } from './llmd';
import { mulberry32, type Rng } from '../../sim/inference/prng';
import { cellOf, type Cell, scenarios, WORKLOAD_TITLES, WORKLOADS } from './matrix';
import { A100_LLAMA8B, publishedFleet } from './published';
import { INFLIGHT_CONTENT_TYPE, InflightAggregator } from '../../agent/src/mesh/inflight';
import { INFLIGHT_DEFAULTS } from '../../agent/src/mesh/inflight-schema';
import { PrefixMesh } from './prefix-mesh';
import { PROJECT_WORKLOADS, projectScenario, projectTable, runProject, type ProjectCell } from './proxies-lora';
import { cli, flag, int, list, nums, optNum, str } from '../cli';

export type Split = 'rr' | 'random' | 'prefix' | 'adapter';

/** FNV-1a over the first `n` characters: the prefix-sticky split's key. */
function hashPrefix(s: string, n: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < Math.min(n, s.length); i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** K shipped-default filters behind a uniform (or prefix-sticky) split of the arrivals. */
export class ProxiesPolicy implements RoutingPolicy {
  readonly name: string;
  readonly scrapeMs: number;
  private readonly proxies: SwitchyardFilterPolicy[];
  private readonly of = new Map<number, number>();
  private next = 0;
  private last = 0;
  private rng!: Rng;
  private agg?: InflightAggregator;
  private ctx?: PolicyCtx;
  private aggNow = 0;
  private at = 0;

  /** `mesh`: the proxies report to one agent's POST /v1/inflight (the agent's own aggregator, its
   *  shipped bounds) as the shipped filter does every loadAware.meshReportMs (50 ms); off: the
   *  agent answers 404 (inflight.enabled: false) and each proxy prices its own in-flight only */
  /** `--share N` (measurement model, prefix-mesh.ts): the proxies' prefix-share records exchanged
   *  across proxies, at most N per proxy per report period; needs `mesh` (the proxies kept in step) */
  readonly share?: PrefixMesh;

  constructor(readonly k: number, readonly split: Split, wasmPath: string, readonly mesh = false, shareRecords = 0) {
    const inflight = mesh ? (req: ClusterRequest, nowMs: number): ClusterResponse => this.inflight(req, nowMs) : undefined;
    this.proxies = Array.from({ length: k }, () => new SwitchyardFilterPolicy({ wasmPath, agent: { scrapeIntervalMs: 1000 }, inflight }));
    this.scrapeMs = this.proxies[0].scrapeMs;
    if (shareRecords > 0 && k > 1) {
      if (!mesh) throw new Error('--share needs --mesh on (the proxies kept in step)');
      this.share = new PrefixMesh(this.proxies, shareRecords);
    }
    this.name = `switchyard K=${k}${k === 1 ? '' : ` (${split})`}${mesh ? ', mesh in-flight' : ''}${this.share ? `, prefix share ${shareRecords}` : ''}`;
  }

  private inflight(req: ClusterRequest, nowMs: number): ClusterResponse {
    if (req.method !== 'POST') return { status: 405, body: 'POST only\n' };
    // the proxies are kept within one tick of each other (step): the agent's clock is the latest
    this.aggNow = Math.max(this.aggNow, nowMs);
    const r = this.agg!.report(req.body);
    if (!r.ok) return { status: r.status, body: `${r.error}\n` };
    return { status: 200, headers: { 'content-type': INFLIGHT_CONTENT_TYPE }, body: r.answer };
  }

  /** every proxy's host moved to t in 20 ms steps (the filter's tick), so their reports reach the
   *  agent in time order to within a tick */
  private step(t: number): void {
    if (!this.mesh) return;
    for (let s = Math.min(t, this.at + 20); ; s = Math.min(t, s + 20)) {
      for (const p of this.proxies) p.advance(s);
      this.share?.at(s);
      if (s >= t) break;
    }
    this.at = Math.max(this.at, t);
  }

  init(ctx: PolicyCtx): void {
    this.rng = mulberry32(ctx.seed ^ 0x9e0c5);
    this.ctx = ctx;
    if (this.mesh) {
      const addrs = new Set(ctx.instances.map((_, i) => `10.0.${Math.floor(i / 250)}.${(i % 250) + 1}:8000`));
      this.agg = new InflightAggregator({ maxProxies: INFLIGHT_DEFAULTS.maxProxies, maxInstances: INFLIGHT_DEFAULTS.maxInstances, expireReports: INFLIGHT_DEFAULTS.expireReports, isInstance: (a) => addrs.has(a), now: () => this.aggNow });
    }
    // proxy 0 gets the context a single filter gets (K = 1 is the matrix's cell exactly); the
    // others a different seed for their degraded-mode LEAST_REQUEST draws
    this.proxies.forEach((p, j) => p.init(j === 0 ? ctx : { ...ctx, seed: ctx.seed + 7919 * j }));
  }

  onMetrics(t: number, i: number, text: string): void {
    this.step(t);
    for (const p of this.proxies) p.onMetrics(t, i, text);
  }

  private pick(r: RouteRequest): number {
    if (this.k === 1) return 0;
    if (this.split === 'random') return Math.floor(this.rng() * this.k);
    // 256 characters: inside every shared system prompt / session opening of the published sets
    if (this.split === 'prefix') return hashPrefix(r.text, 256) % this.k;
    // an adapter: served by candidates whose base models do not include it
    if (this.split === 'adapter' && !this.ctx!.instances[this.ctx!.candidates(r.model)[0]].cfg.models?.includes(r.model)) return 0;
    return this.next++ % this.k;
  }

  route(t: number, r: RouteRequest): number {
    this.step(t);
    const j = this.pick(r);
    this.of.set(r.idx, j);
    this.last = j;
    return this.proxies[j].route(t, r);
  }

  priorityOf(): number | undefined {
    return this.proxies[this.last].priorityOf();
  }

  onFirstToken(t: number, inst: number, r: RouteRequest): void {
    const j = this.of.get(r.idx);
    this.step(t);
    if (j !== undefined) this.proxies[j].onFirstToken(t, inst, r);
  }

  onComplete(t: number, inst: number, r: RouteRequest): void {
    const j = this.of.get(r.idx);
    this.step(t);
    if (j === undefined) return;
    this.of.delete(r.idx);
    this.proxies[j].onComplete(t, inst, r);
  }

  finish(t: number): void {
    this.step(t);
    for (const p of this.proxies) p.finish(t);
  }

  /** each proxy's counters (switchyard.request.* / switchyard.lb.*), after finish */
  perProxy(): Array<Record<string, number>> {
    return this.proxies.map((p) => p.stats.metrics);
  }

  /** proxies whose mesh in-flight report the agent holds (0 with mesh off) */
  meshProxies(): number {
    return this.agg?.proxyCount ?? 0;
  }

  /** the filters' counters summed over the proxies (switchyard.request.* / switchyard.lb.*) */
  metrics(): Record<string, number> {
    const m: Record<string, number> = {};
    for (const p of this.proxies) for (const [k, v] of Object.entries(p.stats.metrics)) m[k] = (m[k] ?? 0) + v;
    return m;
  }
}

function main(): void {
  const opt = cli('npx tsx bench/llm-routing/proxies.ts', 'K-proxy mode of the published-workload matrix: does per-proxy filter state pay to share?', {
    quick: flag('shorter runs, 1 seed'),
    seed: int(1, 'first seed'),
    seeds: optNum('seeds (default 2, quick 1)', 1),
    proxies: nums('1,4', 'proxy counts K'),
    split: list('rr', 'arrival split across proxies: rr, random, prefix, adapter'),
    workloads: list('p60,p90,mt,grouped', 'matrix workloads, or ph,over1 (the project fleet with LoRA adapters)'),
    wasm: str('build/switchyard.wasm', 'filter module'),
    mesh: list('off', 'mesh in-flight: off and/or on'),
    share: nums('0', 'prefix-placement exchange records per proxy per period (0: none)'),
    refs: flag("also SGLang's cache-aware router and llm-d's default"),
    out: str('build/bench', 'output directory'),
  });
  const quick = opt.quick;
  const seed = opt.seed;
  const nSeeds = opt.seeds ?? (quick ? 1 : 2);
  const ks = opt.proxies;
  const splits = opt.split as Split[];
  const all = opt.workloads;
  const project = all.filter((w) => (PROJECT_WORKLOADS as readonly string[]).includes(w));
  const workloads = all.filter((w) => !project.includes(w));
  for (const w of workloads) if (!(WORKLOADS as readonly string[]).includes(w)) throw new Error(`--workloads: unknown workload "${w}"`);
  const wasmPath = opt.wasm;
  for (const m of opt.mesh) if (m !== 'on' && m !== 'off') throw new Error(`--mesh: off and/or on, got ${m}`);
  const meshModes = opt.mesh.map((x) => x === 'on');
  // `--share 0,64,4096`: the prefix-placement exchange across proxies (prefix-mesh.ts); 0 = none
  const shares = opt.share;
  const seeds = Array.from({ length: nSeeds }, (_, k) => seed + k);
  const cells: Array<Cell & { seed: number; metrics?: Record<string, number> }> = [];
  const t0 = performance.now();
  if (project.length) {
    const pc: ProjectCell[] = [];
    for (const s of seeds) for (const key of project) {
      const sc = projectScenario(key, quick, s);
      for (const m of meshModes) for (const k of ks) for (const sp of k === 1 ? ['rr' as Split] : splits) {
        const t1 = performance.now();
        const c = runProject(key, sc, new ProxiesPolicy(k, sp, wasmPath, m), s);
        pc.push(c);
        console.error(`seed ${s} ${key} ${c.policy}: adapter TTFT P99 ${c.adapter.ttftP99.toFixed(0)} ms, base ${c.base.ttftP99.toFixed(0)} ms, slot waits ${c.adapter.slotWaited}/${c.adapter.n} (${((performance.now() - t1) / 1000).toFixed(1)} s)`);
      }
    }
    console.log(`\n## K proxies on the project fleet (LoRA; ${quick ? 'quick' : 'full'} mode, seeds ${seeds.join(', ')})\n`);
    console.log(projectTable(pc));
    const outDir = opt.out;
    fs.mkdirSync(outDir, { recursive: true });
    fs.writeFileSync(path.join(outDir, 'llm-proxies-lora.json'), JSON.stringify({ quick, seeds, ks, splits, wasm: wasmPath, cells: pc }, null, 1));
    if (!workloads.length) return;
  }
  for (const s of seeds) {
    for (const { key, sc } of scenarios(quick, s, workloads)) {
      const policies: RoutingPolicy[] = [];
      for (const m of meshModes) for (const k of ks) for (const sp of k === 1 ? ['rr' as Split] : splits) for (const n of k === 1 || !m ? [0] : shares) policies.push(new ProxiesPolicy(k, sp, wasmPath, m, n));
      if (opt.refs) {
        policies.push(new SglangCacheAware());
        const peak = calibratedPeakPrefill(A100_LLAMA8B as { stepBaseMs: number; prefillMsPerToken: number; maxNumBatchedTokens: number });
        policies.push(new LlmdOptimizedBaseline({ peakPrefillThroughput: peak }));
      }
      for (const p of policies) {
        const t1 = performance.now();
        const r = runFleet(publishedFleet(sc.numBlocks), sc.requests, p, s);
        if (r.outcomes.filter((o) => o !== undefined).length !== sc.requests.length) throw new Error(`${p.name} on ${key}: requests unaccounted for`);
        const c = { ...cellOf(sc, r), workload: key, seed: s, metrics: p instanceof ProxiesPolicy ? p.metrics() : undefined };
        cells.push(c);
        const sh = p instanceof ProxiesPolicy && p.share ? p.share.stats : undefined;
        const shTxt = sh ? `, share ${(sh.sent / Math.max(1, sh.periods) / (p as ProxiesPolicy).k).toFixed(1)} rec/proxy/period (max ${sh.maxPerPeriod}, dropped ${sh.dropped})` : '';
        console.error(`seed ${s} ${key} ${p.name}: ${c.reqPerS.toFixed(1)} req/s, TTFT P99 ${c.ttftP99S.toFixed(2)} s, hit ${(100 * c.hitRate).toFixed(1)} %, refused ${c.refused}${shTxt} (${((performance.now() - t1) / 1000).toFixed(1)} s)`);
      }
    }
  }
  // one row per policy; per workload the mean over seeds and, with 2+ seeds, the per-seed values
  const keys = WORKLOADS.filter((k) => cells.some((c) => c.workload === k));
  const names = [...new Set(cells.map((c) => c.policy))];
  const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
  const lines = [`| router | ${keys.map((k) => WORKLOAD_TITLES[k]).join(' | ')} |`, `|---|${keys.map(() => '---').join('|')}|`];
  for (const n of names) {
    lines.push(`| ${n} | ${keys.map((k) => {
      const cs = cells.filter((c) => c.policy === n && c.workload === k);
      const refused = cs.reduce((a, c) => a + c.refused, 0);
      return `${mean(cs.map((c) => c.reqPerS)).toFixed(1)} · ${mean(cs.map((c) => c.ttftP99S)).toFixed(2)} · ${(100 * mean(cs.map((c) => c.hitRate))).toFixed(1)} %${refused ? ` · ${refused} refused` : ''}`;
    }).join(' | ')} |`);
  }
  console.log(`\n## K proxies (${quick ? 'quick' : 'full'} mode, seeds ${seeds.join(', ')}; mean of seeds; req/s · TTFT P99 (s) · prefix-cache hit rate)\n`);
  console.log(lines.join('\n'));
  if (seeds.length > 1) {
    const per = [`| router | ${keys.map((k) => WORKLOAD_TITLES[k]).join(' | ')} |`, `|---|${keys.map(() => '---').join('|')}|`];
    for (const n of names) per.push(`| ${n} | ${keys.map((k) => cells.filter((c) => c.policy === n && c.workload === k).map((c) => `${c.ttftP99S.toFixed(2)} / ${(100 * c.hitRate).toFixed(1)} %`).join(' ; ')).join(' | ')} |`);
    console.log(`\nper seed (${seeds.join(' ; ')}): TTFT P99 (s) / hit rate\n`);
    console.log(per.join('\n'));
  }
  // attribution: how often the filter's own prefix index named a holder of the prompt's leading
  // blocks (switchyard.request.prefix_hit / parsed, summed over the K proxies)
  const fl = [`| router | ${keys.map((k) => WORKLOAD_TITLES[k]).join(' | ')} |`, `|---|${keys.map(() => '---').join('|')}|`];
  for (const n of names) {
    const cs0 = cells.filter((c) => c.policy === n && c.metrics);
    if (!cs0.length) continue;
    fl.push(`| ${n} | ${keys.map((k) => {
      const cs = cs0.filter((c) => c.workload === k);
      const sum = (m: string): number => cs.reduce((a, c) => a + (c.metrics?.[`switchyard.request.${m}.llm`] ?? 0), 0);
      return `${(100 * sum('prefix_hit') / Math.max(1, sum('parsed'))).toFixed(1)} %`;
    }).join(' | ')} |`);
  }
  console.log(`\nthe filter's prefix index: requests whose prompt it found a holder for (prefix_hit / parsed, all seeds)\n`);
  console.log(fl.join('\n'));
  const outDir = opt.out;
  fs.mkdirSync(outDir, { recursive: true });
  fs.writeFileSync(path.join(outDir, 'llm-proxies.json'), JSON.stringify({ quick, seeds, ks, splits, wasm: wasmPath, cells }, null, 1));
  console.log(`\n${((performance.now() - t0) / 1000).toFixed(0)} s; ${path.join(outDir, 'llm-proxies.json')}`);
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(__filename)) main();
