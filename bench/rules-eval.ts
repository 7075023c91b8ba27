// Rules: evaluation cost for 100 rules over 50 variables (compile once, evaluate per variable
// change), and override propagation through a real etcd from agent 1's admin API to agent 2's
// decision (p50/p99).
//   npx tsx bench/rules-eval.ts --quick      (30 propagation samples; the full run takes 300)
import * as os from 'node:os';
import pino from 'pino';
import { Registry } from 'prom-client';
import { resolveConfig } from '../agent/src/config';
import { compileRules } from '../agent/src/rules/compile';
import { evaluate } from '../agent/src/rules/language';
import { RulesRuntime } from '../agent/src/rules/runtime';
import { startRules } from '../agent/src/rules';
import { startEtcd } from '../test/rules/etcd-server';
import { cli, flag } from './cli';

const { quick } = cli('npx tsx bench/rules-eval.ts', 'Rule evaluation cost and reaction through etcd.', { quick: flag('30 samples (default 300)') });
const SAMPLES = quick ? 30 : 300;
const N_VARS = 50;
const N_RULES = 100;

let seed = 12345;
const rnd = (): number => {
  seed = (Math.imul(seed, 1103515245) + 12345) & 0x7fffffff;
  return seed / 0x80000000;
};
const names = Array.from({ length: N_VARS }, (_, i) => `v${i}_healthy`);
const pick = (): string => names[Math.floor(rnd() * N_VARS)];
/** 3..8 variables per condition, mixed operators, some negations and parentheses */
function condition(): string {
  const n = 3 + Math.floor(rnd() * 6);
  let s = (rnd() < 0.3 ? 'NOT ' : '') + pick();
  for (let i = 1; i < n; i++) {
    const term = (rnd() < 0.3 ? 'NOT ' : '') + pick();
    s = rnd() < 0.2 ? `(${s}) ${rnd() < 0.5 ? 'AND' : 'OR'} ${term}` : `${s} ${rnd() < 0.7 ? 'AND' : 'OR'} ${term}`;
  }
  return s;
}

function median(xs: number[]): number {
  const v = xs.slice().sort((a, b) => a - b);
  return v[v.length >> 1];
}
const pct = (xs: number[], p: number): number => {
  const v = xs.slice().sort((a, b) => a - b);
  return v[Math.min(v.length - 1, Math.floor(p * v.length))];
};

function time(f: () => void, reps: number): number {
  for (let i = 0; i < Math.min(1000, reps); i++) f();
  const runs: number[] = [];
  for (let k = 0; k < 7; k++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < reps; i++) f();
    runs.push(Number(process.hrtime.bigint() - t0) / reps);
  }
  return median(runs); // ns per call
}

const rulesCfg = {
  variables: names.map((name) => ({ name, kind: 'flag' })),
  sets: [
    {
      name: 'bench',
      authorities: ['bench.example'],
      rules: [
        ...Array.from({ length: N_RULES - 1 }, (_, i) => ({ id: `r${i}`, condition: condition(), priority: N_RULES - i, action: { kind: 'route', target: `t${i % 8}` } })),
        { id: 'default', condition: 'TRUE', priority: 0, action: { kind: 'route', target: 'fallback' } },
      ],
    },
  ],
};

const t0 = process.hrtime.bigint();
const cfg = resolveConfig({ rules: rulesCfg }).rules!;
const compiled = compileRules(cfg);
const loadMs = Number(process.hrtime.bigint() - t0) / 1e6;
const set = compiled.sets[0];
const ops = set.rules.reduce((n, r) => n + r.condition.code.length, 0);

// 64 random value vectors, cycled: the cost does not depend on one lucky assignment
const vectors = Array.from({ length: 64 }, () => names.map(() => rnd() < 0.5));
const firstMatchOf = (v: boolean[]): number => {
  for (let i = 0; i < set.rules.length; i++) if (evaluate(set.rules[i].condition.code, v)) return i;
  return -1;
};
const meanFirst = vectors.reduce((n, v) => n + firstMatchOf(v) + 1, 0) / vectors.length;
let hits = 0;
let vi = 0;
const allRulesNs = time(() => {
  const v = vectors[vi++ & 63];
  for (let i = 0; i < set.rules.length; i++) hits += evaluate(set.rules[i].condition.code, v) ? 1 : 0;
}, 5000);
const firstNs = time(() => (hits += firstMatchOf(vectors[vi++ & 63])), 5000);
const vals = vectors[0].slice();
// the engine step the agent runs per variable change: flip a variable, evaluate, publish if changed
let now = 1e12;
const rt = new RulesRuntime(compiled, vals, () => now, 86400_000);
const none = new Map();
rt.evaluate(none);
let k = 0;
const stepNs = time(() => {
  vals[k++ % N_VARS] = rnd() < 0.5;
  now += 10;
  rt.evaluate(none);
}, 20000);

console.log(`load average ${os.loadavg()[0].toFixed(1)} on ${os.cpus().length} cores (figures scale with it)`);
console.log(`rules: ${N_RULES} rules over ${N_VARS} variables, ${ops} bytecode ops in all (config load + compile ${loadMs.toFixed(1)} ms)`);
console.log(`  all ${N_RULES} conditions evaluated (worst case, the default wins): ${(allRulesNs / 1000).toFixed(2)} µs (${(allRulesNs / ops).toFixed(1)} ns per op)`);
console.log(`  first match, random values (rules tried on average: ${meanFirst.toFixed(1)}): ${(firstNs / 1000).toFixed(2)} µs`);
console.log(`  engine step per variable change (evaluate + hysteresis/cooldown + publish): ${(stepNs / 1000).toFixed(2)} µs`);

// ---- override propagation through etcd ----
async function propagation(): Promise<void> {
  const etcd = await startEtcd();
  const token = 'bench-token-0123456789abcdef';
  const prefix = `/switchyard-bench-${process.pid}/`;
  const mk = (admin: boolean) =>
    resolveConfig({
      rules: {
        variables: [{ name: 'x', kind: 'flag' }],
        sets: [{ name: 'pay', authorities: ['pay.example'], rules: [
          { id: 'a', condition: 'x', priority: 2, action: { kind: 'route', target: 'a' } },
          { id: 'b', condition: 'NOT x', priority: 1, action: { kind: 'route', target: 'b' } },
          { id: 'default', condition: 'TRUE', action: { kind: 'route', target: 'c' } },
        ] }],
        admin: { enabled: admin, port: 0 },
        store: { kind: 'etcd', endpoints: [etcd.clientUrl], prefix, healthIntervalMs: 500, dialTimeoutMs: 1000 },
      },
    }).rules!;
  const logger = pino({ level: 'silent' });
  const env = { SWITCHYARD_ADMIN_TOKEN: token };
  const a1 = await startRules({ config: mk(true), logger, registry: new Registry(), env });
  const a2 = await startRules({ config: mk(false), logger, registry: new Registry(), env });
  const lat: number[] = [];
  try {
    for (let i = 0; i < SAMPLES; i++) {
      const want = i % 2 === 0 ? 'a' : 'b';
      const seen = new Promise<number>((resolve) => {
        const on = (s: { to: string }): void => {
          if (s.to !== want) return;
          a2.events.off('switch', on);
          resolve(performance.now());
        };
        a2.events.on('switch', on);
      });
      const body = JSON.stringify({ rule: want, author: 'bench', reason: `sample ${i}`, ttlS: 60 });
      const start = performance.now();
      const r = await fetch(`${a1.adminUrl}/v1/overrides/pay`, { method: 'PUT', body, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' } });
      if (r.status !== 200) throw new Error(`admin PUT: ${r.status} ${await r.text()}`);
      lat.push((await seen) - start);
      await new Promise((res) => setTimeout(res, 20));
    }
  } finally {
    await a1.stop();
    await a2.stop();
    await etcd.dispose();
  }
  console.log(`override propagation, admin PUT on agent 1 -> decision switched on agent 2, through etcd (${SAMPLES} samples${quick ? ', quick' : ''}):`);
  console.log(`  p50 ${pct(lat, 0.5).toFixed(1)} ms, p99 ${pct(lat, 0.99).toFixed(1)} ms, max ${Math.max(...lat).toFixed(1)} ms`);
}

propagation().then(
  () => void hits,
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
