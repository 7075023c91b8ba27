// State variables: named booleans, each from one source (probe, link peer, inference pool,
// operator flag). Values live in a slot-indexed array the compiled conditions read directly.
import { EventEmitter } from 'node:events';
import { createProber, type Prober } from '../link/probe';
import type { InstanceRecord } from '../snapshot/codec';
import type { VariableConfig } from './schema';

export interface VariableState {
  name: string;
  kind: VariableConfig['kind'];
  /** human-readable source: "probe http://…", "peer cloud-b is degraded", "pool llm meanRho >= 0.9", "flag" */
  source: string;
  value: boolean;
  /** epoch ms of the last change (start time until the first change) */
  changedAtMs: number;
  reason: string;
}

export interface VariableChange {
  slot: number;
  name: string;
  from: boolean;
  to: boolean;
  reason: string;
  atMs: number;
}

/** The part of a PeerMonitor a peer variable needs. */
export interface PeerLike {
  readonly state: 'normal' | 'degraded';
  on(event: 'state', fn: (e: { to: 'normal' | 'degraded' }) => void): unknown;
  off(event: 'state', fn: (e: { to: 'normal' | 'degraded' }) => void): unknown;
}

export interface VariableDeps {
  now?: () => number;
  peers?: ReadonlyMap<string, PeerLike>;
  /** the inference collector's records (InstanceRecord[]), undefined when not scraping */
  instances?: () => InstanceRecord[] | undefined;
  /** injectable for tests; default: link/probe.ts createProber */
  prober?: (cfg: Extract<VariableConfig, { kind: 'probe' }>) => Prober;
}

function sourceOf(v: VariableConfig): string {
  switch (v.kind) {
    case 'probe':
      return `probe ${v.probe.kind === 'http' ? v.probe.url : `tcp ${v.probe.address}`}`;
    case 'peer':
      return `peer ${v.peer} is ${v.is}`;
    case 'pool':
      return `pool ${v.service} ${v.metric} ${v.op} ${v.value}`;
    case 'flag':
      return 'flag';
  }
}

/** Pool metric of one service from the collector's records. No healthy instance: meanRho 1. */
export function poolMetric(records: readonly InstanceRecord[] | undefined, service: string, metric: 'meanRho' | 'healthyInstances'): number {
  let healthy = 0;
  let rhoSum = 0;
  let rhoN = 0;
  for (const r of records ?? []) {
    if (r.service !== service || !r.healthy) continue;
    healthy++;
    if (Number.isFinite(r.rho)) {
      rhoSum += r.rho;
      rhoN++;
    }
  }
  if (metric === 'healthyInstances') return healthy;
  return rhoN === 0 ? 1 : rhoSum / rhoN;
}

export function compare(x: number, op: '>=' | '>' | '<=' | '<', y: number): boolean {
  return op === '>=' ? x >= y : op === '>' ? x > y : op === '<=' ? x <= y : x < y;
}

export class Variables extends EventEmitter<{ change: [VariableChange] }> {
  readonly values: boolean[];
  readonly states: VariableState[];
  private readonly now: () => number;
  private timers: NodeJS.Timeout[] = [];
  private cleanups: Array<() => void> = [];
  private stopped = false;
  /** flag values set by operators (store); undefined = default */
  private flagSet = new Map<string, boolean>();

  constructor(
    readonly defs: readonly VariableConfig[],
    private readonly deps: VariableDeps = {},
  ) {
    super();
    this.now = deps.now ?? Date.now;
    const t = this.now();
    this.values = defs.map((d) => (d.kind === 'flag' ? d.default : d.kind === 'peer' ? this.peerValue(d) : false));
    this.states = defs.map((d, i) => ({ name: d.name, kind: d.kind, source: sourceOf(d), value: this.values[i], changedAtMs: t, reason: 'initial value' }));
  }

  private peerValue(d: Extract<VariableConfig, { kind: 'peer' }>): boolean {
    const p = this.deps.peers?.get(d.peer);
    return p ? p.state === d.is : false;
  }

  /** Set a value (no-op if unchanged); emits 'change'. */
  set(slot: number, value: boolean, reason: string): void {
    const s = this.states[slot];
    if (this.values[slot] === value) return;
    const from = this.values[slot];
    this.values[slot] = value;
    s.value = value;
    s.changedAtMs = this.now();
    s.reason = reason;
    this.emit('change', { slot, name: s.name, from, to: value, reason, atMs: s.changedAtMs });
  }

  /** Operator flags from the store: every declared flag not in `flags` returns to its default. */
  applyFlags(flags: ReadonlyMap<string, { value: boolean; author: string; reason: string }>): void {
    this.defs.forEach((d, i) => {
      if (d.kind !== 'flag') return;
      const f = flags.get(d.name);
      const prev = this.flagSet.get(d.name);
      if (f) {
        this.flagSet.set(d.name, f.value);
        if (prev !== f.value) this.set(i, f.value, `set to ${f.value} by ${f.author}: ${f.reason}`);
      } else if (prev !== undefined) {
        this.flagSet.delete(d.name);
        this.set(i, d.default, `cleared (default ${d.default})`);
      }
    });
  }

  /** Starts every source; resolves once each probe variable has its first result. */
  async start(): Promise<void> {
    const firsts: Promise<void>[] = [];
    this.defs.forEach((d, i) => {
      if (d.kind === 'probe') firsts.push(this.startProbe(d, i));
      else if (d.kind === 'peer') this.startPeer(d, i);
      else if (d.kind === 'pool') this.startPool(d, i);
    });
    await Promise.all(firsts);
  }

  stop(): void {
    this.stopped = true;
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    for (const c of this.cleanups) c();
    this.cleanups = [];
  }

  private startProbe(d: Extract<VariableConfig, { kind: 'probe' }>, slot: number): Promise<void> {
    const prober = this.deps.prober ? this.deps.prober(d) : createProber(d.probe, d.timeoutMs, 1);
    const abort = new AbortController();
    this.cleanups.push(() => {
      abort.abort();
      prober.close();
    });
    let inFlight = false;
    let first = true;
    let ok = 0;
    let bad = 0;
    const run = async (): Promise<void> => {
      if (inFlight || this.stopped) return;
      inFlight = true;
      const r = await prober.run(abort.signal);
      inFlight = false;
      if (this.stopped || r.outcome === 'aborted') return;
      const what = r.outcome === 'ok' ? `ok in ${r.rttMs.toFixed(1)} ms` : `${r.outcome}${r.error ? ` (${r.error})` : ''}`;
      if (r.outcome === 'ok') {
        ok++;
        bad = 0;
      } else {
        bad++;
        ok = 0;
      }
      // the first result decides at once: there is no earlier state to debounce against
      if (first) {
        first = false;
        this.set(slot, r.outcome === 'ok', `first probe ${what}`);
        this.states[slot].reason = `first probe ${what}`;
      } else if (ok >= d.healthyAfter) this.set(slot, true, `${ok} consecutive successful probes (last ${what})`);
      else if (bad >= d.unhealthyAfter) this.set(slot, false, `${bad} consecutive failed probes (last ${what})`);
    };
    this.timers.push(setInterval(() => void run(), d.intervalMs));
    return run();
  }

  private startPeer(d: Extract<VariableConfig, { kind: 'peer' }>, slot: number): void {
    const p = this.deps.peers?.get(d.peer);
    if (!p) {
      this.states[slot].reason = `peer ${d.peer} is not monitored: false`;
      return;
    }
    const fn = (e: { to: 'normal' | 'degraded' }): void => this.set(slot, e.to === d.is, `peer ${d.peer} is ${e.to}`);
    p.on('state', fn);
    this.cleanups.push(() => p.off('state', fn));
    this.set(slot, p.state === d.is, `peer ${d.peer} is ${p.state}`);
    this.states[slot].reason = `peer ${d.peer} is ${p.state}`;
  }

  private startPool(d: Extract<VariableConfig, { kind: 'pool' }>, slot: number): void {
    const read = (): void => {
      if (this.stopped) return;
      const x = poolMetric(this.deps.instances?.(), d.service, d.metric);
      const v = compare(x, d.op, d.value);
      const why = `${d.service} ${d.metric} = ${Number.isInteger(x) ? x : x.toFixed(3)} (${d.op} ${d.value} is ${v})`;
      if (v !== this.values[slot]) this.set(slot, v, why);
    };
    read();
    this.timers.push(setInterval(read, d.intervalMs));
  }

  /** re-read pool variables now (the runtime calls it when the collector reports a change) */
  pollPools(): void {
    this.defs.forEach((d, i) => {
      if (d.kind !== 'pool') return;
      const x = poolMetric(this.deps.instances?.(), d.service, d.metric);
      const v = compare(x, d.op, d.value);
      if (v !== this.values[i]) this.set(i, v, `${d.service} ${d.metric} = ${Number.isInteger(x) ? x : x.toFixed(3)} (${d.op} ${d.value} is ${v})`);
    });
  }
}
