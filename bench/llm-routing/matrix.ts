// The published-workload matrix (issue 20): reference routers as their owners define them and the
// compiled filter on its shipped defaults, on replicas of published experiments (published.ts),
// one table. `tsx bench/llm-routing/matrix.ts [--quick] [--seeds N] [--wasm build/switchyard.wasm]
// [--policies a,b] [--workloads grouped,shuffled,p60,p90,mt,ns,ev] [--out build/bench]`.
// Every decision of the Switchyard row is the filter's (build/switchyard.wasm in the embedded host)
// fed by the agent's own code reading each simulated worker's vLLM /metrics (filter.ts, agent.ts).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { runFleet, type RoutingPolicy, type RunResult } from './fleet';
import { GieScheduler, LeastRequest, RoundRobin } from './reference';
import { SglangCacheAware } from './cache-aware';
import { calibratedPeakPrefill, LlmdOptimizedBaseline } from './llmd';
import { SwitchyardFilterPolicy } from './filter';
import { SwitchyardBodyBlind } from './switchyard';
import { quantile } from './report';
import { A100_LLAMA8B, asBurst, evictionHeavy, gspBurst, gspPoisson, type MatrixScenario, multiTurn, noSharedPrefix, publishedFleet } from './published';
import { cli, flag, int, list, optNum, str } from '../cli';

export interface Cell {
  policy: string;
  workload: string;
  served: number;
  refused: number;
  /** served requests / (last completion − first arrival), req/s */
  reqPerS: number;
  ttftP99S: number;
  /** Σ cached prompt tokens / Σ prompt tokens, served requests */
  hitRate: number;
}

export function cellOf(sc: MatrixScenario, r: RunResult): Cell {
  const served = r.outcomes.filter((o) => !o.shed);
  const refused = r.outcomes.length - served.length;
  const first = Math.min(...sc.requests.map((b) => b.w.atMs));
  const last = served.reduce((m, o) => Math.max(m, o.arrivalMs + o.e2eMs), first);
  const tok = served.reduce((a, o) => a + o.promptTokens, 0);
  return {
    policy: r.policy, workload: sc.name, served: served.length, refused,
    reqPerS: served.length / Math.max(1e-9, (last - first) / 1000),
    ttftP99S: quantile(served.map((o) => o.ttftMs), 0.99) / 1000,
    hitRate: tok ? served.reduce((a, o) => a + o.cachedTokens, 0) / tok : 0,
  };
}

export interface MatrixOpts {
  quick: boolean;
  seed: number;
  wasmPath: string;
  policies?: string[];
  workloads?: string[];
}

export const WORKLOADS = ['grouped', 'shuffled', 'p60', 'p90', 'mt', 'ns', 'ev'] as const;
export const WORKLOAD_TITLES: Record<string, string> = {
  grouped: 'cold burst, grouped', shuffled: 'cold burst, shuffled', p60: 'Poisson 60 %', p90: 'Poisson 90 %', mt: 'multi-turn', ns: 'no shared prefix', ev: 'eviction-heavy',
};

export function matrixPolicies(wasmPath: string): RoutingPolicy[] {
  const peak = calibratedPeakPrefill(A100_LLAMA8B as { stepBaseMs: number; prefillMsPerToken: number; maxNumBatchedTokens: number });
  return [
    new RoundRobin(), new LeastRequest(), new SglangCacheAware(), new GieScheduler(), new LlmdOptimizedBaseline({ peakPrefillThroughput: peak }),
    // the body-blind load-aware choice (the no-shared-prefix target's reference; switchyard.ts)
    new SwitchyardBodyBlind(1000),
    // shipped defaults: agent scrape 1 s, publish 250 ms, concurrency inferred, request.picker band, one worker
    new SwitchyardFilterPolicy({ wasmPath, agent: { scrapeIntervalMs: 1000 }, name: 'switchyard (shipped defaults)' }),
  ];
}

/** The fleet cold and idle before the first arrival: 3 s, so every policy's scrapes (the agent's
 *  two per instance before the filter leaves degraded mode) have run on an idle fleet. */
const START_MS = 3000;

function run(sc: MatrixScenario, p: RoutingPolicy, seed: number): RunResult {
  const r = runFleet(publishedFleet(sc.numBlocks), sc.requests, p, seed);
  const lost = r.outcomes.filter((o) => o === undefined).length + (sc.requests.length - r.outcomes.length);
  if (lost) throw new Error(`${p.name} on ${sc.name}: ${lost} requests unaccounted for`);
  return r;
}

/** Round robin's saturation throughput on a workload: its requests as one burst. */
function rrSaturation(sc: MatrixScenario, seed: number): number {
  return cellOf(sc, run(asBurst(sc, START_MS), new RoundRobin(), seed)).reqPerS;
}

export function scenarios(quick: boolean, seed: number, which: readonly string[]): Array<{ key: string; sc: MatrixScenario }> {
  const gsp = quick ? { groups: 8, perGroup: 16 } : { groups: 64, perGroup: 16 };
  const out: Array<{ key: string; sc: MatrixScenario }> = [];
  const need = (k: string): boolean => which.includes(k);
  if (need('grouped')) out.push({ key: 'grouped', sc: gspBurst({ seed, ...gsp, shuffled: false, atMs: START_MS }) });
  const shuffled = gspBurst({ seed, ...gsp, shuffled: true, atMs: START_MS });
  if (need('shuffled')) out.push({ key: 'shuffled', sc: shuffled });
  let sat = NaN;
  const satGsp = (): number => (Number.isNaN(sat) ? (sat = rrSaturation(shuffled, seed)) : sat);
  for (const [k, f] of [['p60', 0.6], ['p90', 0.9]] as const) if (need(k)) out.push({ key: k, sc: gspPoisson({ seed, ...gsp, ratePerS: f * satGsp(), startMs: START_MS, label: `${Math.round(f * 100)} % (${(f * satGsp()).toFixed(1)} req/s)` }) });
  if (need('mt')) {
    // the sessions start at round robin's saturation rate on the shared-prefix set and each turn
    // follows after the time all sessions took to start: every round of turns arrives at that
    // rate, so the fleet is loaded and the throughput is the fleet's, not the think time's
    // not a multiple of the 8 workers: round robin would otherwise send every turn of a session to one worker
    const sessions = quick ? 23 : 127;
    const window = (sessions / satGsp()) * 1000;
    out.push({ key: 'mt', sc: multiTurn({ seed, sessions, turns: quick ? 3 : 6, sessionRatePerS: satGsp(), thinkMs: window, startMs: START_MS }) });
  }
  if (need('ns')) {
    const base = noSharedPrefix({ seed, n: quick ? 128 : 1024, ratePerS: 1, startMs: START_MS });
    const rate = 0.6 * rrSaturation(base, seed);
    out.push({ key: 'ns', sc: noSharedPrefix({ seed, n: quick ? 128 : 1024, ratePerS: rate, startMs: START_MS }) });
  }
  if (need('ev')) {
    const o = { seed, tenants: quick ? 30 : 150, n: quick ? 200 : 1500, startMs: START_MS };
    const rate = 0.9 * rrSaturation(evictionHeavy({ ...o, ratePerS: 1 }), seed);
    out.push({ key: 'ev', sc: evictionHeavy({ ...o, ratePerS: rate }) });
  }
  return out;
}

export function runMatrix(o: MatrixOpts, seeds: number[], log: (s: string) => void = () => {}): Cell[][] {
  const all: Cell[][] = [];
  for (const seed of seeds) {
    const cells: Cell[] = [];
    for (const { key, sc } of scenarios(o.quick, seed, o.workloads ?? WORKLOADS)) {
      for (const p of matrixPolicies(o.wasmPath)) {
        if (o.policies && !o.policies.some((x) => p.name.includes(x))) continue;
        const t0 = performance.now();
        const c = cellOf(sc, run(sc, p, seed));
        c.workload = key;
        cells.push(c);
        log(`seed ${seed} ${key} ${p.name}: ${c.reqPerS.toFixed(1)} req/s, TTFT P99 ${c.ttftP99S.toFixed(2)} s, hit ${(100 * c.hitRate).toFixed(0)} %, refused ${c.refused} (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
      }
    }
    all.push(cells);
  }
  return all;
}

/** Mean over seeds, one table: rows policies, columns workloads, cells req/s · TTFT P99 (s) · hit rate · refused. */
export function matrixTable(all: Cell[][]): string {
  const policies = [...new Set(all.flat().map((c) => c.policy))];
  const keys = WORKLOADS.filter((k) => all.flat().some((c) => c.workload === k));
  const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
  const lines = [`| policy | ${keys.map((k) => WORKLOAD_TITLES[k]).join(' | ')} |`, `|---|${keys.map(() => '---').join('|')}|`];
  for (const p of policies) {
    const cells = keys.map((k) => {
      const cs = all.flat().filter((c) => c.policy === p && c.workload === k);
      if (!cs.length) return '–';
      const refused = cs.reduce((a, c) => a + c.refused, 0);
      return `${mean(cs.map((c) => c.reqPerS)).toFixed(1)} · ${mean(cs.map((c) => c.ttftP99S)).toFixed(2)} · ${(100 * mean(cs.map((c) => c.hitRate))).toFixed(0)} %${refused ? ` · **${refused} refused**` : ''}`;
    });
    lines.push(`| ${p} | ${cells.join(' | ')} |`);
  }
  return lines.join('\n');
}

function main(): void {
  const opt = cli('npx tsx bench/llm-routing/matrix.ts', 'The published-workload matrix: reference routers and the compiled filter on replicas of published experiments.', {
    quick: flag('shorter runs, 1 seed'),
    seed: int(1, 'first seed'),
    seeds: optNum('seeds (default 3, quick 1)', 1),
    workloads: list('', `only these workloads (${WORKLOADS.join(', ')}; default all)`),
    policies: list('', 'only the policies whose name contains one of these (default all)'),
    wasm: str('build/switchyard.wasm', 'filter module'),
    out: str('build/bench', 'output directory'),
  });
  const quick = opt.quick;
  const seed = opt.seed;
  const nSeeds = opt.seeds ?? (quick ? 1 : 3);
  const workloads = opt.workloads.length > 0 ? opt.workloads : undefined;
  for (const w of workloads ?? []) if (!(WORKLOADS as readonly string[]).includes(w)) throw new Error(`--workloads: unknown workload "${w}" (${WORKLOADS.join(', ')})`);
  const o: MatrixOpts = { quick, seed, wasmPath: opt.wasm, policies: opt.policies.length > 0 ? opt.policies : undefined, workloads };
  const seeds = Array.from({ length: nSeeds }, (_, k) => seed + k);
  const t0 = performance.now();
  const all = runMatrix(o, seeds, (s) => console.error(s));
  console.log(`\n## published-workload matrix (${quick ? 'quick' : 'full'} mode, seeds ${seeds.join(', ')}; mean of seeds; req/s · TTFT P99 (s) · prefix-cache hit rate)\n`);
  console.log(matrixTable(all));
  const outDir = opt.out;
  fs.mkdirSync(outDir, { recursive: true });
  fs.writeFileSync(path.join(outDir, 'llm-matrix.json'), JSON.stringify({ quick, seeds, wasm: o.wasmPath, cells: all }, null, 1));
  console.log(`\n${((performance.now() - t0) / 1000).toFixed(0)} s; ${path.join(outDir, 'llm-matrix.json')}`);
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(__filename)) main();
