// The robustness matrix (issue 21 §2-3): cells of (service-time law, concurrency per instance,
// episode, proxies, agent scrape, load), every policy on the same sample paths, and the gate.
// Cell design and reasons: bench/robustness/README.md.
import type { Episode, FleetSpec } from '../routing/des';
import { runPolicy } from '../routing/des';
import { wasmBytes } from '../routing/switchyard';
import { agentSpec, checkFilters, lawName, makePath, makePolicy, mean, measuredErrors, okSummary, p99ToSuccess, type PolicyKey, type ServiceLaw, spreadOf } from './common';

export type EpisodeKind = 'none' | 'slow' | 'blackhole' | 'stall';
export const EPISODE_KINDS: EpisodeKind[] = ['none', 'slow', 'blackhole', 'stall'];
export const LAWS: ServiceLaw[] = [
  { kind: 'lognormal', sigma: 0.5 }, { kind: 'lognormal', sigma: 1.1 }, { kind: 'lognormal', sigma: 2 },
  { kind: 'bimodal' }, { kind: 'pareto', alpha: 1.5 }, { kind: 'fixed' },
];
export const CONCURRENCIES = [1, 4, 64, 1000];
export const RHOS = [0.5, 0.85, 0.95];
/** c at or above this: ample concurrency, nothing queues; one load level (AMPLE_RATE) */
export const AMPLE_C = 1000;

export interface Cell {
  id: string;
  law: ServiceLaw;
  c: number;
  /** offered load / capacity (NaN: ample concurrency, AMPLE_RATE req/s) */
  rho: number;
  episode: EpisodeKind;
  proxies: number;
  scrapeMs: number;
  /** which block of the design it belongs to (README) */
  block: string;
}

export interface Timing {
  warmupMs: number;
  /** episode start */
  fromMs: number;
  /** slow / black hole duration; the stall lasts stallMs */
  episodeMs: number;
  stallMs: number;
  /** measured after the episode ends (recovery) */
  afterMs: number;
  /** measured span of a cell without episode (after warm-up) */
  noneMs: number;
}

export const TIMING: Timing = { warmupMs: 15_000, fromMs: 20_000, episodeMs: 15_000, stallMs: 10_000, afterMs: 15_000, noneMs: 25_000 };
export const QUICK_TIMING: Timing = { warmupMs: 12_000, fromMs: 15_000, episodeMs: 10_000, stallMs: 5_000, afterMs: 10_000, noneMs: 15_000 };

export const N_INSTANCES = 8;
/** Fleet request rate near capacity is ~ TARGET_CAPACITY req/s whatever c: E[S] = N c / capacity. */
export const TARGET_CAPACITY = 400;
/** ample concurrency: 400 req/s at E[S] 80 ms, ~4 in flight per instance */
export const AMPLE_RATE = 400;
export const AMPLE_MEAN_MS = 80;

export function fleetOf(cell: Cell): FleetSpec {
  const meanMs = cell.c >= AMPLE_C ? AMPLE_MEAN_MS : (1000 * N_INSTANCES * cell.c) / TARGET_CAPACITY;
  return { speeds: Array(N_INSTANCES).fill(1), slots: cell.c, meanMs, sigma: cell.law.kind === 'lognormal' ? cell.law.sigma : NaN };
}

export function lambdaOf(cell: Cell, f: FleetSpec): number {
  if (cell.c >= AMPLE_C) return AMPLE_RATE;
  return (cell.rho * N_INSTANCES * cell.c * 1000) / f.meanMs;
}

/** The sick instance is #2. Slow: 10x, no load change; black hole: 503 in 2 ms; stall: no answers. */
export function episodesOf(cell: Cell, t: Timing): Episode[] {
  const inst = 2;
  switch (cell.episode) {
    case 'none': return [];
    case 'slow': return [{ kind: 'slow', inst, fromMs: t.fromMs, toMs: t.fromMs + t.episodeMs, factor: 10 }];
    case 'blackhole': return [{ kind: 'error', inst, fromMs: t.fromMs, toMs: t.fromMs + t.episodeMs, errorMs: 2, status: 503 }];
    case 'stall': return [{ kind: 'stall', inst, fromMs: t.fromMs, toMs: t.fromMs + t.stallMs }];
  }
}

export function endOf(cell: Cell, t: Timing): number {
  const e = episodesOf(cell, t)[0];
  return e ? e.toMs + t.afterMs : t.warmupMs + t.noneMs;
}

const cellId = (law: ServiceLaw, c: number, rho: number, ep: EpisodeKind, px: number, scrape: number): string =>
  `${lawName(law).replace(/ /g, '')}/c${c}/${c >= AMPLE_C ? 'ample' : `r${rho}`}/${ep}/p${px}/s${scrape}`;

function mk(block: string, law: ServiceLaw, c: number, rho: number, episode: EpisodeKind, proxies: number, scrapeMs: number): Cell {
  const r = c >= AMPLE_C ? NaN : rho;
  return { id: cellId(law, c, r, episode, proxies, scrapeMs), law, c, rho: r, episode, proxies, scrapeMs, block };
}

const BASE_LAW: ServiceLaw = { kind: 'lognormal', sigma: 1.1 };

/**
 * The covering design (README): A concurrency x episode (every c with every episode); B proxies x
 * load; C every service law, quiet and with a slowdown; D the 250 ms scrape where staleness matters
 * (a slowdown at c 4 and at ample c, a black hole, and 4 proxies at rho 0.95). Defaults elsewhere:
 * lognormal sigma 1.1, 1 proxy, scrape 1 s, rho 0.85.
 */
export function defaultCells(): Cell[] {
  const cells: Cell[] = [];
  const add = (x: Cell): void => {
    if (!cells.some((y) => y.id === x.id)) cells.push(x);
  };
  for (const c of CONCURRENCIES) for (const ep of EPISODE_KINDS) add(mk('A c x episode', BASE_LAW, c, 0.85, ep, 1, 1000));
  for (const px of [1, 4]) for (const rho of RHOS) add(mk('B proxies x rho', BASE_LAW, 4, rho, 'none', px, 1000));
  for (const law of LAWS) add(mk('C law', law, 4, 0.85, 'none', 1, 1000));
  for (const law of LAWS) add(mk('C law', law, AMPLE_C, NaN, 'slow', 1, 1000));
  add(mk('D scrape', BASE_LAW, 4, 0.85, 'slow', 1, 250));
  add(mk('D scrape', BASE_LAW, AMPLE_C, NaN, 'slow', 1, 250));
  add(mk('D scrape', BASE_LAW, 4, 0.85, 'blackhole', 1, 250));
  add(mk('D scrape', BASE_LAW, 4, 0.95, 'none', 4, 250));
  return cells;
}

/** The whole cross product (loads only where queueing exists). Hours on 2 cores. */
export function fullCells(): Cell[] {
  const cells: Cell[] = [];
  for (const law of LAWS) for (const c of CONCURRENCIES) for (const rho of c >= AMPLE_C ? [NaN] : RHOS)
    for (const ep of EPISODE_KINDS) for (const px of [1, 4]) for (const s of [1000, 250]) cells.push(mk('full', law, c, rho, ep, px, s));
  return cells;
}

/** A harness check: two small cells. */
export function quickCells(): Cell[] {
  return [mk('quick', BASE_LAW, 4, 0.85, 'blackhole', 1, 1000), mk('quick', BASE_LAW, AMPLE_C, NaN, 'slow', 4, 1000)];
}

export const MATRIX_POLICIES: PolicyKey[] = ['rr', 'lr', 'ewma', 'wrr', 'prev', 'sy', 'oracle'];

export interface PolicyFigures {
  /** P99 of the time to success, an error counting as never (common.ts p99ToSuccess), per seed (ms) */
  p99: number[];
  /** P99 over the 2xx answers alone, per seed (ms) */
  p99ok: number[];
  /** error answers among the measured requests, per seed */
  errors: number[];
  wallMs: number;
}

export interface CellResult {
  cell: Cell;
  seeds: number[];
  measured: number;
  policies: Partial<Record<PolicyKey, PolicyFigures>>;
  gate: Gate;
  wallMs: number;
  /** the previous build is byte-identical to the current one: its figures are the shipped ones, not run twice */
  sameBuild: boolean;
}

export async function runCell(cell: Cell, o: { seeds: number[]; timing: Timing; wasm: string; prevWasm: string; policies?: PolicyKey[] }): Promise<CellResult> {
  const t0 = performance.now();
  const fleet = fleetOf(cell);
  const lambda = lambdaOf(cell, fleet);
  const episodes = episodesOf(cell, o.timing);
  const endMs = endOf(cell, o.timing);
  const out: Partial<Record<PolicyKey, PolicyFigures>> = {};
  let measured = 0;
  // the same module twice (the previous build IS the current one): the runs are deterministic
  // functions of the module and the seed, so the previous build's figures are the shipped ones
  const sameBuild = wasmBytes(o.wasm).sha256 === wasmBytes(o.prevWasm).sha256;
  const keys = (o.policies ?? MATRIX_POLICIES).filter((k) => !(sameBuild && k === 'prev'));
  for (const seed of o.seeds) {
    const sp = makePath({ law: cell.law, meanMs: fleet.meanMs, lambdaPerS: lambda, rho: cell.rho, seed, warmupMs: o.timing.warmupMs, endMs });
    measured += sp.measured;
    for (const key of keys) {
      const e = makePolicy(key, {
        fleet, proxies: cell.proxies, agent: agentSpec(cell.scrapeMs, cell.c), episodes, seed, wasm: o.wasm, prevWasm: o.prevWasm,
        measuredRange: [sp.firstMeasured, sp.firstMeasured + sp.measured],
      });
      const r = await runPolicy(fleet, sp, e.policy, { episodes, ttftFraction: 0.1, orca: e.orca });
      checkFilters(e, `${cell.id} ${key} seed ${seed}`);
      const f = (out[key] ??= { p99: [], p99ok: [], errors: [], wallMs: 0 });
      f.p99.push(p99ToSuccess(r));
      f.p99ok.push(okSummary(r).p99Ms);
      f.errors.push(measuredErrors(r));
      f.wallMs += r.wallMs;
    }
  }
  if (sameBuild && out.sy && (o.policies ?? MATRIX_POLICIES).includes('prev')) out.prev = { ...out.sy, wallMs: 0 };
  return { cell, seeds: o.seeds, measured: Math.round(measured / o.seeds.length), policies: out, gate: gate(out), wallMs: performance.now() - t0, sameBuild };
}

// ---------------------------------------------------------------- the gate

export const GATE_FACTOR = 1.05;

export interface Gate {
  pass: boolean;
  /** shipped P99 (mean over seeds) / the better of LEAST_REQUEST and peak EWMA */
  p99Ratio: number;
  /** the better reference's name and figures */
  best: 'lr' | 'ewma';
  bestErrors: number;
  /** shipped - previous build, P99 (mean over seeds), and the allowance (the previous build's spread) */
  prevDelta: number;
  prevSpread: number;
  errDelta: number;
  errSpread: number;
  reasons: string[];
}

/**
 * Per cell: the shipped defaults' P99 and error count (both means over the seeds) <= 1.05x the
 * better of LEAST_REQUEST and peak EWMA (better = lower P99; for errors, the fewer of the two),
 * and no worse than the previous build beyond the paths' spread (the largest deviation of one
 * path's figure from the mean, of the previous build's figures). The P99 is the time to success
 * with an error counted as never (p99ToSuccess): with more than 1 % errors it is Infinity, and
 * when both sides are Infinity the error counts decide alone.
 */
export function gate(p: Partial<Record<PolicyKey, PolicyFigures>>): Gate {
  const sy = p.sy!;
  const reasons: string[] = [];
  const lr = mean(p.lr!.p99);
  const ew = mean(p.ewma!.p99);
  const best: 'lr' | 'ewma' = lr <= ew ? 'lr' : 'ewma';
  const bestP99 = Math.min(lr, ew);
  const syP99 = mean(sy.p99);
  const p99Ratio = syP99 === Infinity && bestP99 === Infinity ? NaN : syP99 === 0 && bestP99 === 0 ? 1 : syP99 / bestP99;
  if (p99Ratio > GATE_FACTOR) reasons.push(`P99 ${p99Ratio.toFixed(2)}x ${best === 'lr' ? 'LEAST_REQUEST' : 'peak EWMA'}`);
  const bestErrors = Math.min(mean(p.lr!.errors), mean(p.ewma!.errors));
  const syErr = mean(sy.errors);
  if (!(syErr <= GATE_FACTOR * bestErrors)) reasons.push(`errors ${syErr.toFixed(1)} > 1.05 x ${bestErrors.toFixed(1)}`);
  let prevDelta = NaN;
  let prevSpread = NaN;
  let errDelta = NaN;
  let errSpread = NaN;
  if (p.prev) {
    const pp = mean(p.prev.p99);
    prevDelta = syP99 === Infinity && pp === Infinity ? 0 : syP99 - pp;
    prevSpread = pp === Infinity ? 0 : spreadOf(p.prev.p99);
    if (prevDelta > prevSpread) reasons.push(`P99 +${prevDelta.toFixed(0)} ms vs previous build (spread ${prevSpread.toFixed(0)})`);
    errDelta = syErr - mean(p.prev.errors);
    errSpread = spreadOf(p.prev.errors);
    if (errDelta > errSpread) reasons.push(`errors +${errDelta.toFixed(1)} vs previous build (spread ${errSpread.toFixed(1)})`);
  }
  return { pass: reasons.length === 0, p99Ratio, best, bestErrors, prevDelta, prevSpread, errDelta, errSpread, reasons };
}

// ---------------------------------------------------------------- the table

const fmt = (v: number): string => (v === Infinity ? '∞' : !Number.isFinite(v) ? '-' : v >= 10_000 ? `${(v / 1000).toFixed(1)}s` : v >= 100 ? v.toFixed(0) : v.toFixed(1));

export function cellLabel(c: Cell): [string, string, string, string, string, string] {
  return [lawName(c.law), String(c.c), c.c >= AMPLE_C ? 'ample' : String(c.rho), c.episode, String(c.proxies), c.scrapeMs === 1000 ? '1 s' : `${c.scrapeMs} ms`];
}

/** P99 to success (ms, mean over seeds; ∞: > 1 % errors; errors per seed in brackets when any policy had some) per policy, then the gate. */
export function matrixTable(rows: CellResult[]): string {
  const pol: PolicyKey[] = ['rr', 'lr', 'ewma', 'wrr', 'oracle', 'prev', 'sy'];
  const head = ['#', 'law', 'c', 'rho', 'episode', 'px', 'scrape', 'RR', 'LR', 'EWMA', 'WRR', 'oracle', 'prev', 'shipped ±spread', 'vs best', 'gate'];
  const lines = [`| ${head.join(' | ')} |`, `|${head.map((_, i) => (i >= 7 ? '---:' : '---')).join('|')}|`];
  rows.forEach((r, i) => {
    const anyErr = pol.some((k) => r.policies[k] && mean(r.policies[k]!.errors) > 0);
    const cellOf = (k: PolicyKey): string => {
      const f = r.policies[k];
      if (!f) return '-';
      const s = fmt(mean(f.p99));
      return anyErr ? `${s} (${fmt(mean(f.errors))})` : s;
    };
    const sy = r.policies.sy!;
    const g = r.gate;
    const sp = mean(sy.p99) === Infinity ? '' : ` ±${fmt(spreadOf(sy.p99))}`;
    const ratio = Number.isNaN(g.p99Ratio) ? 'errors' : g.p99Ratio.toFixed(2);
    lines.push(`| ${i + 1} | ${cellLabel(r.cell).join(' | ')} | ${pol.slice(0, 6).map(cellOf).join(' | ')} | ${cellOf('sy')}${sp} | ${ratio} ${g.best === 'lr' ? 'LR' : 'EW'} | ${g.pass ? 'PASS' : `**FAIL**: ${g.reasons.join('; ')}`} |`);
  });
  return lines.join('\n');
}
