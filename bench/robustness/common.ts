// Shared parts of the robustness benchmark (issue 21 §2-3): sample paths for any service-time
// law, the reference policies built the same way for one or several proxies, the previous build
// of the filter compiled from a pinned commit, and per-run figures.
//
// Every policy of one (cell, seed) sees the SAME sample path: the arrival times and each request's
// base service time are drawn once from the seed (common random numbers); policies differ only in
// where requests go. The des.ts engine runs them (bench/routing/README.md).
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { makeDistribution } from '../../sim/inference/distributions';
import { mulberry32, openUniform, type Rng } from '../../sim/inference/prng';
import { type AgentModel, type AgentSpec, DEFAULT_AGENT } from '../routing/agent-model';
import { LocalLeastRequest, MultiProxy } from '../routing/choose-model';
import { type Episode, type FleetSpec, LeastRequest, RoundRobin, type RoutingPolicy, type RunResult, type SamplePath, summarize, type Summary } from '../routing/des';
import { ClientSideWrr, PeakEwma } from '../routing/inband-reference';
import { SedOracle } from '../routing/reference';
import { SwitchyardPolicy } from '../routing/switchyard';

export const ROOT = path.resolve(__dirname, '../..');

// ---------------------------------------------------------------- service-time laws

export type ServiceLaw =
  | { kind: 'lognormal'; sigma: number }
  | { kind: 'bimodal' } // 95 % fast, 5 % 10x slower (two points)
  | { kind: 'pareto'; alpha: number }
  | { kind: 'fixed' };

export function lawName(l: ServiceLaw): string {
  switch (l.kind) {
    case 'lognormal': return `lognormal s${l.sigma}`;
    case 'bimodal': return 'bimodal 95/5 x10';
    case 'pareto': return `pareto a${l.alpha}`;
    case 'fixed': return 'deterministic';
  }
}

/** A sampler of service times with mean `meanMs` under law `l`. */
export function serviceSampler(l: ServiceLaw, meanMs: number): (r: Rng) => number {
  switch (l.kind) {
    case 'lognormal': {
      const d = makeDistribution({ kind: 'lognormal', meanMs, sigma: l.sigma });
      return (r) => d.sample(r);
    }
    case 'pareto': {
      const d = makeDistribution({ kind: 'pareto', meanMs, alpha: l.alpha });
      return (r) => d.sample(r);
    }
    case 'fixed':
      return () => meanMs;
    case 'bimodal': {
      // mean = fast × (0.95 + 0.05 × 10)
      const fast = meanMs / 1.45;
      return (r) => (r() < 0.05 ? 10 * fast : fast);
    }
  }
}

/**
 * Poisson arrivals at `lambdaPerS` from 0 to `endMs` + 2 s of tail; measured: the arrivals in
 * [warmupMs, endMs). Arrivals and service draws come from independent streams of the seed.
 */
export function makePath(o: { law: ServiceLaw; meanMs: number; lambdaPerS: number; rho: number; seed: number; warmupMs: number; endMs: number }): SamplePath {
  const arrRng = mulberry32(o.seed * 2 + 1);
  const svcRng = mulberry32(o.seed * 2 + 2);
  const lam = o.lambdaPerS / 1000;
  const arr: number[] = [];
  let t = 0;
  let first = -1;
  let last = -1;
  for (;;) {
    t += -Math.log(openUniform(arrRng)) / lam;
    if (t >= o.endMs + 2000) break;
    if (first < 0 && t >= o.warmupMs) first = arr.length;
    if (t < o.endMs) last = arr.length;
    arr.push(t);
  }
  const s = serviceSampler(o.law, o.meanMs);
  const baseService = new Float64Array(arr.length);
  for (let i = 0; i < arr.length; i++) baseService[i] = s(svcRng);
  return { rho: o.rho, lambdaPerS: o.lambdaPerS, arrivals: Float64Array.from(arr), baseService, firstMeasured: first, measured: last - first + 1, warmupMs: o.warmupMs, bursts: [] };
}

// ---------------------------------------------------------------- the previous build

/** The build from before issue 21 (docs/benchmarks/robustness.md). */
export const PREV_COMMIT = '80bf6a5';

/**
 * build/prev/<full sha>/switchyard.wasm: the filter of `commit`, compiled with this repo's asc
 * from `git archive` of that commit's filter/ and asconfig.json in a temp dir (release target).
 * Cached by commit: built once (~1-2 min), then read.
 */
export function prevBuild(commit = PREV_COMMIT, log: (s: string) => void = () => {}): string {
  const sha = execFileSync('git', ['-C', ROOT, 'rev-parse', `${commit}^{commit}`], { encoding: 'utf8' }).trim();
  const out = path.join(ROOT, 'build', 'prev', sha, 'switchyard.wasm');
  if (existsSync(out)) return out;
  log(`building the filter of ${sha.slice(0, 12)} into ${path.relative(ROOT, out)} (once, cached) ...`);
  const tmp = mkdtempSync(path.join(tmpdir(), `switchyard-${sha.slice(0, 8)}-`));
  try {
    const tar = execFileSync('git', ['-C', ROOT, 'archive', sha, 'filter', 'asconfig.json'], { maxBuffer: 1 << 28 });
    execFileSync('tar', ['-x', '-C', tmp], { input: tar });
    symlinkSync(path.join(ROOT, 'node_modules'), path.join(tmp, 'node_modules'));
    try {
      execFileSync(process.execPath, [path.join(ROOT, 'node_modules/assemblyscript/bin/asc.js'), 'filter/assembly/index.ts', '--target', 'release'], { cwd: tmp, stdio: ['ignore', 'ignore', 'pipe'], maxBuffer: 1 << 26 });
    } catch (e) {
      throw new Error(`asc failed on ${sha.slice(0, 12)}'s filter: ${String((e as { stderr?: Buffer }).stderr ?? e).slice(-2000)}`);
    }
    mkdirSync(path.dirname(out), { recursive: true });
    copyFileSync(path.join(tmp, 'build', 'switchyard.wasm'), out + '.tmp');
    copyFileSync(out + '.tmp', out);
    rmSync(out + '.tmp');
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  return out;
}

// ---------------------------------------------------------------- policies

export type PolicyKey = 'rr' | 'lr' | 'ewma' | 'wrr' | 'sy' | 'prev' | 'oracle';
export const POLICY_LABEL: Record<PolicyKey, string> = {
  rr: 'round robin', lr: 'LEAST_REQUEST', ewma: 'peak EWMA', wrr: 'Envoy WRR (ORCA)', sy: 'switchyard (shipped)', prev: `switchyard ${PREV_COMMIT}`, oracle: 'oracle (exact state)',
};

export interface PolicyEnv {
  fleet: FleetSpec;
  proxies: number;
  agent: AgentSpec;
  episodes: Episode[];
  seed: number;
  wasm: string;
  prevWasm: string;
  measuredRange: [number, number];
}

export interface PolicyEntry {
  key: PolicyKey;
  policy: RoutingPolicy;
  /** the instances attach ORCA reports to the answers this policy sees */
  orca: boolean;
  /** the compiled filters in it (checked after the run) */
  filters: () => SwitchyardPolicy[];
}

export function agentSpec(scrapeMs: number, concurrency: number): AgentSpec {
  return { ...DEFAULT_AGENT, scrapeIntervalMs: scrapeMs, publishIntervalMs: 250, concurrency };
}

/**
 * One policy as the cell deploys it: one proxy, or `proxies` proxies with the arrivals split
 * uniformly at random, each balancing on what it sees itself (its own active requests, its own
 * latencies, its own ORCA reports); the filters share one agent. The oracle is one global router.
 */
export function makePolicy(key: PolicyKey, env: PolicyEnv): PolicyEntry {
  const { seed, proxies: k } = env;
  const filter = (wasm: string, name: string) => (j: number, shared?: AgentModel): SwitchyardPolicy =>
    new SwitchyardPolicy({ wasmPath: wasm, agent: env.agent, seed: seed + j, name, measuredRange: env.measuredRange, sharedAgent: shared });
  const one = (make: (j: number, shared?: AgentModel) => RoutingPolicy, withAgent = false): { policy: RoutingPolicy; members: () => RoutingPolicy[] } => {
    if (k === 1) {
      const p = make(0);
      return { policy: p, members: () => [p] };
    }
    const m = new MultiProxy(`${key} x${k}`, make, k, withAgent ? { spec: env.agent, seed } : undefined, seed);
    return { policy: m, members: () => (m as unknown as { proxies: RoutingPolicy[] }).proxies };
  };
  let made: { policy: RoutingPolicy; members: () => RoutingPolicy[] };
  let orca = false;
  switch (key) {
    case 'rr': made = one(() => new RoundRobin()); break;
    // one proxy: its active requests are the instance's (des.ts inSystem); several: each its own
    case 'lr': made = k === 1 ? one(() => new LeastRequest(seed)) : one((j) => new LocalLeastRequest(seed + j)); break;
    case 'ewma': made = one((j) => new PeakEwma(seed + j)); break;
    case 'wrr': made = one((j) => new ClientSideWrr(seed + j)); orca = true; break;
    case 'sy': made = one(filter(env.wasm, 'switchyard'), true); break;
    case 'prev': made = one(filter(env.prevWasm, `switchyard@${PREV_COMMIT}`), true); break;
    case 'oracle': made = { policy: new SedOracle(env.episodes), members: () => [] }; break;
  }
  return { key, policy: made.policy, orca, filters: () => made.members().filter((m): m is SwitchyardPolicy => m instanceof SwitchyardPolicy) };
}

export function checkFilters(e: PolicyEntry, what: string): void {
  for (const p of e.filters()) {
    if (p.stats.choiceMetric !== p.stats.filterRouted) throw new Error(`${what}: switchyard.lb.choice.* = ${p.stats.choiceMetric} but ${p.stats.filterRouted} requests carried an endpoint`);
    if (p.stats.vmFailures) throw new Error(`${what}: ${p.stats.vmFailures} VM failures`);
  }
}

// ---------------------------------------------------------------- figures

/** Over 2xx answers (an error answer is counted, not timed: a fast 5xx must not look fast). */
export function okSummary(r: RunResult): Summary {
  return summarize(r.responseMs.filter((_, i) => r.status[i] === 200));
}

/**
 * P99 of the time to a successful answer over ALL measured requests, an error answer counting as
 * one that never succeeded (+Infinity): a policy cannot look fast by failing fast. Infinity when
 * more than 1 % of the measured requests failed.
 */
export function p99ToSuccess(r: RunResult): number {
  const v = Float64Array.from(r.responseMs, (x, i) => (r.status[i] === 200 ? x : Infinity)).sort();
  return v[Math.min(v.length - 1, Math.max(0, Math.ceil(0.99 * v.length) - 1))];
}

/** Measured requests answered 2xx within `limitMs`, as a fraction of the measured requests. */
export function successWithin(r: RunResult, limitMs: number): number {
  let ok = 0;
  for (let i = 0; i < r.responseMs.length; i++) if (r.status[i] === 200 && r.responseMs[i] <= limitMs) ok++;
  return ok / r.responseMs.length;
}

/** Error answers among the measured requests. */
export function measuredErrors(r: RunResult): number {
  let n = 0;
  for (let i = 0; i < r.status.length; i++) if (r.status[i] !== 200) n++;
  return n;
}

export const mean = (v: number[]): number => v.reduce((a, b) => a + b, 0) / v.length;
/** The largest deviation of one path from the mean over the paths. */
export const spreadOf = (v: number[]): number => {
  const m = mean(v);
  return Math.max(...v.map((x) => Math.abs(x - m)));
};

