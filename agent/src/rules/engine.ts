// Decision engine of one rule set: which rule is in force, with hysteresis and cooldown, and
// the operator override on top. Pure state machine over (variable values, override, now): the
// same inputs and clock give the same decisions; the runtime (index.ts) decides when to call it.
import type { RuleAction } from './actions';
import { firstMatch, type CompiledSet } from './compile';

export interface OverrideRecord {
  set: string;
  /** a rule id of the set, or ... */
  rule?: string;
  /** ... a routing target (route action to it) */
  target?: string;
  author: string;
  reason: string;
  setAtMs: number;
  expiresAtMs: number;
}

/** What the filter needs for one rule set (plain data; see docs/rules.md). */
export interface RuleDecision {
  set: string;
  authorities: string[];
  /** header a route/split action replaces */
  routeHeader: string;
  /** +1 at every change of this decision (rule, action or override) */
  version: number;
  /** the rule in force; `override:<target>` for an override by target */
  ruleId: string;
  action: RuleAction;
  /** epoch ms since this rule/override has been in force */
  sinceMs: number;
  /** the variables the rule's condition read when it took effect, with their values */
  because: Array<{ name: string; value: boolean }>;
  override?: Omit<OverrideRecord, 'set'>;
}

export interface SetStatus {
  decision: RuleDecision;
  /** rule chosen by the rules alone (what applies once an override ends) */
  ruleInForce: string;
  /** an outcome waiting for hysteresis or cooldown */
  pending?: { ruleId: string; sinceMs: number; evaluations: number; waitingFor: 'hysteresis' | 'cooldown' };
  lastSwitchAtMs?: number;
  evaluations: number;
  switches: number;
}

export interface SwitchEvent {
  set: string;
  from: string | undefined;
  to: string;
  because: Array<{ name: string; value: boolean }>;
  atMs: number;
  cause: 'initial' | 'rules' | 'override-set' | 'override-end';
  override?: Omit<OverrideRecord, 'set'>;
}

export class SetEngine {
  private active = -1;
  private activeSince = 0;
  private activeBecause: Array<{ name: string; value: boolean }> = [];
  private lastSwitchAt = -Infinity;
  private cand = -1;
  private candSince = 0;
  private candCount = 0;
  private evaluations = 0;
  private switches = 0;
  private published?: RuleDecision;
  private publishedKey = '';

  constructor(
    readonly set: CompiledSet,
    private readonly varNames: readonly string[],
  ) {}

  /**
   * One evaluation at `now`. Returns the switch of the published decision, if any. `override`
   * must already be filtered to this set and not expired.
   */
  evaluate(values: ArrayLike<boolean>, now: number, override?: OverrideRecord): SwitchEvent | undefined {
    this.evaluations++;
    const winner = firstMatch(this.set, values);
    const cooldownMs = this.set.config.cooldownS * 1000;
    let ruleCause: SwitchEvent['cause'] | undefined;
    if (this.active < 0) {
      this.take(winner, values, now);
      ruleCause = 'initial';
    } else if (winner === this.active) {
      this.cand = -1;
    } else {
      if (winner !== this.cand) {
        this.cand = winner;
        this.candSince = now;
        this.candCount = 1;
      } else this.candCount++;
      if (this.ready(now) && now - this.lastSwitchAt >= cooldownMs) {
        this.take(winner, values, now);
        this.lastSwitchAt = now;
        this.switches++;
        ruleCause = 'rules';
      }
    }
    return this.publish(now, override, ruleCause);
  }

  private ready(now: number): boolean {
    const { evaluations, holdMs } = this.set.config.hysteresis;
    if (evaluations === 0 && holdMs === 0) return true;
    return (evaluations > 0 && this.candCount >= evaluations) || (holdMs > 0 && now - this.candSince >= holdMs);
  }

  private take(idx: number, values: ArrayLike<boolean>, now: number): void {
    this.active = idx;
    this.activeSince = now;
    this.activeBecause = this.set.rules[idx].condition.reads.map((s) => ({ name: this.varNames[s], value: !!values[s] }));
    this.cand = -1;
  }

  private publish(now: number, ov: OverrideRecord | undefined, ruleCause: SwitchEvent['cause'] | undefined): SwitchEvent | undefined {
    const cfg = this.set.config;
    let next: Omit<RuleDecision, 'version'>;
    if (ov) {
      // exactly the contract's fields (callers may pass a richer record)
      const o: Omit<OverrideRecord, 'set'> = {
        ...(ov.rule !== undefined ? { rule: ov.rule } : { target: ov.target }),
        author: ov.author,
        reason: ov.reason,
        setAtMs: ov.setAtMs,
        expiresAtMs: ov.expiresAtMs,
      };
      const rule = ov.rule !== undefined ? this.set.byId.get(ov.rule) : undefined;
      const action: RuleAction = rule ? rule.action : { kind: 'route', target: ov.target ?? '' };
      const ruleId = rule ? rule.id : `override:${ov.target}`;
      const same = this.published?.override && this.published.ruleId === ruleId && this.published.override.setAtMs === ov.setAtMs;
      next = { set: cfg.name, authorities: cfg.authorities, routeHeader: cfg.routeHeader, ruleId, action, sinceMs: same ? this.published!.sinceMs : now, because: [], override: o };
    } else {
      const r = this.set.rules[this.active];
      next = { set: cfg.name, authorities: cfg.authorities, routeHeader: cfg.routeHeader, ruleId: r.id, action: r.action, sinceMs: this.activeSince, because: this.activeBecause };
    }
    const key = JSON.stringify([next.ruleId, next.sinceMs, next.override ?? null]);
    if (key === this.publishedKey) return undefined;
    const prev = this.published;
    this.published = { ...next, version: (prev?.version ?? 0) + 1 };
    this.publishedKey = key;
    const cause: SwitchEvent['cause'] = ov ? 'override-set' : prev?.override ? 'override-end' : (ruleCause ?? 'rules');
    return { set: cfg.name, from: prev?.ruleId, to: next.ruleId, because: next.because, atMs: now, cause, override: next.override };
  }

  /** When the engine must run again even if no input changes (hold time or cooldown ending). */
  nextDeadline(): number | undefined {
    if (this.cand < 0) return undefined;
    const { evaluations, holdMs } = this.set.config.hysteresis;
    let readyAt: number | undefined;
    if ((evaluations === 0 && holdMs === 0) || (evaluations > 0 && this.candCount >= evaluations)) readyAt = this.candSince;
    else if (holdMs > 0) readyAt = this.candSince + holdMs;
    // evaluation-count hysteresis only: the heartbeat supplies the evaluations
    if (readyAt === undefined) return undefined;
    return Math.max(readyAt, this.lastSwitchAt + this.set.config.cooldownS * 1000);
  }

  decision(): RuleDecision {
    if (!this.published) throw new Error(`rule set ${this.set.name}: not evaluated yet`);
    return this.published;
  }

  status(now: number): SetStatus {
    const cooldownEnd = this.lastSwitchAt + this.set.config.cooldownS * 1000;
    return {
      decision: this.decision(),
      ruleInForce: this.set.rules[this.active].id,
      pending:
        this.cand >= 0
          ? { ruleId: this.set.rules[this.cand].id, sinceMs: this.candSince, evaluations: this.candCount, waitingFor: this.ready(now) && now < cooldownEnd ? 'cooldown' : 'hysteresis' }
          : undefined,
      lastSwitchAtMs: Number.isFinite(this.lastSwitchAt) ? this.lastSwitchAt : undefined,
      evaluations: this.evaluations,
      switches: this.switches,
    };
  }
}
