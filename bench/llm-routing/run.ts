// LLM routing benchmark (issue 10 §5): reference policies vs Switchyard on an LLM fleet in virtual
// time. `tsx bench/llm-routing/run.ts --quick` (~2.5 min) | full mode (longer runs, 5 seeds).
//   [--seed N] [--out build/bench] [--policies a,b] [--workloads ph,ns,overload] [--wasm build/switchyard.wasm]
import * as fs from 'node:fs';
import * as path from 'node:path';
import { runFleet, type RoutingPolicy } from './fleet';
import { GieScheduler, LeastRequest, prefixOnly, RoundRobin } from './reference';
import { overloadTable, type Summary, summarize, table } from './report';
import { fleet, noSharedPrefix, prefixHeavy, type Scenario } from './scenarios';
import { RequestAwarePrototype, SwitchyardBodyBlind } from './switchyard';
import { SwitchyardFilterPolicy } from './filter';
import { cli, flag, int, list, str } from '../cli';

const opts = cli('npx tsx bench/llm-routing/run.ts', 'LLM routing benchmark: reference policies vs Switchyard on an LLM fleet in virtual time.', {
  quick: flag('2 seeds, shorter runs (~2.5 min)'),
  seed: int(1, 'first seed'),
  // for iterating on one policy: the targets' references (least-request, gie-default, switchyard-blind) always run
  policies: list('', 'only the policies whose name contains one of these (default all)'),
  // for iterating on one target
  workloads: list('ph,ns,overload', 'workloads: ph, ns, overload'),
  out: str('build/bench', 'output directory'),
  wasm: str('build/switchyard.wasm', 'the filter build the switchyard-filter rows load'),
});
const quick = opts.quick;
const seed0 = opts.seed;
const only = opts.policies.length > 0 ? opts.policies : undefined;
const REFS = ['least-request', 'gie-default', 'switchyard-blind (1000 ms)'];
const workloads = opts.workloads;
for (const w of workloads) if (!['ph', 'ns', 'overload'].includes(w)) throw new Error(`--workloads: unknown workload "${w}" (ph, ns, overload)`);
const outDir = opts.out;
const wasmPath = opts.wasm;
const seeds = quick ? [seed0, seed0 + 1] : [seed0, seed0 + 1, seed0 + 2, seed0 + 3, seed0 + 4];
const durationMs = quick ? 50_000 : 180_000;
const warmupMs = quick ? 12_000 : 30_000;
/** TTFT SLO of the goodput column */
const SLO_MS = 500;
/** rates: prefix-heavy ~0.6 of the fleet's capacity with prefix affinity (~50 req/s measured:
 *  completions/s at saturation), no-shared-prefix alike (~0.6-0.7 by the same measure) */
const RATE_PREFIX = 30;
const RATE_NOPREFIX = 16;
const CAPACITY_PREFIX = 50;
/** criticality mix of the overload runs: 20 % critical, 40 % standard, 40 % sheddable */
const MIX: [number, number] = [0.2, 0.4];

/** the prototype without shedding: routing alone, comparable with policies that never shed */
const NO_SHED = { shedSheddableMs: Infinity, shedStandardMs: Infinity, shedSheddableKv: Infinity, shedStandardKv: Infinity };
const NO_SHED_NAME = 'switchyard-request (250 ms, no shedding)';
/** the compiled filter (build/switchyard.wasm) in the embedded host, the real agent code scraping
 *  every 1 s (the agent's default) and every 250 ms */
const FILTER_NAMES = ['switchyard-filter (1000 ms)', 'switchyard-filter (250 ms)', 'switchyard-filter (1000 ms, p2c picker)', 'switchyard-filter (1000 ms, vLLM priority)',
  'switchyard-filter (1000 ms, vLLM priority, tighter shedding)', 'switchyard-filter (1000 ms, 2 workers)'];

function policies(): RoutingPolicy[] {
  return [
    new RoundRobin(), new LeastRequest(), new GieScheduler(), prefixOnly(), new SwitchyardBodyBlind(1000),
    new RequestAwarePrototype({ scrapeMs: 1000 }), new RequestAwarePrototype({ scrapeMs: 250 }), new RequestAwarePrototype({ scrapeMs: 250, ...NO_SHED }, NO_SHED_NAME),
    new SwitchyardFilterPolicy({ wasmPath, agent: { scrapeIntervalMs: 1000 } }), new SwitchyardFilterPolicy({ wasmPath, agent: { scrapeIntervalMs: 250 } }),
    // request.picker: p2c (two draws plus the prefix holder) instead of the default band (cheapest within 10 %)
    new SwitchyardFilterPolicy({ wasmPath, agent: { scrapeIntervalMs: 1000 }, request: { picker: 'p2c' }, name: FILTER_NAMES[2] }),
    // the instances run vLLM --scheduling-policy priority; the filter writes each request's
    // priority into its body from its criticality (request.priority)
    new SwitchyardFilterPolicy({ wasmPath, agent: { scrapeIntervalMs: 1000 }, engine: { schedulingPolicy: 'priority' }, request: { priority: { critical: 0, standard: 1, sheddable: 2 } }, name: FILTER_NAMES[3] }),
    // ... and shedding below the defaults (0.5 / 0.6 of the KV capacity; 0.5 / 1 per slot where it
    // is unknown): admission further below capacity
    new SwitchyardFilterPolicy({ wasmPath,
      agent: { scrapeIntervalMs: 1000 }, engine: { schedulingPolicy: 'priority' }, name: FILTER_NAMES[4],
      request: { priority: { critical: 0, standard: 1, sheddable: 2 }, shedding: { sheddableAt: 0.5, standardAt: 1, kvSheddableAt: 0.5, kvStandardAt: 0.6 } },
    }),
    // two Envoy workers (one VM each, requests alternating): the in-flight table, the pending
    // prefill per instance and the prefix index are shared across VMs
    new SwitchyardFilterPolicy({ wasmPath, agent: { scrapeIntervalMs: 1000 }, workers: 2, name: FILTER_NAMES[5] }),
  ];
}

function runAll(sc: Scenario, seed: number): Summary[] {
  const out: Summary[] = [];
  for (const p of policies()) {
    if (only && !REFS.includes(p.name) && !only.some((o) => p.name.includes(o))) continue;
    const r = runFleet(fleet(), sc.requests, p, seed);
    // every request accounted for: served to completion or shed, none lost
    const lost = r.outcomes.filter((o) => o === undefined).length + (sc.requests.length - r.outcomes.length);
    if (lost) throw new Error(`${p.name} on ${sc.name}: ${lost} requests unaccounted for`);
    out.push(summarize(sc, r, SLO_MS));
  }
  return out;
}

const ratio = (a: number, b: number): string => (a / b).toFixed(2);
const t0 = performance.now();
const all: Record<string, Summary[][]> = { prefixHeavy: [], noSharedPrefix: [], base: [], overload: [] };
const checks: Array<{ seed: number; target: string; value: string; met: boolean }> = [];
for (const seed of seeds) {
  const ph = prefixHeavy({ seed, durationMs, warmupMs, ratePerS: RATE_PREFIX });
  const ns = noSharedPrefix({ seed, durationMs, warmupMs, ratePerS: RATE_NOPREFIX });
  const base = prefixHeavy({ seed, durationMs, warmupMs, ratePerS: RATE_PREFIX, mix: MIX });
  const over = prefixHeavy({ seed, durationMs, warmupMs, ratePerS: 2 * CAPACITY_PREFIX, mix: MIX });
  over.name = 'prefix-heavy 2× overload';
  const runIf = (w: string, sc: Scenario): Summary[] => (workloads.includes(w) ? runAll(sc, seed) : []);
  const rows = { ph: runIf('ph', ph), ns: runIf('ns', ns), base: runIf('overload', base), over: runIf('overload', over) };
  all.prefixHeavy.push(rows.ph);
  all.noSharedPrefix.push(rows.ns);
  all.base.push(rows.base);
  all.overload.push(rows.over);
  if (rows.ph.length) {
    console.log(`\n## seed ${seed}: prefix-heavy, ${RATE_PREFIX} req/s, ${ph.requests.filter((r) => r.measured).length} measured requests\n`);
    console.log(table(rows.ph, SLO_MS));
  }
  if (rows.ns.length) {
    console.log(`\n## seed ${seed}: no shared prefix (80 % 32-256 tokens, 20 % 1024-4096), ${RATE_NOPREFIX} req/s, ${ns.requests.filter((r) => r.measured).length} measured\n`);
    console.log(table(rows.ns, SLO_MS));
  }
  if (rows.base.length) {
    console.log(`\n## seed ${seed}: criticality 20/40/40 %, prefix-heavy at ${RATE_PREFIX} req/s (1×) and ${2 * CAPACITY_PREFIX} req/s (2× the fleet's capacity)\n`);
    console.log(overloadTable(rows.base, rows.over));
  }
  const get = (rs: Summary[], name: string): Summary => rs.find((x) => x.policy === name) as Summary;
  for (const sy of ['switchyard-request (1000 ms)', 'switchyard-request (250 ms)', NO_SHED_NAME, ...FILTER_NAMES]) {
    const p = get(rows.ph, sy);
    if (p) {
      const lr = get(rows.ph, 'least-request');
      const gie = get(rows.ph, 'gie-default');
      checks.push({ seed, target: `${sy}: prefix-heavy TTFT P99 ≤ 0.5× LEAST_REQUEST`, value: ratio(p.ttftP99, lr.ttftP99), met: p.ttftP99 <= 0.5 * lr.ttftP99 });
      checks.push({ seed, target: `${sy}: prefix-heavy TTFT P99 ≤ 0.8× GIE default scorers`, value: ratio(p.ttftP99, gie.ttftP99), met: p.ttftP99 <= 0.8 * gie.ttftP99 });
    }
    const n = get(rows.ns, sy);
    if (n) {
      const blind = get(rows.ns, 'switchyard-blind (1000 ms)');
      checks.push({ seed, target: `${sy}: no-shared-prefix TTFT P99 ≤ body-blind load-aware`, value: ratio(n.ttftP99, blind.ttftP99), met: n.ttftP99 <= blind.ttftP99 });
      checks.push({ seed, target: `${sy}: no-shared-prefix e2e P99 ≤ body-blind load-aware`, value: ratio(n.e2eP99, blind.e2eP99), met: n.e2eP99 <= blind.e2eP99 });
    }
    if (sy === NO_SHED_NAME) continue;
    const b = get(rows.base, sy);
    const o = get(rows.over, sy);
    if (!b || !o) continue;
    // "unchanged": within 10 % (quick runs rest on ~100 critical requests per P99)
    checks.push({ seed, target: `${sy}: critical TTFT P99 at 2× ≤ 1.1× its P99 at 1×`, value: ratio(o.byCrit.critical.ttftP99, b.byCrit.critical.ttftP99), met: o.byCrit.critical.ttftP99 <= 1.1 * b.byCrit.critical.ttftP99 });
    checks.push({ seed, target: `${sy}: at 2×, sheddable shed before standard, no critical shed`, value: `${o.shed.sheddable} / ${o.shed.standard} / ${o.shed.critical}`, met: o.shed.critical === 0 && o.shed.sheddable >= o.shed.standard && o.shed.sheddable > 0 });
  }
}
console.log('\n## targets (issue 10 §5)\n');
console.log('| seed | target | value | |\n|---|---|---|---|');
for (const c of checks) console.log(`| ${c.seed} | ${c.target} | ${c.value} | ${c.met ? 'met' : '**not met**'} |`);
fs.mkdirSync(outDir, { recursive: true });
fs.writeFileSync(path.join(outDir, 'llm-routing.json'), JSON.stringify({ quick, seeds, durationMs, warmupMs, sloMs: SLO_MS, results: all, checks }, null, 1));
console.log(`\n${quick ? 'quick' : 'full'} mode, ${((performance.now() - t0) / 1000).toFixed(0)} s; ${path.join(outDir, 'llm-routing.json')}`);
