// The rules runtime without I/O: variables + one SetEngine per rule set + the flags and
// overrides of the store, evaluated at `now()`. startRules (index.ts) drives it with real
// timers; tests drive it with a virtual clock.
import type { FlagEntry, OverrideEntry } from '../overrides/types';
import type { CompiledRules } from './compile';
import { SetEngine, type OverrideRecord, type RuleDecision, type SetStatus, type SwitchEvent } from './engine';
import { TARGET_RE } from './actions';

export interface OverrideView extends OverrideEntry {
  set: string;
  /** false when the record names no rule of the set (written by hand), or has expired */
  inForce: boolean;
  problem?: string;
}

export class RulesRuntime {
  readonly engines: SetEngine[];
  private readonly flagNames: Set<string>;

  constructor(
    readonly compiled: CompiledRules,
    readonly values: boolean[],
    readonly now: () => number,
    readonly maxOverrideMs: number,
  ) {
    const names = compiled.variables.map((v) => v.name);
    this.engines = compiled.sets.map((s) => new SetEngine(s, names));
    this.flagNames = new Set(compiled.variables.filter((v) => v.kind === 'flag').map((v) => v.name));
  }

  isFlag(name: string): boolean {
    return this.flagNames.has(name);
  }

  /** flags that apply now: declared and not expired */
  liveFlags(flags: ReadonlyMap<string, FlagEntry>): Map<string, FlagEntry> {
    const now = this.now();
    const out = new Map<string, FlagEntry>();
    for (const [k, f] of flags) if (this.flagNames.has(k) && (f.expiresAtMs === undefined || f.expiresAtMs > now)) out.set(k, f);
    return out;
  }

  /** an override's expiry, bounded by maxOverrideS from when it was set (records may come from etcdctl) */
  expiryOf(o: OverrideEntry): number {
    return Math.min(o.expiresAtMs, o.setAtMs + this.maxOverrideMs);
  }

  overrideViews(overrides: ReadonlyMap<string, OverrideEntry>): OverrideView[] {
    const now = this.now();
    const out: OverrideView[] = [];
    for (const [set, o] of overrides) {
      const eng = this.engines.find((e) => e.set.name === set);
      let problem: string | undefined;
      if (!eng) problem = `no rule set "${set}"`;
      else if (o.rule !== undefined && !eng.set.byId.has(o.rule)) problem = `no rule "${o.rule}" in set "${set}"`;
      else if (o.target !== undefined && !TARGET_RE.test(o.target)) problem = `target "${o.target}" is not a valid routing target`;
      else if (this.expiryOf(o) <= now) problem = 'expired';
      out.push({ ...o, expiresAtMs: this.expiryOf(o), set, inForce: problem === undefined, ...(problem ? { problem } : {}) });
    }
    return out;
  }

  /** Evaluate every set at now(); returns the switches of published decisions. */
  evaluate(overrides: ReadonlyMap<string, OverrideEntry>): SwitchEvent[] {
    const now = this.now();
    const live = new Map<string, OverrideRecord>();
    for (const v of this.overrideViews(overrides)) if (v.inForce) live.set(v.set, v);
    const out: SwitchEvent[] = [];
    for (const e of this.engines) {
      const sw = e.evaluate(this.values, now, live.get(e.set.name));
      if (sw) out.push(sw);
    }
    return out;
  }

  /** the next time anything can change without an input change: hold/cooldown end, an expiry */
  nextWake(flags: ReadonlyMap<string, FlagEntry>, overrides: ReadonlyMap<string, OverrideEntry>): number | undefined {
    const now = this.now();
    let t = Infinity;
    for (const e of this.engines) {
      const d = e.nextDeadline();
      if (d !== undefined) t = Math.min(t, d);
    }
    for (const f of flags.values()) if (f.expiresAtMs !== undefined && f.expiresAtMs > now) t = Math.min(t, f.expiresAtMs);
    for (const o of overrides.values()) {
      const x = this.expiryOf(o);
      if (x > now) t = Math.min(t, x);
    }
    return Number.isFinite(t) ? t : undefined;
  }

  decisions(): RuleDecision[] {
    return this.engines.map((e) => e.decision());
  }

  setStatuses(): Array<{ name: string } & SetStatus> {
    const now = this.now();
    return this.engines.map((e) => ({ name: e.set.name, ...e.status(now) }));
  }
}
