// Routing-quality benchmark (issue 3 §4): prints figures, writes build/bench/routing.json and
// build/bench/routing.svg.
//
//   npx tsx bench/routing/run.ts [--quick] [--seed N] [--wasm build/switchyard.wasm] [--out build/bench]
//   npx tsx bench/routing/run.ts --quick --ratios A,B --rhos 0.95 [--paths 5]
//        only the P99 ratio of the filter (defaults, 1 s scrape) to LEAST_REQUEST, per fleet and rho on
//        --paths sample paths (seeds --seed, +1000, ...; path 1 is the main table's): a few minutes
//
// Sections:
//  1. main table -- Envoy ROUND_ROBIN / RANDOM / LEAST_REQUEST (P2C) emulations and Switchyard,
//     i.e. the compiled filter in the embedded host making every decision, fed by the agent model
//     (real estimator, real snapshot codec) with scrape intervals 1 s and 250 ms; plus the
//     filter with the best plugin configuration found (band / maxUtilization);
//  2. targets -- P99 <= 0.5x RR and <= 0.8x LR at rho 0.85, never worse than LR;
//  3. investigation -- a TypeScript model of the choice (choose-model.ts), validated against the
//     filter, with one ingredient changed at a time, and the perfect-information SED bound;
//  4. herding -- a stale-snapshot burst scenario (scrape 2 s, 3x bursts of 500 ms).
import { mkdirSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { DEFAULT_AGENT, type AgentSpec, type ScrapeRow } from './agent-model';
import { AS_BUILT, ChooseModel, type ChooseVariant, LocalLeastRequest, MultiProxy } from './choose-model';
import {
  type Burst, capacityPerS, DEFAULT_FLEET, type FleetSpec, LeastRequest, MIXED_FLEET, makeSamplePath, RandomPolicy, RoundRobin, type RoutingPolicy,
  runPolicy, type RunResult, type SamplePath, summarize,
} from './des';
import { SedOracle } from './reference';
import {
  burstStats, type BurstStats, burstTable, checkTargets, mainTable, p99BatchRange, type Row, spreadTable, type SpreadRow, svgPlot, type TargetCheck, targetText,
} from './report';
import { type FilterTuning, pluginConfig, SwitchyardPolicy, wasmBytes } from './switchyard';
import { cli, flag, int, list, nums, str } from '../cli';

const ROOT = path.resolve(__dirname, '../..');

const OPTS = cli('npx tsx bench/routing/run.ts', 'Routing-quality benchmark: Envoy balancers, the compiled filter, the model, the bound.', {
  quick: flag('fewer and shorter sample paths'),
  seed: int(20261129, 'seed of the first sample path'),
  wasm: str('build/switchyard.wasm', 'filter module'),
  out: str('build/bench', 'output directory'),
  ratios: list('', 'only the P99 ratio to LEAST_REQUEST, on these fleets'),
  rhos: nums('0.95', 'with --ratios: utilisations'),
  paths: int(5, 'with --ratios: sample paths', 1),
});
const QUICK = OPTS.quick;
const SEED = OPTS.seed;
const WASM = path.resolve(ROOT, OPTS.wasm);
const OUT = path.resolve(ROOT, OPTS.out);
const RHOS = [0.5, 0.7, 0.85, 0.95];
const MODE = QUICK
  ? { name: 'quick', measured: 8000, warmupMs: 20_000, bursts: 6 }
  : { name: 'full', measured: 50_000, warmupMs: 30_000, bursts: 20 };

/** The plugin configuration found best for the filter as built (see the investigation). */
const BAND: FilterTuning = { picker: 'band' };

const FLEET = DEFAULT_FLEET;
/** Section 6: seeds per fleet for the spread of the rho 0.85 ratios. */
const SPREAD_SEEDS = QUICK ? 2 : 5;
const fleetText = (f: FleetSpec): string =>
  `${f.speeds.length} instances, c=${f.slots}, speeds [${f.speeds.join(', ')}], lognormal service mean ${f.meanMs} ms (speed 1), sigma ${f.sigma}; capacity ${capacityPerS(f).toFixed(1)} req/s`;
const t0 = performance.now();
const log = (s = ''): void => console.log(s);

interface FilterDiag {
  stats: SwitchyardPolicy['stats'];
  rhoLag: RhoLag;
}

interface RhoLag {
  scrapes: number;
  meanAbsErr: number;
  /** share of scrapes with rho_est >= 0.95 (skipped as saturated with the default maxUtilization) */
  fracRhoGe095: number;
  /** share of scrapes with rho_est >= 1 (infinite cost in mg1WaitMs) */
  fracRhoGe1: number;
  /** share of scrapes at which the instance was idle (nothing running) */
  fracIdle: number;
}

function rhoLag(rows: ScrapeRow[], fromMs: number): RhoLag {
  const r = rows.filter((x) => x.t >= fromMs && Number.isFinite(x.rho));
  const n = r.length || 1;
  return {
    scrapes: r.length,
    meanAbsErr: r.reduce((a, x) => a + Math.abs(x.rho - x.util1s), 0) / n,
    fracRhoGe095: r.filter((x) => x.rho >= 0.95).length / n,
    fracRhoGe1: r.filter((x) => x.rho >= 1).length / n,
    fracIdle: r.filter((x) => x.running === 0).length / n,
  };
}

const rows: Row[] = [];
const diags: Record<string, FilterDiag> = {};

async function run(p: RoutingPolicy, sp: SamplePath, kind: Row['kind'], scrapeMs?: number, extra?: Record<string, unknown>, fleet: FleetSpec = FLEET): Promise<{ row: Row; res: RunResult }> {
  const res = await runPolicy(fleet, sp, p);
  const row: Row = {
    policy: p.name, kind, rho: sp.rho, scrapeMs, summary: summarize(res.responseMs), p99Batches: p99BatchRange(res.responseMs),
    perInstance: res.perInstance, wallMs: Math.round(res.wallMs), virtualS: Math.round(res.virtualMs / 100) / 10, extra,
  };
  return { row, res };
}

function filterPolicy(name: string, agent: AgentSpec, tuning: FilterTuning, sp: SamplePath): SwitchyardPolicy {
  return new SwitchyardPolicy({ wasmPath: WASM, agent, tuning, seed: SEED, name, measuredRange: [sp.firstMeasured, sp.firstMeasured + sp.measured] });
}

function model(name: string, v: Partial<ChooseVariant>, agent: AgentSpec): ChooseModel {
  return new ChooseModel({ ...AS_BUILT, ...v }, { agent, seed: SEED, name });
}

/** The suggested filter change, as a model: backlog-only cost, re-base on new data, no rho cut-off. */
const PROPOSAL: Partial<ChooseVariant> = { prior: 'none', rebase: 'new-data', maxUtilization: 100 };

/** The filter's defaults as a model: p2c, re-base on new data, saturation = rho >= 0.95 and no free slot. */
const FILTER_DEFAULTS: Partial<ChooseVariant> = { ...PROPOSAL, picker: 'p2c', maxUtilization: 0.95, saturation: 'soft' };

const AGENT_1S: AgentSpec = { ...DEFAULT_AGENT, scrapeIntervalMs: 1000 };
const AGENT_250: AgentSpec = { ...DEFAULT_AGENT, scrapeIntervalMs: 250 };

/** --ratios: P99 ÷ LEAST_REQUEST of the filter's defaults on several sample paths, nothing else. */
async function ratiosOnly(fleets: string[], rhos: number[], paths: number): Promise<void> {
  const wasm = wasmBytes(WASM);
  log(`Switchyard P99 / LEAST_REQUEST (${MODE.name} mode), ${paths} sample paths from seed ${SEED}; filter sha256 ${wasm.sha256.slice(0, 16)}…`);
  for (const f of fleets) {
    if (f !== 'A' && f !== 'B') throw new Error(`--ratios takes fleets A and/or B, got ${f}`);
    const fleet = f === 'A' ? FLEET : MIXED_FLEET;
    for (const rho of rhos) {
      if (!(rho > 0 && rho < 1)) throw new Error(`--rhos must be in (0, 1), got ${rho}`);
      const rs: number[] = [];
      for (let k = 0; k < paths; k++) {
        const seed = SEED + 1000 * k;
        const sp = makeSamplePath(fleet, { rho, seed, warmupMs: MODE.warmupMs, measured: MODE.measured });
        const lr = summarize((await runPolicy(fleet, sp, new LeastRequest(seed))).responseMs).p99Ms;
        const p = new SwitchyardPolicy({ wasmPath: WASM, agent: AGENT_1S, tuning: {}, seed, name: 'switchyard', measuredRange: [sp.firstMeasured, sp.firstMeasured + sp.measured] });
        const sy = summarize((await runPolicy(fleet, sp, p)).responseMs).p99Ms;
        checkFilterRun(p, `switchyard (fleet ${f}, seed ${seed})`, rho);
        rs.push(sy / lr);
      }
      log(`fleet ${f} rho ${rho}: ${rs.map((x) => x.toFixed(3)).join(' ')} -> mean ${(rs.reduce((a, b) => a + b, 0) / rs.length).toFixed(3)}`);
    }
  }
  log(`total wall time ${((performance.now() - t0) / 1000).toFixed(1)} s`);
}

async function main(): Promise<void> {
  if (OPTS.ratios.length > 0) return ratiosOnly(OPTS.ratios, OPTS.rhos, OPTS.paths);
  const wasm = wasmBytes(WASM);
  log(`Switchyard routing-quality benchmark (${MODE.name} mode), seed ${SEED}`);
  log(`filter ${path.relative(ROOT, WASM)} sha256 ${wasm.sha256.slice(0, 16)}…  (${wasm.bytes.length} bytes)`);
  log(`fleet A (sections 1-5): ${fleetText(FLEET)}`);
  log(`fleet B (sections 5-7, mixed GPU generations): ${fleetText(MIXED_FLEET)}`);
  log(`agent model: scrape 1 s (and 250 ms), publish every ${DEFAULT_AGENT.publishIntervalMs} ms, window ${DEFAULT_AGENT.windowMs / 1000} s, concurrency ${DEFAULT_AGENT.concurrency}; filter: long poll 500 ms, refreshMs 20, 2 workers + main-thread VM`);
  log(`per (policy, rho): warm-up ${MODE.warmupMs / 1000} s virtual, then ${MODE.measured} measured requests`);
  log('');

  // ------------------------------------------------------------ 1 + 3: every rho
  for (const rho of RHOS) {
    const sp = makeSamplePath(FLEET, { rho, seed: SEED, warmupMs: MODE.warmupMs, measured: MODE.measured });
    const tRho = performance.now();
    const add = (r: { row: Row }): void => {
      rows.push(r.row);
    };
    add(await run(new RoundRobin(), sp, 'baseline'));
    add(await run(new RandomPolicy(SEED), sp, 'baseline'));
    add(await run(new LeastRequest(SEED), sp, 'baseline'));
    for (const [name, agent, tuning] of [
      ['switchyard', AGENT_1S, {}],
      ['switchyard@250ms', AGENT_250, {}],
      ['switchyard band', AGENT_1S, { picker: 'band' }],
      ['switchyard mg1', AGENT_1S, { model: 'mg1' }],
    ] as Array<[string, AgentSpec, FilterTuning]>) {
      const p = filterPolicy(name, agent, tuning, sp);
      const r = await run(p, sp, 'filter', agent.scrapeIntervalMs, { tuning });
      const lag = rhoLag(p.agent.scrapes, sp.warmupMs);
      r.row.extra = { ...r.row.extra, filter: p.stats, rhoLag: lag };
      diags[`${name}@${rho}`] = { stats: { ...p.stats }, rhoLag: lag };
      add(r);
      checkFilterRun(p, name, rho);
    }
    for (const [name, v, agent] of [
      ['model: as built', {}, AGENT_1S],
      ['model: +P-K /E[S]', { prior: 'pk' }, AGENT_1S],
      ['model: +rebase new data', { prior: 'pk', rebase: 'new-data' }, AGENT_1S],
      ['model: proposal', PROPOSAL, AGENT_1S],
      ['model: proposal + rho cut-off', { ...PROPOSAL, maxUtilization: 0.95 }, AGENT_1S],
      ['model: proposal + M/G/c prior', { ...PROPOSAL, prior: 'pk-c', rhoCap: 'clamp' }, AGENT_1S],
      ['model: proposal, n_snap@scrape', { ...PROPOSAL, rebase: 'scrape' }, AGENT_1S],
      ['model: proposal@250ms', PROPOSAL, AGENT_250],
    ] as Array<[string, Partial<ChooseVariant>, AgentSpec]>) {
      const m = model(name, v, agent);
      const r = await run(m, sp, 'model', agent.scrapeIntervalMs, { variant: { ...AS_BUILT, ...v }, fallback: m.fallback });
      add(r);
    }
    add(await run(new SedOracle(), sp, 'oracle'));
    const lr = rows.find((r) => r.rho === rho && r.policy === 'least-request')!;
    const sy = rows.find((r) => r.rho === rho && r.policy === 'switchyard')!;
    log(`rho=${rho}: lambda ${sp.lambdaPerS.toFixed(1)}/s, ${sp.arrivals.length} arrivals; LR P99 ${lr.summary.p99Ms.toFixed(0)} ms, switchyard P99 ${sy.summary.p99Ms.toFixed(0)} ms ` +
      `(${(sy.summary.p99Ms / lr.summary.p99Ms).toFixed(2)}x)  [${((performance.now() - tRho) / 1000).toFixed(1)} s]`);
  }
  log('');

  const MAIN = ['round-robin', 'random', 'least-request', 'switchyard', 'switchyard@250ms', 'switchyard band', 'switchyard mg1'];
  log('== 1. Response time (queue + service), measured requests; Switchyard = the compiled filter deciding in the host');
  log(mainTable(rows, RHOS, MAIN, ['switchyard', 'switchyard@250ms', 'switchyard band', 'switchyard mg1']));
  log('switchyard = the defaults (model conditional, picker p2c, maxUtilization 0.95); band = picker band (0.1); mg1 = model mg1 (the seed\'s M/G/1 term, units corrected).');
  log('');
  log(`round-robin and random send 1/8 of the traffic to every instance: the 0.35-speed one (5.8 % of the capacity) is`);
  log(`overloaded for rho > ${(0.35 / 6.05 * 8).toFixed(2)} ... its queue grows for the whole run, so their P99 depends on the run length.`);
  log('');

  log('== 2. Targets');
  const targets = ['switchyard', 'switchyard@250ms', 'switchyard band', 'switchyard mg1', 'model: proposal', 'model: proposal@250ms'].map((p) => checkTargets(rows, p, RHOS));
  for (const t of targets) log(targetText(t));
  log('(model: rows are the TypeScript model of a CHANGED choice, not the filter -- see section 3)');
  log('');

  log('== 3. Investigation: TS model of the choice, one change at a time (1 s scrape unless noted)');
  const INV = ['least-request', 'switchyard', 'model: as built', 'model: +P-K /E[S]', 'model: +rebase new data', 'model: proposal',
    'model: proposal + rho cut-off', 'model: proposal + M/G/c prior', 'model: proposal, n_snap@scrape', 'model: proposal@250ms', 'oracle-sed'];
  log('  as built: W = rho·E[S²]/(2(1−rho)) + E[S] + (q + n_now − n_snap)·E[S]/c, n_snap re-based at every adoption, rho >= 0.95 skipped, rho >= 1 infinite');
  log('  +P-K /E[S]: rho·E[S²]/(2·E[S]·(1−rho)) + E[S]   +rebase new data: n_snap re-based only when the instance\'s scrape time changed');
  log('  proposal: W = E[S] + (q + n_now − n_snap)·E[S]/c (no rho prior), re-base on new data, no rho cut-off (band 0.1 kept)');
  log('  + rho cut-off: proposal with the maxUtilization 0.95 skip;  + M/G/c prior: proposal + rho·E[S²]/(2c·E[S](1−min(rho,0.99)))');
  log(mainTable(rows, RHOS, INV, ['model: as built', 'model: proposal', 'model: proposal@250ms', 'oracle-sed']));
  log('');
  log('rho estimate vs truth at the scrapes (filter runs, scrape 1 s, after warm-up):');
  log('  (per scrape: estimate vs busy fraction over the last second; per measured decision: instances out by rho although they had a free slot)');
  log('  rho     mean|rho_est - util_1s|   rho_est>=0.95   rho_est>=1   instance idle   saturated skips/decision   decisions w/ free slot out   free slots out/decision');
  for (const rho of RHOS) {
    const d = diags[`switchyard@${rho}`];
    const l = d.rhoLag;
    const dec = d.stats.filterRouted + d.stats.fallback;
    log(`  ${String(rho).padEnd(6)}  ${l.meanAbsErr.toFixed(3).padStart(22)}   ${(l.fracRhoGe095 * 100).toFixed(1).padStart(12)} %   ${(l.fracRhoGe1 * 100).toFixed(1).padStart(8)} %   ${(l.fracIdle * 100).toFixed(1).padStart(11)} %   ${((d.stats.skipMetrics.saturated ?? 0) / dec).toFixed(2).padStart(22)}   ${(d.stats.rhoExcludedWithFreeSlot * 100).toFixed(1).padStart(24)} %   ${d.stats.freeSlotsExcludedPerDecision.toFixed(2).padStart(22)}`);
  }
  log('');

  // ------------------------------------------------------------ 4: herding
  log('== 4. Herding: stale snapshot burst (rho 0.7 base, scrape every 2 s, 3x arrival rate for 500 ms, 150 ms after a scrape round, every 20 s)');
  const herd = await herding();
  log(burstTable(herd.stats, FLEET));
  log('herd = max over instances of (share of the burst\'s requests / capacity share); 1.00 = spread exactly by capacity.');
  log('steady herd = the same per 2 s snapshot interval away from bursts. burst P50/P99: requests arriving in a burst or <= 2 s after it.');
  log('');

  // ------------------------------------------------------------ 5: several proxies (caveat)
  log(`== 5. Caveat: ${PROXIES} proxies in front of the fleet (arrivals spread at random; each proxy counts only its own in-flight requests; one agent)`);
  log(`   switchyard x${PROXIES}: ${PROXIES} embedded hosts running the compiled filter (2 workers each; @250ms: the agent scrapes every 250 ms); model: rows are the TS model`);
  const multi = await multiProxy(FLEET);
  log(mainTable(multi, MULTI_RHOS, multi.filter((r) => r.rho === MULTI_RHOS[0]).map((r) => r.policy), []).split('\n\n')[0]);
  log('fleet B:');
  const multiB = await multiProxy(MIXED_FLEET);
  log(mainTable(multiB, MULTI_RHOS, multiB.filter((r) => r.rho === MULTI_RHOS[0]).map((r) => r.policy), []).split('\n\n')[0]);
  log('(Envoy LEAST_REQUEST counts are per Envoy process too: with several proxies each one sees only its own requests)');
  log('');

  // ------------------------------------------------------------ 6: fleet B, every rho
  log('== 6. Fleet B (mixed GPU generations): the same comparison');
  const mixed = await mixedFleet();
  log(mainTable(mixed.rows, RHOS, ['round-robin', 'random', 'least-request', 'switchyard', 'switchyard@250ms', 'oracle-sed'], ['switchyard', 'switchyard@250ms', 'oracle-sed']));
  log(targetText(mixed.target));
  log('');

  // ------------------------------------------------------------ 7: seed spread at rho 0.85
  log(`== 7. Spread over sample paths: P99 ratio to LEAST_REQUEST at rho 0.85, ${SPREAD_SEEDS} seeds per fleet (${MODE.measured} measured requests each)`);
  const spread = await seedSpread();
  log(spreadTable(spread));
  log('oracle-sed = shortest expected delay with the exact queue of every instance and the true speeds: what a router that does not know request sizes can reach.');
  log('');

  const wallS = (performance.now() - t0) / 1000;
  log(`total wall time ${wallS.toFixed(1)} s (${MODE.name} mode)`);

  mkdirSync(OUT, { recursive: true });
  const doc = {
    meta: {
      benchmark: 'routing-quality (issue 3 §4)', mode: MODE.name, seed: SEED, date: new Date().toISOString(), node: process.version,
      wasm: { path: path.relative(ROOT, WASM), sha256: wasm.sha256, bytes: wasm.bytes.length },
      fleet: FLEET, capacityPerS: capacityPerS(FLEET), rhos: RHOS, warmupMs: MODE.warmupMs, measuredPerRun: MODE.measured,
      agent: { scrape1s: AGENT_1S, scrape250ms: AGENT_250 },
      pluginConfig: pluginConfig({}), bandPluginConfig: pluginConfig(BAND), proposal: { ...AS_BUILT, ...PROPOSAL },
      wallSeconds: Math.round(wallS * 10) / 10,
      quantiles: 'nearest rank on the measured requests; p99Batches = P99 of 5 consecutive batches (min, max)',
    },
    rows,
    targets,
    mixedFleet: { fleet: MIXED_FLEET, capacityPerS: capacityPerS(MIXED_FLEET), rows: mixed.rows, target: mixed.target },
    seedSpread: spread,
    herding: herd.doc,
    multiProxy: { proxies: PROXIES, rows: multi, rowsFleetB: multiB },
  };
  writeFileSync(path.join(OUT, 'routing.json'), JSON.stringify(doc, (_k, v) => (typeof v === 'number' && !Number.isFinite(v) ? String(v) : v), 2) + '\n');
  const svg = svgPlot(
    rows,
    [
      { name: 'round-robin' }, { name: 'random' }, { name: 'least-request' }, { name: 'switchyard' }, { name: 'switchyard@250ms' },
      { name: 'switchyard band', label: 'switchyard (picker band)' }, { name: 'switchyard mg1', label: 'switchyard (model mg1)' },
      { name: 'model: proposal', dashed: true, label: 'proposed choice (TS model)' },
      { name: 'oracle-sed', dashed: true, label: 'oracle SED (exact state)' },
    ],
    RHOS,
    `P99 vs load, ${FLEET.speeds.length}-instance heterogeneous fleet (${MODE.name}, ${MODE.measured} req/point)`,
  );
  writeFileSync(path.join(OUT, 'routing.svg'), svg);
  const svgB = svgPlot(
    mixed.rows,
    [
      { name: 'round-robin' }, { name: 'random' }, { name: 'least-request' }, { name: 'switchyard' }, { name: 'switchyard@250ms' },
      { name: 'oracle-sed', dashed: true, label: 'oracle SED (exact state)' },
    ],
    RHOS,
    `P99 vs load, fleet B (mixed GPU generations) (${MODE.name}, ${MODE.measured} req/point)`,
  );
  writeFileSync(path.join(OUT, 'routing-fleet-b.svg'), svgB);
  log(`wrote ${['routing.json', 'routing.svg', 'routing-fleet-b.svg'].map((f) => path.relative(ROOT, path.join(OUT, f))).join(', ')}`);
}

/** Fleet B at every rho: Envoy LB emulations, the filter (1 s and 250 ms scrapes), the oracle. */
async function mixedFleet(): Promise<{ rows: Row[]; target: TargetCheck }> {
  const out: Row[] = [];
  for (const rho of RHOS) {
    const sp = makeSamplePath(MIXED_FLEET, { rho, seed: SEED, warmupMs: MODE.warmupMs, measured: MODE.measured });
    const tRho = performance.now();
    out.push((await run(new RoundRobin(), sp, 'baseline', undefined, undefined, MIXED_FLEET)).row);
    out.push((await run(new RandomPolicy(SEED), sp, 'baseline', undefined, undefined, MIXED_FLEET)).row);
    out.push((await run(new LeastRequest(SEED), sp, 'baseline', undefined, undefined, MIXED_FLEET)).row);
    for (const [name, agent] of [['switchyard', AGENT_1S], ['switchyard@250ms', AGENT_250]] as Array<[string, AgentSpec]>) {
      const p = filterPolicy(name, agent, {}, sp);
      const r = await run(p, sp, 'filter', agent.scrapeIntervalMs, { filter: p.stats }, MIXED_FLEET);
      checkFilterRun(p, name, rho);
      out.push(r.row);
    }
    out.push((await run(new SedOracle(), sp, 'oracle', undefined, undefined, MIXED_FLEET)).row);
    const lr = out.find((r) => r.rho === rho && r.policy === 'least-request')!;
    const sy = out.find((r) => r.rho === rho && r.policy === 'switchyard')!;
    log(`fleet B rho=${rho}: LR P99 ${lr.summary.p99Ms.toFixed(0)} ms, switchyard P99 ${sy.summary.p99Ms.toFixed(0)} ms (${(sy.summary.p99Ms / lr.summary.p99Ms).toFixed(2)}x)  [${((performance.now() - tRho) / 1000).toFixed(1)} s]`);
  }
  return { rows: out, target: checkTargets(out, 'switchyard', RHOS) };
}

/** LEAST_REQUEST, the filter (defaults, 1 s scrape) and the oracle at rho 0.85 on several sample paths per fleet. */
async function seedSpread(): Promise<SpreadRow[]> {
  const out: SpreadRow[] = [];
  for (const [fleetName, fleet] of [['A', FLEET], ['B', MIXED_FLEET]] as Array<[string, FleetSpec]>) {
    for (let k = 0; k < SPREAD_SEEDS; k++) {
      const seed = SEED + 1000 * (k + 1);
      const sp = makeSamplePath(fleet, { rho: 0.85, seed, warmupMs: MODE.warmupMs, measured: MODE.measured });
      const lr = summarize((await runPolicy(fleet, sp, new LeastRequest(seed))).responseMs).p99Ms;
      const p = new SwitchyardPolicy({ wasmPath: WASM, agent: AGENT_1S, tuning: {}, seed, name: 'switchyard', measuredRange: [sp.firstMeasured, sp.firstMeasured + sp.measured] });
      const sy = summarize((await runPolicy(fleet, sp, p)).responseMs).p99Ms;
      checkFilterRun(p, `switchyard (fleet ${fleetName}, seed ${seed})`, 0.85);
      const or = summarize((await runPolicy(fleet, sp, new SedOracle())).responseMs).p99Ms;
      out.push({ fleet: fleetName, seed, lrP99: lr, switchyardP99: sy, oracleP99: or });
    }
  }
  return out;
}

function checkFilterRun(p: SwitchyardPolicy, name: string, rho: number): void {
  // every decision must have come from the filter
  if (p.stats.choiceMetric !== p.stats.filterRouted) throw new Error(`${name} rho ${rho}: switchyard.lb.choice.* = ${p.stats.choiceMetric} but ${p.stats.filterRouted} requests carried an endpoint`);
  if (p.stats.vmFailures) throw new Error(`${name}: ${p.stats.vmFailures} VM failures`);
}

const PROXIES = 4;
const MULTI_RHOS = [0.85, 0.95];

async function multiProxy(fleet: FleetSpec): Promise<Row[]> {
  const out: Row[] = [];
  for (const rho of MULTI_RHOS) {
    const sp = makeSamplePath(fleet, { rho, seed: SEED, warmupMs: MODE.warmupMs, measured: MODE.measured });
    const shared = (name: string, v: Partial<ChooseVariant>): MultiProxy =>
      new MultiProxy(name, (k, agent) => new ChooseModel({ ...AS_BUILT, ...v }, { agent: AGENT_1S, seed: SEED + k, name, sharedAgent: agent }), PROXIES,
        { spec: AGENT_1S, seed: SEED }, SEED);
    // [policy, kind, agent scrape interval]
    const policies: Array<[RoutingPolicy, Row['kind'], number?]> = [
      [new LeastRequest(SEED), 'baseline'],
      [new MultiProxy(`least-request x${PROXIES}`, (k) => new LocalLeastRequest(SEED + k), PROXIES, undefined, SEED), 'baseline'],
      [model('model: proposal', PROPOSAL, AGENT_1S), 'model'],
      [shared(`model: proposal x${PROXIES}`, PROPOSAL), 'model'],
      ...([[AGENT_1S, ''], [AGENT_250, '@250ms']] as Array<[AgentSpec, string]>).map(([spec, tag]): [RoutingPolicy, Row['kind'], number] => [
        new MultiProxy(`switchyard x${PROXIES}${tag}`, (k, agent) => new SwitchyardPolicy({
          wasmPath: WASM, agent: spec, seed: SEED + k, name: `switchyard x${PROXIES}${tag}`, sharedAgent: agent,
        }), PROXIES, { spec, seed: SEED }, SEED), 'filter', spec.scrapeIntervalMs]),
      [model('model: filter defaults', FILTER_DEFAULTS, AGENT_1S), 'model'],
      [shared(`model: filter defaults x${PROXIES}`, FILTER_DEFAULTS), 'model'],
      [model('model: p2c by capacity', { ...FILTER_DEFAULTS, weighted: true }, AGENT_1S), 'model'],
      [shared(`model: p2c by capacity x${PROXIES}`, { ...FILTER_DEFAULTS, weighted: true }), 'model'],
    ];
    for (const [p, kind, scrapeMs = AGENT_1S.scrapeIntervalMs] of policies) {
      out.push((await run(p, sp, kind, scrapeMs, { proxies: p instanceof MultiProxy ? PROXIES : 1 }, fleet)).row);
      if (p instanceof MultiProxy && kind === 'filter') {
        for (const m of p.members) checkFilterRun(m as SwitchyardPolicy, p.name, rho);
      }
    }
  }
  return out;
}

async function herding(): Promise<{ stats: BurstStats[]; doc: unknown }> {
  const rho = 0.7;
  const scrapeMs = 2000;
  const agent: AgentSpec = { ...DEFAULT_AGENT, scrapeIntervalMs: scrapeMs };
  const lambda = rho * capacityPerS(FLEET);
  const everyMs = 20_000;
  const bursts: Burst[] = [];
  for (let k = 0; k < MODE.bursts; k++) bursts.push({ atMs: MODE.warmupMs + 5000 + k * everyMs + 150, durationMs: 500, factor: 3 });
  const measured = Math.ceil(((MODE.bursts * everyMs) / 1000) * lambda * 1.02 + MODE.bursts * 0.5 * 2 * lambda);
  const sp = makeSamplePath(FLEET, { rho, seed: SEED + 7, warmupMs: MODE.warmupMs, measured, bursts });
  const out: BurstStats[] = [];
  const rowsOut: unknown[] = [];
  const policies: Array<[RoutingPolicy, Row['kind']]> = [
    [new LeastRequest(SEED), 'baseline'],
    [filterPolicy('switchyard', agent, {}, sp), 'filter'],
    [filterPolicy('switchyard band', agent, BAND, sp), 'filter'],
    [model('model: as built', {}, agent), 'model'],
    [model('model: as built, no feedback', { feedback: false }, agent), 'model'],
    [model('model: proposal', PROPOSAL, agent), 'model'],
    [model('model: proposal, no feedback', { ...PROPOSAL, feedback: false }, agent), 'model'],
    [new SedOracle(), 'oracle'],
  ];
  for (const [p, kind] of policies) {
    const { row, res } = await run(p, sp, kind, scrapeMs);
    const s = burstStats(p.name, FLEET, res, bursts, sp.firstMeasured, scrapeMs);
    out.push(s);
    rowsOut.push({ ...row, burst: s, filter: p instanceof SwitchyardPolicy ? p.stats : undefined });
  }
  return { stats: out, doc: { rho, scrapeMs, bursts, measured, rows: rowsOut } };
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
