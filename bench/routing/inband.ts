// In-band evidence benchmark (issue 9 §4): scenarios where learning from every response matters,
// with the reference balancers that do (peak EWMA, Envoy LEAST_REQUEST, Envoy client-side WRR
// with ORCA) beside the compiled filter, round-robin, random and the oracle.
//
//   npx tsx bench/routing/inband.ts --quick [--scenario slow|blackhole|proxies|all] [--orca off|on|both]
//        [--ttft 0.1] [--seed N] [--wasm build/switchyard.wasm] [--out build/bench] [--only switchyard]
//
// Scenarios (virtual time; every policy of a scenario sees the same sample path; quick mode:
// 2 sample paths for slow / blackhole, 5 for proxies, ~20-60 s; full: 5 and 10, rho 0.85 too):
//  slow      an instance 10x slower for 30 s, no change in load, then normal again, in a fleet
//            with little queueing (8 equal instances, c = 4, rho 0.3);
//  blackhole an instance answers every request 503 after 2 ms for 30 s (it looks idle), same
//            fleet at rho 0.6;
//  proxies   4 proxies in front of fleet A, one carrying 70 % of the arrivals (and uniform for
//            comparison), rho 0.95, agent scrape 1 s.
// --only NAME[,NAME]: the proxies scenario runs only the policies whose name starts with one of
// these (least-request x4, the denominator, always runs): a filter variant in a few minutes.
// --orca on: the simulated instances attach an ORCA `endpoint-load-metrics` header (TEXT) to
// every answer the filter sees (both: rows with and without); Envoy's WRR always gets it.
// Prints tables and the issue's targets (met / not met); writes build/bench/routing-inband.json
// and SVG timelines of the sick instance's traffic share (routing-slow.svg, routing-blackhole.svg).
import { mkdirSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { DEFAULT_AGENT, type AgentSpec } from './agent-model';
import { LocalLeastRequest, MultiProxy } from './choose-model';
import {
  capacityPerS, DEFAULT_FLEET, type Episode, type FleetSpec, LeastRequest, makeSamplePath, RandomPolicy, RoundRobin, type RoutingPolicy, type RunOptions,
  runPolicy, type RunResult, type SamplePath, summarize, type Summary,
} from './des';
import { episodeStats, type EpisodeStats, fairShare, shareSeries, shareSvg } from './episodes';
import { ClientSideWrr, ENVOY_WRR_DEFAULTS, LINKERD_PEAK_EWMA, PeakEwma } from './inband-reference';
import { SedOracle } from './reference';
import { SwitchyardPolicy, wasmBytes } from './switchyard';
import { cli, flag, int, list, num, oneOf, str } from '../cli';

const ROOT = path.resolve(__dirname, '../..');


/** 8 equal instances, c = 4, lognormal service mean 80 ms sigma 1.1: capacity 400 req/s. */
export const EQUAL_FLEET: FleetSpec = { speeds: [1, 1, 1, 1, 1, 1, 1, 1], slots: 4, meanMs: 80, sigma: 1.1 };

export interface ScenarioSpec {
  name: string;
  fleet: FleetSpec;
  rho: number;
  warmupMs: number;
  episode: Episode;
  /** the window after recovery that is measured (ms) */
  afterMs: number;
}

/** Issue 9 §2: 10x slower for 30 s without load change, then normal (the sick instance: #2). */
export const SLOW_SCENARIO: ScenarioSpec = {
  name: 'slow', fleet: EQUAL_FLEET, rho: 0.3, warmupMs: 20_000, afterMs: 30_000,
  episode: { kind: 'slow', inst: 2, fromMs: 30_000, toMs: 60_000, factor: 10 },
};

/** A fast-failing instance (503 after 2 ms) for 30 s: it looks idle to LEAST_REQUEST. */
export const BLACKHOLE_SCENARIO: ScenarioSpec = {
  name: 'blackhole', fleet: EQUAL_FLEET, rho: 0.6, warmupMs: 20_000, afterMs: 30_000,
  episode: { kind: 'error', inst: 2, fromMs: 30_000, toMs: 60_000, errorMs: 2, status: 503 },
};

/** The arrivals measured in a scenario: from warm-up to the end of the after-window. */
export function scenarioPath(s: ScenarioSpec, seed: number): SamplePath {
  const endMs = s.episode.toMs + s.afterMs;
  const lambda = s.rho * capacityPerS(s.fleet);
  return makeSamplePath(s.fleet, { rho: s.rho, seed, warmupMs: s.warmupMs, measured: Math.round((lambda * (endMs - s.warmupMs)) / 1000), tail: 200 });
}

export interface ScenarioRow {
  policy: string;
  summary: Summary;
  /** summary over 2xx answers only */
  ok: Summary;
  stats: EpisodeStats;
  wallMs: number;
  orca: boolean;
}

export function scenarioRow(s: ScenarioSpec, p: RoutingPolicy, r: RunResult, orca: boolean): ScenarioRow {
  const okRt = r.responseMs.filter((_, i) => r.status[i] === 200);
  return { policy: p.name, summary: summarize(r.responseMs), ok: summarize(okRt), stats: episodeStats(r, s.fleet, s.episode, s.afterMs), wallMs: Math.round(r.wallMs), orca };
}

const ms = (v: number | null): string => (v === null ? 'never' : v >= 10_000 ? `${(v / 1000).toFixed(1)} s` : `${Math.round(v)} ms`);

export function scenarioTable(rows: ScenarioRow[], withErrors: boolean, afterMs: number): string {
  const w = Math.max(...rows.map((r) => r.policy.length), 10) + 2;
  const cols = ['P50', 'P99', 'P99.9', 'sick: during (x fair)', 'react', `after ${afterMs / 1000} s (x fair)`, 'back to 1/2 fair', ...(withErrors ? ['errors'] : [])];
  const widths = [8, 9, 9, 23, 9, 22, 17, 8];
  const head = 'policy'.padEnd(w) + cols.map((c, i) => c.padStart(widths[i])).join('');
  const out = [head, '-'.repeat(head.length)];
  for (const r of rows) {
    const q = withErrors ? r.ok : r.summary;
    const st = r.stats;
    const cells = [
      ms(q.p50Ms), ms(q.p99Ms), ms(q.p999Ms),
      `${st.sentDuring} (${(st.sentDuring / st.fairDuring).toFixed(2)})`, ms(st.reactMs),
      `${st.sentAfter} (${(st.sentAfter / st.fairAfter).toFixed(2)})`, ms(st.recoverMs),
      ...(withErrors ? [String(st.errorsDuring)] : []),
    ];
    out.push(r.policy.padEnd(w) + cells.map((c, i) => c.padStart(widths[i])).join(''));
  }
  return out.join('\n');
}

/** Over several sample paths: sums of the episode counts, the recovery time of each path. */
export function aggregateTable(per: ScenarioRow[][], withErrors: boolean): string {
  const names = per[0].map((r) => r.policy);
  const w = Math.max(...names.map((n) => n.length), 10) + 2;
  const head = 'policy'.padEnd(w) + 'sick: during (x fair)'.padStart(23) + 'after (x fair)'.padStart(20) + '   back to 1/2 fair, per path' + (withErrors ? '   errors' : '');
  const out = [head, '-'.repeat(head.length)];
  for (const name of names) {
    const rs = per.map((rows) => rows.find((r) => r.policy === name)!);
    const sum = (f: (r: ScenarioRow) => number): number => rs.reduce((a, r) => a + f(r), 0);
    out.push(name.padEnd(w) +
      `${sum((r) => r.stats.sentDuring)} (${(sum((r) => r.stats.sentDuring) / sum((r) => r.stats.fairDuring)).toFixed(2)})`.padStart(23) +
      `${sum((r) => r.stats.sentAfter)} (${(sum((r) => r.stats.sentAfter) / sum((r) => r.stats.fairAfter)).toFixed(2)})`.padStart(20) +
      `   ${rs.map((r) => ms(r.stats.recoverMs)).join(', ')}`.padEnd(29) +
      (withErrors ? String(sum((r) => r.stats.errorsDuring)).padStart(9) : ''));
  }
  return out.join('\n');
}

/** Worst (largest) recovery time over paths; null if any path never recovered. */
function worstRecovery(rs: ScenarioRow[]): number | null {
  let worst = 0;
  for (const r of rs) {
    if (r.stats.recoverMs === null) return null;
    worst = Math.max(worst, r.stats.recoverMs);
  }
  return worst;
}

export interface Target {
  scenario: string;
  what: string;
  met: boolean;
  detail: string;
}

const targetLine = (t: Target): string => `  [${t.met ? 'met' : 'NOT MET'}] ${t.scenario}: ${t.what} -- ${t.detail}`;

// ---------------------------------------------------------------- main

interface Cli {
  QUICK: boolean;
  SEED: number;
  WASM: string;
  OUT: string;
  SCEN: string;
  ORCA: string;
  TTFT: number;
  /** proxies scenario: run only policies whose name starts with one of these (least-request x4 always) */
  ONLY: string[];
  MODE: { name: string; seeds: number; proxySeeds: number; proxyRhos: number[]; proxyMeasured: number; proxyWarmupMs: number };
}

const AGENT_1S: AgentSpec = { ...DEFAULT_AGENT, scrapeIntervalMs: 1000 };
const AGENT_250: AgentSpec = { ...DEFAULT_AGENT, scrapeIntervalMs: 250 };

function checkFilter(p: SwitchyardPolicy, what: string): void {
  if (p.stats.choiceMetric !== p.stats.filterRouted) throw new Error(`${what}: switchyard.lb.choice.* = ${p.stats.choiceMetric} but ${p.stats.filterRouted} requests carried an endpoint`);
  if (p.stats.vmFailures) throw new Error(`${what}: ${p.stats.vmFailures} VM failures`);
}

async function main(c: Cli): Promise<void> {
  const log = (s = ''): void => console.log(s);
  const t0 = performance.now();
  const wasm = wasmBytes(c.WASM);
  log(`Switchyard in-band evidence benchmark (issue 9 §4), ${c.MODE.name} mode, seed ${c.SEED}`);
  log(`filter ${path.relative(ROOT, c.WASM)} sha256 ${wasm.sha256.slice(0, 16)}…; response headers at ttft = ${c.TTFT} × service; filter ORCA header: ${c.ORCA}`);
  log(`references: peak-ewma = Finagle/linkerd (tau ${LINKERD_PEAK_EWMA.decayMs / 1000} s, default RTT ${LINKERD_PEAK_EWMA.defaultRttMs} ms, P2C, RTT to response headers); least-request = Envoy LEAST_REQUEST choice_count 2;`);
  log(`  envoy-wrr (ORCA) = Envoy ClientSideWeightedRoundRobin defaults (blackout ${ENVOY_WRR_DEFAULTS.blackoutPeriodMs / 1000} s, update ${ENVOY_WRR_DEFAULTS.weightUpdatePeriodMs / 1000} s, expiration ${ENVOY_WRR_DEFAULTS.weightExpirationPeriodMs / 1000} s, error penalty ${ENVOY_WRR_DEFAULTS.errorUtilizationPenalty}) fed by the instances' ORCA reports; oracle-sed knows the episode`);
  log('');
  const doc: Record<string, unknown> = { meta: { mode: c.MODE.name, seed: c.SEED, ttftFraction: c.TTFT, orca: c.ORCA, wasm: { sha256: wasm.sha256 }, date: new Date().toISOString() } };
  const targets: Target[] = [];
  const written: string[] = ['routing-inband.json'];
  mkdirSync(c.OUT, { recursive: true });
  const orcaModes = c.ORCA === 'both' ? [false, true] : [c.ORCA === 'on'];

  const runScenario = async (s: ScenarioSpec): Promise<ScenarioRow[][]> => {
    const perSeed: ScenarioRow[][] = [];
    for (let k = 0; k < c.MODE.seeds; k++) {
      const seed = c.SEED + 1000 * k;
      const sp = scenarioPath(s, seed);
      const mr: [number, number] = [sp.firstMeasured, sp.firstMeasured + sp.measured];
      const rows: ScenarioRow[] = [];
      const series: Array<{ name: string; pts: Array<[number, number]> }> = [];
      const policies: Array<[RoutingPolicy, boolean]> = [
        [new RoundRobin(), false], [new RandomPolicy(seed), false], [new LeastRequest(seed), false],
        [new PeakEwma(seed), false], [new ClientSideWrr(seed), true],
      ];
      for (const orca of orcaModes) {
        const tag = orcaModes.length > 1 && orca ? ' +ORCA hdr' : '';
        policies.push([new SwitchyardPolicy({ wasmPath: c.WASM, agent: AGENT_1S, seed, name: `switchyard${tag}`, measuredRange: mr }), orca]);
        policies.push([new SwitchyardPolicy({ wasmPath: c.WASM, agent: AGENT_250, seed, name: `switchyard@250ms${tag}`, measuredRange: mr }), orca]);
      }
      policies.push([new SedOracle([s.episode]), false]);
      for (const [p, orca] of policies) {
        const opts: RunOptions = { episodes: [s.episode], ttftFraction: c.TTFT, orca };
        const r = await runPolicy(s.fleet, sp, p, opts);
        if (p instanceof SwitchyardPolicy) checkFilter(p, `${s.name} ${p.name}`);
        rows.push(scenarioRow(s, p, r, orca));
        if (k === 0) series.push({ name: p.name, pts: shareSeries(r, s.episode.inst, s.episode.fromMs - 10_000, s.episode.toMs + s.afterMs) });
      }
      perSeed.push(rows);
      if (k === 0) {
        const svg = shareSvg(series, s.episode, fairShare(s.fleet, s.episode.inst),
          s.name === 'slow' ? `Instance 10x slower for 30 s (rho ${s.rho}): its traffic share` : `Instance answering 503 in 2 ms for 30 s (rho ${s.rho}): its traffic share`);
        writeFileSync(path.join(c.OUT, `routing-${s.name}.svg`), svg);
        written.push(`routing-${s.name}.svg`);
      }
    }
    return perSeed;
  };

  if (c.SCEN === 'slow' || c.SCEN === 'all') {
    const s = SLOW_SCENARIO;
    const t = performance.now();
    const per = await runScenario(s);
    log(`== A. Slow instance: #${s.episode.inst} ${s.episode.factor}x slower from ${s.episode.fromMs / 1000} s to ${s.episode.toMs / 1000} s, no load change; ${s.fleet.speeds.length} equal instances c=${s.fleet.slots}, rho ${s.rho} (${(s.rho * capacityPerS(s.fleet)).toFixed(0)} req/s)  [${((performance.now() - t) / 1000).toFixed(1)} s]`);
    log(`sample path 1 (seed ${c.SEED}):`);
    log(scenarioTable(per[0], false, s.afterMs));
    log('P50/P99/P99.9: all measured requests (warm-up end to 30 s after recovery). sick: requests routed to the sick instance during the episode');
    log('(x its fair share); react: end of the first 1 s window in which it got < 1/2 its fair share; after: the 30 s after recovery;');
    log('back to 1/2 fair: end of the first 1 s window after recovery with >= 1/2 its fair share (never = not within 30 s).');
    log(`over ${per.length} sample paths (seeds ${per.map((_, k) => c.SEED + 1000 * k).join(', ')}):`);
    log(aggregateTable(per, false));
    const pick = (name: string): ScenarioRow[] => per.map((rows) => rows.find((r) => r.policy === name)!);
    const sy = pick('switchyard');
    const pe = pick('peak-ewma');
    const during = (rs: ScenarioRow[]): number => rs.reduce((a, r) => a + r.stats.sentDuring, 0);
    targets.push({ scenario: 'slow', what: `fewer requests to the sick instance than peak EWMA (during the episode, ${per.length} paths)`, met: during(sy) < during(pe), detail: `switchyard ${during(sy)}, peak-ewma ${during(pe)}` });
    const wr = worstRecovery(sy);
    targets.push({ scenario: 'slow', what: 'back to half its fair share within 10 s of recovery (every path)', met: wr !== null && wr <= 10_000, detail: `switchyard ${sy.map((r) => ms(r.stats.recoverMs)).join(', ')} (peak-ewma ${pe.map((r) => ms(r.stats.recoverMs)).join(', ')})` });
    doc.slow = { spec: s, rows: per };
    log('');
  }

  if (c.SCEN === 'blackhole' || c.SCEN === 'all') {
    const s = BLACKHOLE_SCENARIO;
    const t = performance.now();
    const per = await runScenario(s);
    log(`== B. Black hole: #${s.episode.inst} answers ${s.episode.status} after ${s.episode.errorMs} ms from ${s.episode.fromMs / 1000} s to ${s.episode.toMs / 1000} s; ${s.fleet.speeds.length} equal instances c=${s.fleet.slots}, rho ${s.rho} (${(s.rho * capacityPerS(s.fleet)).toFixed(0)} req/s)  [${((performance.now() - t) / 1000).toFixed(1)} s]`);
    log(`sample path 1 (seed ${c.SEED}):`);
    log(scenarioTable(per[0], true, s.afterMs));
    log('P50/P99/P99.9 over 2xx answers; errors = 503 answers (requests sent to the black hole during the episode).');
    log(`over ${per.length} sample paths (seeds ${per.map((_, k) => c.SEED + 1000 * k).join(', ')}):`);
    log(aggregateTable(per, true));
    const errs = (name: string): number => per.reduce((a, rows) => a + rows.find((r) => r.policy === name)!.stats.errorsDuring, 0);
    targets.push({ scenario: 'blackhole', what: `fewer errors than LEAST_REQUEST (${per.length} paths)`, met: errs('switchyard') < errs('least-request'), detail: `switchyard ${errs('switchyard')}, least-request ${errs('least-request')}` });
    doc.blackhole = { spec: s, rows: per };
    log('');
  }

  if (c.SCEN === 'proxies' || c.SCEN === 'all') {
    const PROXIES = 4;
    const SKEW = [0.7, 0.1, 0.1, 0.1];
    const t = performance.now();
    const out: Array<{ rho: number; seed: number; split: string; policy: string; summary: Summary; wallMs: number }> = [];
    const seeds = Array.from({ length: c.MODE.proxySeeds }, (_, k) => c.SEED + 1000 * k);
    for (const rho of c.MODE.proxyRhos) for (const seed of seeds) {
      const sp = makeSamplePath(DEFAULT_FLEET, { rho, seed, warmupMs: c.MODE.proxyWarmupMs, measured: c.MODE.proxyMeasured });
      for (const [splitName, split] of [['70/10/10/10', SKEW], ['uniform', undefined]] as Array<[string, number[] | undefined]>) {
        const multi = (name: string, make: (k: number, agent: Parameters<ConstructorParameters<typeof MultiProxy>[1]>[1]) => RoutingPolicy, agent?: AgentSpec): MultiProxy =>
          new MultiProxy(name, make, PROXIES, agent ? { spec: agent, seed } : undefined, seed, split);
        const policies: Array<[RoutingPolicy, boolean]> = [
          [multi(`least-request x${PROXIES}`, (k) => new LocalLeastRequest(seed + k)), false],
          [multi(`peak-ewma x${PROXIES}`, (k) => new PeakEwma(seed + k)), false],
          [multi(`envoy-wrr (ORCA) x${PROXIES}`, (k) => new ClientSideWrr(seed + k)), true],
          ...orcaModes.map((orca): [RoutingPolicy, boolean] => [multi(`switchyard x${PROXIES}${orcaModes.length > 1 && orca ? ' +ORCA hdr' : ''}`, (k, agent) => new SwitchyardPolicy({
            wasmPath: c.WASM, agent: AGENT_1S, seed: seed + k, name: `switchyard x${PROXIES}`, sharedAgent: agent,
          }), AGENT_1S), orca]),
          [new LeastRequest(seed), false],
          [new SedOracle(), false],
        ];
        for (const [p, orca] of policies) {
          if (c.ONLY.length > 0 && p.name !== `least-request x${PROXIES}` && !c.ONLY.some((o) => p.name.startsWith(o))) continue;
          const r = await runPolicy(DEFAULT_FLEET, sp, p, { ttftFraction: c.TTFT, orca });
          if (p instanceof MultiProxy) for (const m of p.members) if (m instanceof SwitchyardPolicy) checkFilter(m, `${p.name} rho ${rho}`);
          out.push({ rho, seed, split: splitName, policy: p.name, summary: summarize(r.responseMs), wallMs: Math.round(r.wallMs) });
        }
      }
    }
    log(`== C. ${PROXIES} proxies, one carrying 70 % of the arrivals (and uniform); fleet A (${DEFAULT_FLEET.speeds.join(', ')}; c=${DEFAULT_FLEET.slots}), agent scrape 1 s, ${seeds.length} sample paths (seeds ${seeds.join(', ')})  [${((performance.now() - t) / 1000).toFixed(1)} s]`);
    const names = [...new Set(out.map((r) => r.policy))];
    const w = Math.max(...names.map((n) => n.length)) + 2;
    const head = 'rho   split        ' + 'policy'.padEnd(w) + 'P50 / P99 / P99.9 (path 1)'.padStart(28) + '   P99 / least-request x4: per path -> mean';
    log(head);
    log('-'.repeat(head.length));
    const ratios = (rho: number, split: string, name: string): number[] => seeds.map((seed) => {
      const a = out.find((x) => x.rho === rho && x.seed === seed && x.split === split && x.policy === name)!;
      const lr = out.find((x) => x.rho === rho && x.seed === seed && x.split === split && x.policy === `least-request x${PROXIES}`)!;
      return a.summary.p99Ms / lr.summary.p99Ms;
    });
    const mean = (v: number[]): number => v.reduce((a, b) => a + b, 0) / v.length;
    for (const rho of c.MODE.proxyRhos) for (const split of ['70/10/10/10', 'uniform']) for (const name of names) {
      const r = out.find((x) => x.rho === rho && x.seed === seeds[0] && x.split === split && x.policy === name)!;
      const rs = ratios(rho, split, name);
      log(`${String(rho).padEnd(6)}${split.padEnd(13)}${name.padEnd(w)}${`${ms(r.summary.p50Ms)} / ${ms(r.summary.p99Ms)} / ${ms(r.summary.p999Ms)}`.padStart(28)}   ${rs.map((x) => x.toFixed(3)).join(' ')} -> ${mean(rs).toFixed(3)}`);
    }
    log('least-request x4 = Envoy LEAST_REQUEST in each proxy on its own active requests; least-request = one proxy, exact counts (a bound for LR).');
    for (const split of ['70/10/10/10', 'uniform']) {
      const rs = ratios(0.95, split, `switchyard x${PROXIES}`);
      const above = rs.filter((x) => x > 1).length;
      targets.push({
        scenario: 'proxies', what: `4 proxies (${split === 'uniform' ? 'uniform split' : '70 % on one'}), 1 s scrape, rho 0.95: P99 <= 1.0x LEAST_REQUEST x4 (mean of ${seeds.length} paths)`,
        met: mean(rs) <= 1.0, detail: `${mean(rs).toFixed(3)}x [${Math.min(...rs).toFixed(3)}, ${Math.max(...rs).toFixed(3)}], ${above} of ${rs.length} paths above 1.0`,
      });
    }
    doc.proxies = { split: SKEW, rows: out };
    log('');
  }

  log('== Targets (issue 9 §4; the filter as built is expected to miss some)');
  for (const tg of targets) log(targetLine(tg));
  doc.targets = targets;
  const wallS = (performance.now() - t0) / 1000;
  log('');
  log(`total wall time ${wallS.toFixed(1)} s (${c.MODE.name} mode)`);
  writeFileSync(path.join(c.OUT, 'routing-inband.json'), JSON.stringify(doc, (_k, v) => (typeof v === 'number' && !Number.isFinite(v) ? String(v) : v), 2) + '\n');
  log(`wrote ${written.map((f) => path.relative(ROOT, path.join(c.OUT, f))).join(', ')}`);
}

if (require.main === module) {
  const o = cli('npx tsx bench/routing/inband.ts', 'In-band evidence benchmark: slowdown, black hole, proxies; the reference balancers beside the filter.', {
    quick: flag('fewer and shorter sample paths'),
    seed: int(20261129, 'seed of the first sample path'),
    wasm: str('build/switchyard.wasm', 'filter module'),
    out: str('build/bench', 'output directory'),
    scenario: oneOf(['slow', 'blackhole', 'proxies', 'all'], 'all', 'scenario'),
    orca: oneOf(['off', 'on', 'both'], 'off', 'ORCA endpoint-load-metrics on the answers the filter sees'),
    ttft: num(0.1, 'response headers at this share of the service time', 0),
    only: list('', 'proxies scenario: only the policies whose name starts with one of these'),
  });
  const QUICK = o.quick, SEED = o.seed, SCEN = o.scenario, ORCA = o.orca, TTFT = o.ttft, ONLY = o.only;
  const WASM = path.resolve(ROOT, o.wasm);
  const OUT = path.resolve(ROOT, o.out);
  const MODE = QUICK
    ? { name: 'quick', seeds: 2, proxySeeds: 5, proxyRhos: [0.95], proxyMeasured: 8000, proxyWarmupMs: 20_000 }
    : { name: 'full', seeds: 5, proxySeeds: 10, proxyRhos: [0.85, 0.95], proxyMeasured: 50_000, proxyWarmupMs: 30_000 };
  main({ QUICK, SEED, WASM, OUT, SCEN, ORCA, TTFT, ONLY, MODE }).catch((e) => {
    console.error(e);
    process.exit(1);
  });
}
