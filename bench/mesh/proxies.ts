// Mesh routing DES (issue 22, Evidence 1): K proxies of the compiled filter in front of one fleet,
// against what a central picker knows.
//
//   npx tsx bench/mesh/proxies.ts --quick     # a smoke run: K 1,4,16,64, fleets A and B, rho 0.95, 1 s scrape, 2 000 measured
//   npx tsx bench/mesh/proxies.ts             # default: rho 0.85 and 0.95, scrape 1 s and 250 ms, 3 000 measured
//   [--k 1,4,16,64] [--fleets A,B] [--rhos 0.85,0.95] [--scrapes 1000,250] [--measured N] [--warmup MS] [--seed N]
//   [--wasm build/switchyard.wasm] [--out build/bench]
//
// Each proxy is an embedded Proxy-Wasm host with 2 worker VMs (+ the main-thread VM) running the
// compiled filter (bench/routing/switchyard.ts SwitchyardPolicy); the K hosts share one compiled
// module (host.ts caches it per byte buffer) and ONE agent model (bench/routing/agent-model.ts:
// the real parser, estimator and snapshot codec) feeds them all, as one node agent or one pool
// collector would. Arrivals are split uniformly over the proxies (bench/routing/choose-model.ts
// MultiProxy). Every policy of a (fleet, rho, seed) cell sees the same sample path.
//
// Rows (P99 / the P99 of the all-seeing LEAST_REQUEST, the issue's table):
//   least-request (all-seeing)  Envoy LEAST_REQUEST P2C on the exact in-flight counts of every
//                               request: what a central picker knows (the denominator);
//   least-request xK            Envoy LEAST_REQUEST in each proxy on its own active requests;
//   switchyard xK @scrape       today's design: the filter with mesh in-flight off
//                               (loadAware.meshReportMs 0): each proxy's in-flight counts its own
//                               plus the agent's scrape;
//   switchyard+mesh xK @scrape  mesh in-flight as shipped (loadAware.meshReportMs default): every
//                               proxy's snapshot writer reports its counts to the agent model on
//                               POST /v1/inflight (the real agent/src/mesh/inflight.ts aggregation)
//                               and prices the other proxies' answer.
//   [--policies today,mesh] [--mesh-report MS] (a tuned report interval: the row is labelled)
//   [--exchange leader|all]  those agents' inflight.exchange (default: the shipped leader mode; all: labelled)
//   [--mesh-agents M]  the mesh row's K proxies report round robin to M agents linked by the real
//                      NATS exchange (agent/src/mesh/inflight-exchange.ts, 1 ms hop) instead of one
import { mkdirSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { DEFAULT_AGENT, type AgentSpec } from '../routing/agent-model';
import { LocalLeastRequest, MultiProxy } from '../routing/choose-model';
import { capacityPerS, DEFAULT_FLEET, type FleetSpec, LeastRequest, makeSamplePath, MIXED_FLEET, type RoutingPolicy, runPolicy, summarize, type Summary } from '../routing/des';
import { SwitchyardPolicy, wasmBytes } from '../routing/switchyard';
import { cli, flag, int, list, num, nums, optNum, optStr, str } from '../cli';

const ROOT = path.resolve(__dirname, '../..');

export const FLEETS: Record<string, FleetSpec> = { A: DEFAULT_FLEET, B: MIXED_FLEET };

export interface MeshDesConfig {
  ks: number[];
  fleets: string[];
  rhos: number[];
  /** agent scrape intervals (ms); the shipped sidecar setting is 1000 */
  scrapesMs: number[];
  measured: number;
  warmupMs: number;
  seed: number;
  wasm: string;
  /** which filter rows: 'today' (mesh in-flight off), 'mesh' (shipped default) */
  policies: string[];
  /** loadAware.meshReportMs for the mesh row; undefined = the filter's default (shipped) */
  meshReportMs?: number;
  /** mesh row: the K proxies report to this many agents (round robin) linked by the NATS exchange (1 ms hop); 1 = one agent for all */
  meshAgents?: number;
  /** inflight.exchangeMs of those agents (undefined: the agent's default; set: a tuned, labelled row) */
  exchangeMs?: number;
  /** inflight.exchange of those agents (undefined: the agent's default, leader; 'all': the all-to-all exchange, a labelled row) */
  exchange?: 'leader' | 'all';
}

export interface MeshRow {
  fleet: string;
  rho: number;
  k: number;
  /** 'least-request (all-seeing)' | 'least-request xK' | 'switchyard xK' */
  policy: string;
  /** scrape interval (ms) of the agent feeding the filter; undefined for the references */
  scrapeMs?: number;
  summary: Summary;
  /** P99 / the all-seeing LEAST_REQUEST's P99 on the same sample path */
  ratio: number;
  /** requests each proxy routed (filter rows): the uniform split */
  perProxy?: number[];
  /** measured requests the filter forwarded degraded (all instances ineligible: the LEAST_REQUEST fallback) */
  degradedMeasured?: number;
  /** mesh row with several agents: NATS messages and bytes per virtual second (published; delivered to subscribers) */
  nats?: { publishedPerS: number; publishedBytesPerS: number; deliveredPerS: number; deliveredBytesPerS: number };
  wallMs: number;
}

/** The filter's consistency checks: every endpoint counted by its metrics, no VM failure. */
export function checkProxies(p: MultiProxy, what: string): void {
  for (const m of p.members) {
    if (!(m instanceof SwitchyardPolicy)) continue;
    if (m.stats.choiceMetric !== m.stats.filterRouted) throw new Error(`${what}: switchyard.lb.choice.* = ${m.stats.choiceMetric} but ${m.stats.filterRouted} requests carried an endpoint`);
    if (m.stats.vmFailures) throw new Error(`${what}: ${m.stats.vmFailures} VM failures`);
  }
}

/** One (fleet, rho) cell: the denominator, then per K the per-proxy LEAST_REQUEST and the filter at every scrape setting. */
export async function runCell(c: MeshDesConfig, fleetName: string, rho: number, onRow?: (r: MeshRow) => void): Promise<MeshRow[]> {
  const fleet = FLEETS[fleetName];
  if (!fleet) throw new Error(`--fleets: unknown fleet ${fleetName} (A or B)`);
  const seed = c.seed;
  const sp = makeSamplePath(fleet, { rho, seed, warmupMs: c.warmupMs, measured: c.measured });
  const mr: [number, number] = [sp.firstMeasured, sp.firstMeasured + sp.measured];
  const rows: MeshRow[] = [];
  const push = (r: MeshRow): void => {
    rows.push(r);
    onRow?.(r);
  };
  const all = await runPolicy(fleet, sp, new LeastRequest(seed));
  const denom = summarize(all.responseMs);
  push({ fleet: fleetName, rho, k: 1, policy: 'least-request (all-seeing)', summary: denom, ratio: 1, wallMs: Math.round(all.wallMs) });
  for (const k of c.ks) {
    const variants: Array<{ p: RoutingPolicy; scrapeMs?: number }> = [
      { p: new MultiProxy(`least-request x${k}`, (i) => new LocalLeastRequest(seed + i), k, undefined, seed) },
    ];
    for (const scrapeMs of c.scrapesMs) {
      const agent: AgentSpec = { ...DEFAULT_AGENT, scrapeIntervalMs: scrapeMs };
      for (const pol of c.policies) {
        const mesh = pol === 'mesh';
        const agents = mesh ? Math.min(c.meshAgents ?? 1, k) : 1;
        const name = mesh ? `switchyard+mesh${c.meshReportMs !== undefined ? ` (tuned: report ${c.meshReportMs} ms)` : ''}${agents > 1 ? ` ${agents} agents${c.exchange === 'all' ? ' (all-to-all)' : ''}${c.exchangeMs !== undefined ? ` (tuned: exchange ${c.exchangeMs} ms)` : ''}` : ''} x${k}` : `switchyard x${k}`;
        const tuning = { meshReportMs: mesh ? c.meshReportMs : 0 };
        variants.push({
          scrapeMs,
          p: new MultiProxy(name, (i, shared) => new SwitchyardPolicy({
            wasmPath: c.wasm, agent, seed: seed + i, name: `${name} #${i}`, sharedAgent: shared, measuredRange: mr, tuning, inflightGroup: i,
          }), k, { spec: agent, seed, meshAgents: agents, exchangeMs: c.exchangeMs, exchange: c.exchange }, seed),
        });
      }
    }
    for (const v of variants) {
      const r = await runPolicy(fleet, sp, v.p);
      const mp = v.p as MultiProxy;
      checkProxies(mp, `${fleetName} rho ${rho} ${v.p.name}`);
      const perProxy = mp.members[0] instanceof SwitchyardPolicy
        ? mp.members.map((m) => { const s = (m as SwitchyardPolicy).stats; return s.filterRouted + s.fallback; })
        : undefined;
      const degradedMeasured = perProxy ? mp.members.reduce((a, m) => a + (m as SwitchyardPolicy).stats.fallbackMeasured, 0) : undefined;
      const s = summarize(r.responseMs);
      const tr = mp.agent?.nats;
      const nats = tr && tr.published > 0 ? {
        publishedPerS: tr.published / (r.virtualMs / 1000), publishedBytesPerS: tr.publishedBytes / (r.virtualMs / 1000),
        deliveredPerS: tr.delivered / (r.virtualMs / 1000), deliveredBytesPerS: tr.deliveredBytes / (r.virtualMs / 1000),
      } : undefined;
      push({ nats, degradedMeasured, fleet: fleetName, rho, k, policy: v.p.name, scrapeMs: v.scrapeMs, summary: s, ratio: s.p99Ms / denom.p99Ms, perProxy, wallMs: Math.round(r.wallMs) });
    }
  }
  return rows;
}

/** The issue's table: one line per (fleet, K), one column per (policy, rho, scrape). */
export function ratioTable(rows: MeshRow[], c: MeshDesConfig): string {
  const cols: Array<{ head: string; pick: (r: MeshRow) => boolean; rho: number }> = [];
  for (const pol of c.policies) for (const scrapeMs of c.scrapesMs) for (const rho of c.rhos) {
    const mesh = pol === 'mesh';
    cols.push({
      head: `${mesh ? 'mesh in-flight' : 'today'} ρ ${rho}, ${scrapeMs >= 1000 ? `${scrapeMs / 1000} s` : `${scrapeMs} ms`}`, rho,
      pick: (r) => r.policy.startsWith(mesh ? 'switchyard+mesh' : 'switchyard x') && r.scrapeMs === scrapeMs && r.rho === rho,
    });
  }
  for (const rho of c.rhos) cols.push({ head: `per-proxy LR, ρ ${rho}`, rho, pick: (r) => r.policy.startsWith('least-request x') && r.rho === rho });
  const out = [`| fleet | K | ${cols.map((x) => x.head).join(' | ')} |`, `|---|---|${cols.map(() => '---|').join('')}`];
  for (const f of c.fleets) for (const k of c.ks) {
    const cells = cols.map((col) => {
      const r = rows.find((x) => x.fleet === f && x.k === k && col.pick(x));
      return r ? r.ratio.toFixed(2) : '';
    });
    out.push(`| ${f} | ${k} | ${cells.join(' | ')} |`);
  }
  return out.join('\n');
}

const positive = (xs: number[], what: string): number[] => {
  for (const v of xs) if (!(v > 0)) throw new Error(`${what}: expected positive numbers, got ${v}`);
  return xs;
};

async function main(): Promise<void> {
  const o = cli('npx tsx bench/mesh/proxies.ts', 'Mesh routing DES: K proxies of the compiled filter in front of one fleet.', {
    quick: flag('a smoke run: rho 0.95, 1 s scrape, 2 000 measured'),
    k: nums('1,4,16,64', 'proxy counts'),
    fleets: list('A,B', 'fleets'),
    rhos: optStr('utilisations (default 0.85,0.95; quick 0.95)'),
    scrapes: optStr('agent scrape intervals, ms (default 1000,250; quick 1000)'),
    measured: optNum('measured requests (default 3000, quick 2000)', 1),
    warmup: num(10000, 'warm-up, ms', 0),
    seed: int(1, 'seed'),
    wasm: str('build/switchyard.wasm', 'filter module'),
    policies: list('today,mesh', 'today and/or mesh'),
    'mesh-report': optNum('mesh in-flight report interval, ms (default: the shipped one)', 1),
    'mesh-agents': int(1, 'mesh agents', 1),
    'exchange-ms': optNum('in-flight exchange interval, ms (default: the shipped one)', 1),
    exchange: optStr('leader or all (default: the shipped mode)'),
    out: str('build/bench', 'output directory'),
  });
  const quick = o.quick;
  const numList = (s: string, what: string): number[] => positive(s.split(',').map(Number), what);
  const c: MeshDesConfig = {
    ks: positive(o.k, '--k'),
    fleets: o.fleets,
    rhos: numList(o.rhos ?? (quick ? '0.95' : '0.85,0.95'), '--rhos'),
    scrapesMs: numList(o.scrapes ?? (quick ? '1000' : '1000,250'), '--scrapes'),
    measured: o.measured ?? (quick ? 2000 : 3000),
    warmupMs: o.warmup,
    seed: o.seed,
    wasm: path.resolve(ROOT, o.wasm),
    policies: o.policies,
    meshReportMs: o['mesh-report'],
    meshAgents: o['mesh-agents'],
    exchangeMs: o['exchange-ms'],
    exchange: o.exchange as 'leader' | 'all' | undefined,
  };
  if (c.exchange !== undefined && c.exchange !== 'leader' && c.exchange !== 'all') throw new Error(`--exchange: leader or all, got ${c.exchange}`);
  for (const p of c.policies) if (p !== 'today' && p !== 'mesh') throw new Error(`--policies: unknown ${p} (today, mesh)`);
  const out = path.resolve(ROOT, o.out);
  const t0 = performance.now();
  const w = wasmBytes(c.wasm);
  console.log(`Mesh routing DES (issue 22), ${quick ? 'quick' : 'default'} mode, seed ${c.seed}, ${c.measured} measured requests per cell, warm-up ${c.warmupMs / 1000} s`);
  console.log(`filter ${path.relative(ROOT, c.wasm)} sha256 ${w.sha256.slice(0, 16)}…; each proxy: embedded host, 2 worker VMs; one agent model feeds all proxies; arrivals split uniformly`);
  const rows: MeshRow[] = [];
  for (const f of c.fleets) for (const rho of c.rhos) {
    const fleet = FLEETS[f];
    if (!fleet) throw new Error(`--fleets: unknown fleet ${f} (A or B)`);
    console.log(`\n== fleet ${f} (${fleet.speeds.join(', ')}; c=${fleet.slots}), rho ${rho} (${(rho * capacityPerS(fleet)).toFixed(0)} req/s)`);
    await runCell(c, f, rho, (r) => {
      rows.push(r);
      const s = r.summary;
      console.log(`  ${(r.policy + (r.scrapeMs ? ` @${r.scrapeMs} ms` : '')).padEnd(40)} P50 ${s.p50Ms.toFixed(0).padStart(5)}  P99 ${s.p99Ms.toFixed(0).padStart(6)}  P99.9 ${s.p999Ms.toFixed(0).padStart(6)} ms  ratio ${r.ratio.toFixed(2)}${r.degradedMeasured ? `  degraded ${r.degradedMeasured}` : ''}  [${(r.wallMs / 1000).toFixed(1)} s]`);
      if (r.nats) console.log(`    NATS: published ${r.nats.publishedPerS.toFixed(0)} msg/s ${(r.nats.publishedBytesPerS / 1000).toFixed(1)} kB/s; delivered ${r.nats.deliveredPerS.toFixed(0)} msg/s ${(r.nats.deliveredBytesPerS / 1000).toFixed(1)} kB/s`);
    });
  }
  console.log('\nP99 ÷ the all-seeing LEAST_REQUEST P99 (same sample path):');
  console.log(ratioTable(rows, c));
  console.log(`\ntotal wall time ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  mkdirSync(out, { recursive: true });
  writeFileSync(path.join(out, 'mesh-des.json'), JSON.stringify({ meta: { quick, ...c, sha256: w.sha256, date: new Date().toISOString() }, rows }, null, 2) + '\n');
  console.log(`wrote ${path.relative(ROOT, path.join(out, 'mesh-des.json'))}`);
}

if (require.main === module) {
  main().catch((e) => {
    console.error(e);
    process.exit(1);
  });
}
