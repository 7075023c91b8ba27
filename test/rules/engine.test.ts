// The decision engine on a virtual clock: hysteresis (hold time, evaluation count), cooldown,
// overrides (bypass, expiry, bounded expiry), determinism, and the seed's scenarios.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { resolveConfig } from '../../agent/src/config';
import { compileRules } from '../../agent/src/rules/compile';
import { RulesRuntime } from '../../agent/src/rules/runtime';
import { Variables } from '../../agent/src/rules/variables';
import type { OverrideEntry } from '../../agent/src/overrides/types';

/** the seed's rules (003), with its canary and maintenance cases as flags */
const SEED_RULES = {
  variables: [
    { name: 'dc1_api_healthy', kind: 'flag' },
    { name: 'dc1_db_healthy', kind: 'flag' },
    { name: 'dc2_api_healthy', kind: 'flag' },
    { name: 'dc2_db_healthy', kind: 'flag' },
    { name: 'canary_release_active', kind: 'flag' },
    { name: 'maintenance_mode_on', kind: 'flag' },
  ],
  sets: [
    {
      name: 'payments',
      authorities: ['payments.example'],
      rules: [
        { id: 'maintenance', condition: 'maintenance_mode_on', priority: 1000, action: { kind: 'local-reply', status: 503, headers: { 'retry-after': '120' }, body: 'down for maintenance' } },
        { id: 'dc1-canary', condition: 'dc1_api_healthy AND dc1_db_healthy AND canary_release_active', priority: 110, action: { kind: 'split', targets: [{ target: 'dc1', weight: 95 }, { target: 'dc1-canary', weight: 5 }] } },
        { id: 'dc1-primary', condition: 'dc1_api_healthy AND dc1_db_healthy', priority: 100, action: { kind: 'route', target: 'dc1' } },
        { id: 'dc2-failover', condition: '(NOT dc1_api_healthy OR NOT dc1_db_healthy) AND dc2_api_healthy AND dc2_db_healthy', priority: 90, action: { kind: 'route', target: 'dc2' } },
        { id: 'default', condition: 'TRUE', priority: 0, action: { kind: 'route', target: 'dc1' } },
      ],
    },
  ],
};

function setup(rulesCfg: any, start = 1_000_000) {
  const cfg = resolveConfig({ rules: rulesCfg }).rules!;
  const compiled = compileRules(cfg);
  let t = start;
  const now = () => t;
  const vars = new Variables(compiled.variables, { now });
  const rt = new RulesRuntime(compiled, vars.values, now, cfg.admin.maxOverrideS * 1000);
  const overrides = new Map<string, OverrideEntry>();
  const slot = (n: string) => compiled.slots.get(n)!;
  const h = {
    cfg,
    rt,
    vars,
    overrides,
    get t() {
      return t;
    },
    /** advance the clock and evaluate, like the runtime's timer would */
    advance(ms: number) {
      t += ms;
      return rt.evaluate(overrides);
    },
    set(name: string, v: boolean) {
      vars.set(slot(name), v, 'test');
      return rt.evaluate(overrides);
    },
    rule: () => rt.decisions()[0].ruleId,
    decision: () => rt.decisions()[0],
  };
  rt.evaluate(overrides);
  return h;
}

const fast = (r: any) => ({ ...r, sets: r.sets.map((s: any) => ({ ...s, hysteresis: { evaluations: 0, holdMs: 0 }, cooldownS: 0 })) });

test('seed scenarios: DC1 healthy -> DC1; DC1 API down, DC2 healthy -> DC2; both down -> default; canary -> 95/5; maintenance -> local reply', () => {
  const h = setup(fast(SEED_RULES));
  assert.equal(h.rule(), 'default', 'nothing healthy yet');
  for (const v of ['dc1_api_healthy', 'dc1_db_healthy', 'dc2_api_healthy', 'dc2_db_healthy']) h.set(v, true);
  assert.equal(h.rule(), 'dc1-primary');
  assert.deepEqual(h.decision().action, { kind: 'route', target: 'dc1' });
  assert.deepEqual(h.decision().because, [
    { name: 'dc1_api_healthy', value: true },
    { name: 'dc1_db_healthy', value: true },
  ]);

  h.set('dc1_api_healthy', false);
  assert.equal(h.rule(), 'dc2-failover');
  assert.deepEqual(h.decision().action, { kind: 'route', target: 'dc2' });
  assert.deepEqual(
    h.decision().because.map((b) => `${b.name}=${b.value}`),
    ['dc1_api_healthy=false', 'dc1_db_healthy=true', 'dc2_api_healthy=true', 'dc2_db_healthy=true'],
  );

  h.set('dc2_api_healthy', false);
  assert.equal(h.rule(), 'default');

  h.set('dc1_api_healthy', true);
  h.set('dc2_api_healthy', true);
  h.set('canary_release_active', true);
  assert.equal(h.rule(), 'dc1-canary');
  assert.deepEqual(h.decision().action, { kind: 'split', targets: [{ target: 'dc1', weight: 95 }, { target: 'dc1-canary', weight: 5 }] });

  h.set('maintenance_mode_on', true);
  assert.equal(h.rule(), 'maintenance');
  assert.deepEqual(h.decision().action, { kind: 'local-reply', status: 503, headers: { 'retry-after': '120' }, body: 'down for maintenance' });
  const v = h.decision().version;
  h.advance(10_000);
  assert.equal(h.decision().version, v, 'the version moves only when the decision does');
});

test('shipped defaults: a new outcome waits holdMs 500, and switches are at least cooldownS 5 apart', () => {
  const h = setup(SEED_RULES);
  assert.deepEqual(h.cfg.sets[0].hysteresis, { evaluations: 0, holdMs: 500 });
  assert.equal(h.cfg.sets[0].cooldownS, 5);
  assert.equal(h.rule(), 'default', 'the first decision is immediate');
  h.set('dc1_api_healthy', true);
  h.set('dc1_db_healthy', true);
  assert.equal(h.rule(), 'default', 'held back by the hold time');
  assert.equal(h.rt.nextWake(new Map(), new Map()), h.t + 500, 'the runtime is told when to come back');
  h.advance(499);
  assert.equal(h.rule(), 'default');
  const sw = h.advance(1);
  assert.equal(h.rule(), 'dc1-primary');
  assert.equal(sw.length, 1);
  assert.equal(sw[0].cause, 'rules');
  // DC1 fails right after: hold passes at +500 ms, but the cooldown holds until +5 s
  h.set('dc1_api_healthy', false);
  h.advance(600);
  assert.equal(h.rule(), 'dc1-primary', 'cooldown');
  assert.equal(h.rt.setStatuses()[0].pending?.waitingFor, 'cooldown');
  assert.equal(h.rt.nextWake(new Map(), new Map()), h.t - 600 + 5000);
  h.advance(5000 - 600 - 1);
  assert.equal(h.rule(), 'dc1-primary');
  h.advance(1);
  assert.equal(h.rule(), 'default');
});

test('hysteresis: a flapping input never switches; an outcome that holds does', () => {
  const h = setup({ ...SEED_RULES, sets: [{ ...SEED_RULES.sets[0], hysteresis: { evaluations: 0, holdMs: 300 }, cooldownS: 0 }] });
  h.set('dc1_db_healthy', true);
  for (let i = 0; i < 50; i++) {
    h.set('dc1_api_healthy', i % 2 === 0);
    h.advance(200);
  }
  assert.equal(h.rule(), 'default', 'flapping every 200 ms under a 300 ms hold');
  assert.equal(h.rt.setStatuses()[0].switches, 0);
  h.set('dc1_api_healthy', true);
  h.advance(299);
  assert.equal(h.rule(), 'default');
  h.advance(1);
  assert.equal(h.rule(), 'dc1-primary');
});

test('hysteresis by evaluation count: H consecutive evaluations with the same outcome', () => {
  const h = setup({ ...SEED_RULES, sets: [{ ...SEED_RULES.sets[0], hysteresis: { evaluations: 3, holdMs: 0 }, cooldownS: 0 }] });
  h.set('dc1_db_healthy', true);
  h.set('dc1_api_healthy', true); // evaluation 1 (the db change evaluated "default" again: no candidate)
  assert.equal(h.rule(), 'default');
  h.advance(10); // 2
  assert.equal(h.rule(), 'default');
  h.set('dc1_api_healthy', false); // outcome back to default: the candidate is dropped
  h.set('dc1_api_healthy', true); // 1 again
  h.advance(10); // 2
  assert.equal(h.rule(), 'default');
  h.advance(10); // 3
  assert.equal(h.rule(), 'dc1-primary');
});

test('an override wins at once over every rule, bypassing hysteresis and cooldown, and ends by itself', () => {
  const h = setup(SEED_RULES);
  h.set('dc1_api_healthy', true);
  h.set('dc1_db_healthy', true);
  h.advance(500);
  assert.equal(h.rule(), 'dc1-primary');
  // in cooldown now: an override must still apply at once
  h.overrides.set('payments', { rule: 'dc2-failover', author: 'alice', reason: 'INC-42 drain dc1', setAtMs: h.t, expiresAtMs: h.t + 60_000 });
  let sw = h.advance(0);
  assert.equal(h.rule(), 'dc2-failover');
  assert.equal(sw[0].cause, 'override-set');
  assert.deepEqual(h.decision().override, { rule: 'dc2-failover', author: 'alice', reason: 'INC-42 drain dc1', setAtMs: h.t, expiresAtMs: h.t + 60_000 });
  assert.equal(h.rt.nextWake(new Map(), h.overrides), h.t + 60_000);
  // the rules keep running underneath: maintenance turns on, still the override
  h.set('maintenance_mode_on', true);
  h.advance(10_000);
  assert.equal(h.rule(), 'dc2-failover');
  assert.equal(h.rt.setStatuses()[0].ruleInForce, 'maintenance');
  h.advance(50_000 - 1);
  assert.equal(h.rule(), 'dc2-failover');
  sw = h.advance(1);
  assert.equal(h.rule(), 'maintenance', 'expired: back to what the rules say, nobody deleted it');
  assert.equal(sw[0].cause, 'override-end');
  assert.equal(h.decision().override, undefined);
  // override by target
  h.overrides.set('payments', { target: 'dc3', author: 'bob', reason: 'r', setAtMs: h.t, expiresAtMs: h.t + 1000 });
  h.advance(0);
  assert.equal(h.rule(), 'override:dc3');
  assert.deepEqual(h.decision().action, { kind: 'route', target: 'dc3' });
});

test('an override naming no rule of the set, or expiring beyond maxOverrideS, is bounded', () => {
  const h = setup(SEED_RULES);
  h.overrides.set('payments', { rule: 'no-such-rule', author: 'x', reason: 'typo in etcdctl', setAtMs: h.t, expiresAtMs: h.t + 1000 });
  h.advance(0);
  assert.equal(h.rule(), 'default');
  assert.equal(h.rt.overrideViews(h.overrides)[0].problem, 'no rule "no-such-rule" in set "payments"');
  // a hand-written record with a year-long expiry ends after maxOverrideS (default 86400 s)
  h.overrides.set('payments', { rule: 'maintenance', author: 'x', reason: 'forgotten', setAtMs: h.t, expiresAtMs: h.t + 365 * 86400_000 });
  h.advance(0);
  assert.equal(h.rule(), 'maintenance');
  h.advance(86400_000);
  assert.equal(h.rule(), 'default');
});

test('deterministic: the same inputs at the same times give the same decisions', () => {
  const script = (seed: number) => {
    const h = setup(SEED_RULES);
    let s = seed;
    const out: string[] = [];
    const names = SEED_RULES.variables.map((v) => v.name);
    for (let i = 0; i < 2000; i++) {
      s = (Math.imul(s, 1103515245) + 12345) & 0x7fffffff;
      if (s % 3 === 0) h.set(names[(s >> 4) % names.length], (s >> 12) % 3 !== 0);
      h.advance(s % 700);
      const d = h.decision();
      out.push(`${d.ruleId}@${d.sinceMs}#${d.version}`);
    }
    return out;
  };
  const a = script(7);
  assert.deepEqual(script(7), a);
  assert.ok(new Set(a).size > 5, `the script must exercise switches (${new Set(a).size})`);
});
