// The condition language: precedence, error positions, whole-token identifiers, and a bounded
// fuzz of generated and mutated rule sets through the real config loader.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compileCondition, ConditionError, evaluate, parseCondition } from '../../agent/src/rules/language';
import { ConfigError, resolveConfig } from '../../agent/src/config';
import { compileRules } from '../../agent/src/rules/compile';

const SLOTS = new Map([
  ['a', 0],
  ['b', 1],
  ['c', 2],
  ['dc1_api', 3],
  ['dc1_api_healthy', 4],
]);
const run = (src: string, vals: boolean[]): boolean => evaluate(compileCondition(src, SLOTS).code, vals);
const errorOf = (src: string): ConditionError => {
  try {
    compileCondition(src, SLOTS);
  } catch (e) {
    assert.ok(e instanceof ConditionError, `expected ConditionError, got ${e}`);
    return e;
  }
  assert.fail(`"${src}" compiled`);
};

test('precedence: NOT > AND > OR, left to right, parentheses override', () => {
  // a OR b AND c == a OR (b AND c): differs from (a OR b) AND c at a=1,b=0,c=0
  assert.equal(run('a OR b AND c', [true, false, false]), true);
  assert.equal(run('(a OR b) AND c', [true, false, false]), false);
  // NOT a AND b == (NOT a) AND b: differs from NOT (a AND b) at a=0,b=0
  assert.equal(run('NOT a AND b', [false, false]), false);
  assert.equal(run('NOT (a AND b)', [false, false]), true);
  // NOT binds tighter than OR
  assert.equal(run('NOT a OR b', [true, true]), true);
  assert.equal(run('NOT NOT a', [true]), true);
  assert.equal(run('TRUE AND FALSE OR TRUE', []), true);
  assert.equal(run('FALSE OR TRUE AND FALSE', []), false);
});

test('every compiled condition agrees with a reference evaluation on every assignment', () => {
  const cases: Array<[string, (a: boolean, b: boolean, c: boolean) => boolean]> = [
    ['a AND b OR c', (a, b, c) => (a && b) || c],
    ['a OR b AND NOT c', (a, b, c) => a || (b && !c)],
    ['NOT (a OR b) AND c', (a, b, c) => !(a || b) && c],
    ['(a OR (b AND (NOT c OR a)))', (a, b, c) => a || (b && (!c || a))],
    ['a AND NOT b AND NOT NOT c OR FALSE', (a, b, c) => a && !b && c],
  ];
  for (const [src, ref] of cases)
    for (let m = 0; m < 8; m++) {
      const v = [!!(m & 1), !!(m & 2), !!(m & 4)];
      assert.equal(run(src, v), ref(v[0], v[1], v[2]), `${src} at ${v}`);
    }
});

test('identifiers are whole tokens: a prefix of another variable never matches inside it', () => {
  // dc1_api false, dc1_api_healthy true
  assert.equal(run('dc1_api_healthy', [false, false, false, false, true]), true);
  assert.equal(run('dc1_api', [false, false, false, false, true]), false);
  assert.deepEqual(compileCondition('dc1_api_healthy AND NOT dc1_api', SLOTS).reads, [4, 3]);
  // an undeclared longer name is unknown, not "dc1_api" followed by junk
  const e = errorOf('dc1_api_healthyX OR a');
  assert.equal(e.pos, 1);
  assert.match(e.detail, /unknown variable "dc1_api_healthyX"/);
  // keywords are upper-case whole words: "ANDa" is an identifier, "and" too
  assert.match(errorOf('a ANDa b').detail, /expected AND, OR or end of condition, found "ANDa"/);
  assert.match(errorOf('a and b').detail, /found "and"/);
});

test('errors carry the 1-based position and what was expected', () => {
  const cases: Array<[string, number, RegExp]> = [
    ['', 1, /expected a variable, TRUE, FALSE, NOT or "\(", found end of condition/],
    ['a AND', 6, /expected a variable.*found end of condition/],
    ['a AND OR b', 7, /found "OR"/],
    ['(a OR b', 8, /expected "\)" or an operator/],
    ['a OR b)', 7, /unbalanced "\)"/],
    ['a && b', 3, /unexpected character "&" \(use AND, OR, NOT\)/],
    ['a b', 3, /expected AND, OR or end of condition, found "b"/],
    ['  NOT zz', 7, /unknown variable "zz"/],
    ['()', 2, /found "\)"/],
    ['a OR 1', 6, /unexpected character "1"/],
  ];
  for (const [src, pos, re] of cases) {
    const e = errorOf(src);
    assert.equal(e.pos, pos, `position for ${JSON.stringify(src)}: ${e.message}`);
    assert.match(e.detail, re, src);
  }
  assert.match(errorOf('('.repeat(200) + 'a' + ')'.repeat(200)).detail, /nested deeper than 64/);
});

// ---- config-level ----
const PEERS = { link: { peers: [{ name: 'cloud-b', probe: { kind: 'http', url: 'http://127.0.0.1:9/healthz' } }] } };
const VARS = [
  { name: 'dc1_api', kind: 'flag' },
  { name: 'dc1_api_healthy', kind: 'flag' },
  { name: 'dc2_api_healthy', kind: 'flag' },
  { name: 'link_degraded', kind: 'peer', peer: 'cloud-b' },
  { name: 'llm_busy', kind: 'pool', service: 'llm', metric: 'meanRho', op: '>=', value: 0.9 },
];
const cfgWith = (rules: unknown[], extra: Record<string, unknown> = {}) => ({ ...PEERS, rules: { variables: VARS, sets: [{ name: 'pay', authorities: ['pay.example'], rules, ...extra }] } });
const refused = (c: unknown): string => {
  try {
    resolveConfig(c);
  } catch (e) {
    assert.ok(e instanceof ConfigError, `not a ConfigError: ${e}`);
    return e.message;
  }
  assert.fail('config accepted');
};
const DEF = { id: 'default', condition: 'TRUE', action: { kind: 'route', target: 'dc1' } };

test('config: the rule id, position and expectation are in the refusal', () => {
  const msg = refused(cfgWith([{ id: 'to-dc2', condition: 'NOT dc1_api_healthy AND dc2_api_healthyy', action: { kind: 'route', target: 'dc2' } }, DEF]));
  assert.match(msg, /^config error: rules\.sets\[0\]\.rules\[0\] \(id "to-dc2"\)\.condition: position 25: unknown variable "dc2_api_healthyy"/m);
});

test('config: exactly one default rule, last in evaluation order; equal priorities keep declared order', () => {
  assert.match(refused(cfgWith([{ id: 'x', condition: 'dc1_api', action: { kind: 'route', target: 'a' } }])), /a default rule \(condition TRUE\) is required/);
  assert.match(refused(cfgWith([DEF, { ...DEF, id: 'd2' }])), /exactly one default rule/);
  assert.match(refused(cfgWith([{ ...DEF, priority: 5 }, { id: 'x', condition: 'dc1_api', action: { kind: 'route', target: 'a' } }])), /default rule must come last; it shadows "x"/);
  const c = resolveConfig(cfgWith([{ id: 'first', condition: 'dc1_api', action: { kind: 'route', target: 'a' } }, { id: 'second', condition: 'dc1_api', action: { kind: 'route', target: 'b' } }, { id: 'high', condition: 'dc1_api', priority: 1, action: { kind: 'route', target: 'c' } }, DEF]));
  assert.deepEqual(compileRules(c.rules!).sets[0].rules.map((r) => r.id), ['high', 'first', 'second', 'default']);
});

test('config: actions are validated', () => {
  const act = (action: unknown): string => refused(cfgWith([{ id: 'r', condition: 'dc1_api', action }, DEF]));
  assert.match(act({ kind: 'split', targets: [{ target: 'a', weight: 0 }, { target: 'b', weight: 0 }] }), /weights must sum to more than 0/);
  assert.match(act({ kind: 'split', targets: [{ target: 'a', weight: 1 }, { target: 'a', weight: 1 }] }), /duplicate "a"/);
  assert.match(act({ kind: 'local-reply', status: 700 }), /status: must be an integer 200\.\.599/);
  assert.match(act({ kind: 'local-reply', status: 199 }), /200\.\.599/);
  assert.match(act({ kind: 'local-reply', status: 503, headers: { connection: 'close' } }), /hop-by-hop/);
  assert.match(act({ kind: 'local-reply', status: 503, headers: { ':status': '200' } }), /pseudo-header/);
  assert.match(act({ kind: 'local-reply', status: 503, headers: { 'x-envoy-upstream-service-time': '1' } }), /owned by Envoy/);
  assert.match(act({ kind: 'local-reply', status: 503, headers: { 'content-length': '1' } }), /owned by Envoy or the filter/);
  assert.match(act({ kind: 'local-reply', status: 503, headers: { 'X-Upper': '1' } }), /not a valid lower-case header name/);
  assert.match(act({ kind: 'local-reply', status: 503, headers: { 'x-a': 'a\r\nb' } }), /without CR, LF or NUL/);
  assert.match(act({ kind: 'local-reply', status: 503, body: 'x'.repeat(4097) }), /body: at most 4096 bytes/);
  assert.match(act({ kind: 'route', target: 'bad target' }), /target: must match/);
  assert.match(act({ kind: 'teleport' }), /rules\.sets\[0\]\.rules\[0\]\.action\.kind/);
  assert.match(refused(cfgWith([DEF], { routeHeader: 'x-cross-cloud-status' })), /routeHeader: "x-cross-cloud-status" is owned/);
  // accepted: 95/5 split, local reply with a retry-after header
  const ok = resolveConfig(cfgWith([{ id: 'canary', condition: 'dc1_api', action: { kind: 'split', targets: [{ target: 'stable', weight: 95 }, { target: 'canary', weight: 5 }] } }, { id: 'maint', condition: 'dc2_api_healthy', action: { kind: 'local-reply', status: 503, headers: { 'retry-after': '60' }, body: 'maintenance' } }, DEF]));
  assert.equal(ok.rules!.sets[0].rules.length, 3);
});

test('config: variables — names, keywords, duplicates, unknown peer', () => {
  const withVars = (variables: unknown[]) => ({ ...PEERS, rules: { variables, sets: [] } });
  assert.match(refused(withVars([{ name: 'AND', kind: 'flag' }])), /"AND" is a keyword/);
  assert.match(refused(withVars([{ name: 'x', kind: 'flag' }, { name: 'x', kind: 'flag' }])), /duplicate variable "x"/);
  assert.match(refused(withVars([{ name: 'p', kind: 'peer', peer: 'cloud-z' }])), /rules\.variables\[0\]\.peer: unknown link peer "cloud-z"/);
  assert.match(refused(withVars([{ name: '1x', kind: 'flag' }])), /rules\.variables\[0\]\.name/);
  assert.match(refused(withVars([{ name: 'p', kind: 'probe', probe: { kind: 'http', url: 'ftp://x/' } }])), /probe\.url: must be http/);
});

// ---- fuzz ----
/** xorshift32: the fuzz is reproducible from its seed */
function rng(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s / 4294967296;
  };
}
const NAMES = ['dc1_api', 'dc1_api_healthy', 'dc2_api_healthy', 'link_degraded', 'llm_busy'];
const TOKENS = ['AND', 'OR', 'NOT', '(', ')', 'TRUE', 'FALSE', ...NAMES, 'dc1', 'x', '&&', '!', '1', '"', '\u00e9', '\0', ' ', '\n'];

function genExpr(r: () => number, depth: number): string {
  const x = r();
  if (depth > 4 || x < 0.3) return r() < 0.1 ? (r() < 0.5 ? 'TRUE' : 'FALSE') : NAMES[Math.floor(r() * NAMES.length)];
  if (x < 0.45) return `NOT ${genExpr(r, depth + 1)}`;
  if (x < 0.6) return `(${genExpr(r, depth + 1)})`;
  return `${genExpr(r, depth + 1)} ${r() < 0.5 ? 'AND' : 'OR'} ${genExpr(r, depth + 1)}`;
}

function mutate(r: () => number, s: string): string {
  const n = 1 + Math.floor(r() * 3);
  for (let i = 0; i < n; i++) {
    const at = Math.floor(r() * (s.length + 1));
    const op = r();
    if (op < 0.4) s = s.slice(0, at) + ' ' + TOKENS[Math.floor(r() * TOKENS.length)] + ' ' + s.slice(at);
    else if (op < 0.7) s = s.slice(0, at) + s.slice(at + 1 + Math.floor(r() * 4));
    else s = s.slice(0, at) + String.fromCharCode(Math.floor(r() * 128)) + s.slice(at);
  }
  return s;
}

function genAction(r: () => number, corrupt: boolean): unknown {
  const k = r();
  if (k < 0.3) return { kind: 'route', target: !corrupt || r() < 0.5 ? 'dc' + Math.floor(r() * 3) : 'bad target' };
  if (k < 0.45) return { kind: 'link-status', status: !corrupt || r() < 0.5 ? 'degraded' : 'broken' };
  if (k < 0.7) {
    if (!corrupt) return { kind: 'split', targets: [{ target: 'a', weight: 1 + Math.floor(r() * 99) }, { target: 'b', weight: Math.floor(r() * 3) }] };
    return { kind: 'split', targets: [{ target: 'a', weight: Math.floor(r() * 3) - (r() < 0.3 ? 5 : 0) }, { target: r() < 0.7 ? 'b' : 'a', weight: Math.floor(r() * 2) }] };
  }
  if (k < 0.95) {
    if (!corrupt) return { kind: 'local-reply', status: 200 + Math.floor(r() * 400), headers: { 'retry-after': '5' }, body: 'b'.repeat(Math.floor(r() * 100)) };
    return { kind: 'local-reply', status: Math.floor(r() * 800), headers: { [['connection', ':path', 'x-ok', 'X-Bad', 'te'][Math.floor(r() * 5)]]: 'v' }, body: 'b'.repeat(r() < 0.7 ? 10 : 5000) };
  }
  return corrupt ? (r() < 0.5 ? { kind: 'nope' } : 'route') : { kind: 'route', target: 'x' };
}

test('fuzz: 10,000 generated and mutated rule sets are each a valid set or a clear ConfigError', () => {
  const r = rng(0x5eed);
  let valid = 0;
  let refusedN = 0;
  for (let i = 0; i < 10000; i++) {
    // half the sets are built valid, half carry at least one chance of corruption
    const corrupt = r() < 0.5;
    const bad = (p: number): boolean => corrupt && r() < p;
    const n = 1 + Math.floor(r() * 5);
    const rules: any[] = [];
    for (let j = 0; j < n; j++) {
      let condition = genExpr(r, 0);
      if (bad(0.5)) condition = mutate(r, condition);
      rules.push({ id: bad(0.05) ? 'dup' : `r${j}`, condition, priority: Math.floor(r() * 5) - (bad(0.05) ? 1e9 : 0), action: genAction(r, bad(0.3)) });
    }
    if (!bad(0.1)) rules.push({ id: 'default', condition: bad(0.1) ? mutate(r, 'TRUE') : 'TRUE', priority: -10, action: { kind: 'route', target: 'dc1' } });
    if (bad(0.1)) rules.reverse();
    const cfg = cfgWith(rules);
    let out: ReturnType<typeof resolveConfig> | undefined;
    try {
      out = resolveConfig(cfg);
    } catch (e) {
      assert.ok(e instanceof ConfigError, `case ${i}: threw ${(e as Error)?.constructor?.name}: ${(e as Error)?.message}\n${JSON.stringify(rules)}`);
      for (const p of e.problems) assert.match(p, /^(rules|link)[.\[]/, `case ${i}: problem does not name its field: ${p}`);
      refusedN++;
      continue;
    }
    // valid: it compiles, has its default last, and evaluates on any input without throwing
    const c = compileRules(out.rules!);
    const set = c.sets[0];
    assert.ok(set.rules[set.rules.length - 1].condition.alwaysTrue, `case ${i}: default not last`);
    for (let m = 0; m < 4; m++) {
      const vals = NAMES.map(() => r() < 0.5);
      for (const rule of set.rules) evaluate(rule.condition.code, vals);
    }
    valid++;
  }
  assert.equal(valid + refusedN, 10000);
  // the generator must exercise both outcomes substantially, or the fuzz proves little
  assert.ok(valid > 1000 && refusedN > 1000, `valid ${valid}, refused ${refusedN}`);
});

test('parseCondition never throws anything but ConditionError on random bytes', () => {
  const r = rng(42);
  for (let i = 0; i < 5000; i++) {
    const len = Math.floor(r() * 40);
    let s = '';
    for (let j = 0; j < len; j++) s += r() < 0.5 ? TOKENS[Math.floor(r() * TOKENS.length)] + ' ' : String.fromCharCode(Math.floor(r() * 0x3000));
    try {
      parseCondition(s);
    } catch (e) {
      assert.ok(e instanceof ConditionError, `${JSON.stringify(s)}: ${e}`);
      assert.ok(e.pos >= 1 && e.pos <= s.length + 1, `position ${e.pos} outside 1..${s.length + 1}`);
    }
  }
});
