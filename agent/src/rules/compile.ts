// Compile the `rules` config once at load: variable table, conditions to bytecode, rule order.
// Every problem is reported as "field: reason" (rule id, 1-based position, what was expected);
// any problem refuses the whole config.
import { actionProblems, headerNameProblem, type RuleAction } from './actions';
import { compileCondition, ConditionError, evaluate, IDENT_RE, KEYWORDS, type CompiledCondition } from './language';
import type { RuleSetConfig, RulesConfig, VariableConfig } from './schema';

export class RulesConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(problems.map((p) => `config error: ${p}`).join('\n'));
    this.name = 'RulesConfigError';
  }
}

export interface CompiledRule {
  id: string;
  description: string;
  priority: number;
  /** index in the declared list */
  declared: number;
  condition: CompiledCondition;
  action: RuleAction;
}

export interface CompiledSet {
  name: string;
  config: RuleSetConfig;
  /** evaluation order: priority descending, equal priorities in declared order; default last */
  rules: CompiledRule[];
  byId: Map<string, CompiledRule>;
}

export interface CompiledRules {
  variables: VariableConfig[];
  /** variable name -> slot (index in `variables`) */
  slots: Map<string, number>;
  sets: CompiledSet[];
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

export function compileRules(cfg: RulesConfig, opts: { base?: string; peers?: readonly string[] } = {}): CompiledRules {
  const base = opts.base ?? 'rules';
  const problems: string[] = [];
  if (!isObj(cfg)) throw new RulesConfigError([`${base}: must be a mapping`]);
  const variables = Array.isArray(cfg.variables) ? cfg.variables : [];
  const sets = Array.isArray(cfg.sets) ? cfg.sets : [];

  const slots = new Map<string, number>();
  variables.forEach((v, i) => {
    const f = `${base}.variables[${i}]`;
    if (!isObj(v) || typeof v.name !== 'string') return void problems.push(`${f}.name: required`);
    if (!IDENT_RE.test(v.name)) problems.push(`${f}.name: must match ${IDENT_RE.source}`);
    else if ((KEYWORDS as readonly string[]).includes(v.name.toUpperCase())) problems.push(`${f}.name: "${v.name}" is a keyword`);
    else if (slots.has(v.name)) problems.push(`${f}.name: duplicate variable "${v.name}" (also ${base}.variables[${slots.get(v.name)}])`);
    else slots.set(v.name, i);
    if (v.kind === 'peer' && opts.peers && !opts.peers.includes(v.peer)) problems.push(`${f}.peer: unknown link peer "${v.peer}" (link.peers: ${opts.peers.join(', ') || 'none'})`);
    if (v.kind === 'pool' && !(typeof v.value === 'number' && Number.isFinite(v.value))) problems.push(`${f}.value: must be a finite number`);
    if (v.kind === 'probe' && isObj(v.probe) && v.probe.kind === 'http') {
      try {
        const u = new URL(v.probe.url);
        if (u.protocol !== 'http:' && u.protocol !== 'https:') problems.push(`${f}.probe.url: must be http:// or https://`);
      } catch {
        problems.push(`${f}.probe.url: not a valid URL`);
      }
    }
    if (v.kind === 'probe' && isObj(v.probe) && v.probe.kind === 'tcp') {
      const port = Number(String(v.probe.address).slice(String(v.probe.address).lastIndexOf(':') + 1));
      if (!(port >= 1 && port <= 65535)) problems.push(`${f}.probe.address: port must be 1..65535`);
    }
  });

  const compiled: CompiledSet[] = [];
  const setNames = new Map<string, number>();
  const authorityOwner = new Map<string, string>();
  sets.forEach((s, si) => {
    const f = `${base}.sets[${si}]`;
    if (!isObj(s) || typeof s.name !== 'string') return void problems.push(`${f}.name: required`);
    if (setNames.has(s.name)) problems.push(`${f}.name: duplicate rule set "${s.name}" (also ${base}.sets[${setNames.get(s.name)}])`);
    setNames.set(s.name, si);
    for (const a of Array.isArray(s.authorities) ? s.authorities : []) {
      const owner = authorityOwner.get(a);
      if (owner !== undefined && owner !== s.name) problems.push(`${f}.authorities: "${a}" is already bound to rule set "${owner}"`);
      authorityOwner.set(a, s.name);
    }
    const hp = headerNameProblem(s.routeHeader ?? 'x-switchyard-route');
    if (hp) problems.push(`${f}.routeHeader: ${hp}`);
    const rules: CompiledRule[] = [];
    const ids = new Map<string, number>();
    const defaults: number[] = [];
    (Array.isArray(s.rules) ? s.rules : []).forEach((r, ri) => {
      const rf = `${f}.rules[${ri}]`;
      if (!isObj(r) || typeof r.id !== 'string') return void problems.push(`${rf}.id: required`);
      const rid = `${rf} (id "${r.id}")`;
      if (ids.has(r.id)) problems.push(`${rid}.id: duplicate rule id (also ${f}.rules[${ids.get(r.id)}])`);
      ids.set(r.id, ri);
      let condition: CompiledCondition | undefined;
      try {
        condition = compileCondition(r.condition, slots);
      } catch (err) {
        if (!(err instanceof ConditionError)) throw err;
        problems.push(`${rid}.condition: ${err.message}`);
      }
      const ap = isObj(r.action) ? actionProblems(r.action as RuleAction, `${rid}.action`) : [`${rid}.action: required`];
      problems.push(...ap);
      const priority = typeof r.priority === 'number' && Number.isInteger(r.priority) ? r.priority : 0;
      if (condition?.alwaysTrue) defaults.push(ri);
      if (condition && ap.length === 0)
        rules.push({ id: r.id, description: typeof r.description === 'string' ? r.description : '', priority, declared: ri, condition, action: r.action as RuleAction });
    });
    if (defaults.length === 0) problems.push(`${f}.rules: a default rule (condition TRUE) is required`);
    else if (defaults.length > 1) problems.push(`${f}.rules: exactly one default rule (condition TRUE) allowed, found ${defaults.length} (rules[${defaults.join('], rules[')}])`);
    // stable: Array.prototype.sort is stable since ES2019, and declared breaks ties explicitly
    rules.sort((a, b) => b.priority - a.priority || a.declared - b.declared);
    const d = rules.findIndex((r) => r.condition.alwaysTrue);
    if (defaults.length === 1 && d >= 0 && d !== rules.length - 1) {
      const shadowed = rules.slice(d + 1).map((r) => `"${r.id}"`).join(', ');
      problems.push(`${f}.rules[${rules[d].declared}] (id "${rules[d].id}").priority: the default rule must come last; it shadows ${shadowed} (give it the lowest priority)`);
    }
    compiled.push({ name: s.name, config: s, rules, byId: new Map(rules.map((r) => [r.id, r])) });
  });
  if (problems.length) throw new RulesConfigError(problems);
  return { variables, slots, sets: compiled };
}

/** Index of the first rule (in evaluation order) whose condition holds. The default always does. */
export function firstMatch(set: CompiledSet, values: ArrayLike<boolean>): number {
  const rules = set.rules;
  for (let i = 0; i < rules.length; i++) if (evaluate(rules[i].condition.code, values)) return i;
  return rules.length - 1;
}
