// The robustness benchmark (bench/robustness): the gate's arithmetic, the stall episode of the
// engine, and the --quick harness end to end (the compiled filter deciding in every cell).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { type FleetSpec, RoundRobin, type RunResult, runPolicy } from '../../bench/routing/des';
import { makePath, p99ToSuccess, serviceSampler } from '../../bench/robustness/common';
import { gate, type PolicyFigures } from '../../bench/robustness/matrix';
import { mulberry32 } from '../../sim/inference/prng';

const ROOT = path.resolve(__dirname, '../..');
const fig = (p99: number[], errors = p99.map(() => 0)): PolicyFigures => ({ p99, p99ok: p99, errors, wallMs: 0 });

test('gate: 1.05x the better of LEAST_REQUEST and peak EWMA, and the previous build within its spread', () => {
  const base = { rr: fig([900, 900, 900]), lr: fig([200, 210, 190]), ewma: fig([300, 300, 300]), prev: fig([200, 220, 180]) };
  assert.equal(gate({ ...base, sy: fig([205, 215, 195]) }).pass, true, '1.025x LR passes');
  const slow = gate({ ...base, sy: fig([212, 212, 212]) });
  assert.equal(slow.pass, false, '1.06x LR fails');
  assert.equal(slow.best, 'lr');
  assert.match(slow.reasons.join(), /P99 1\.06x LEAST_REQUEST/);
  // the better reference is the one with the lower P99
  assert.equal(gate({ ...base, ewma: fig([100, 100, 100]), sy: fig([150, 150, 150]) }).best, 'ewma');
  // errors: 1.05x the fewer of the two
  const errs = { ...base, lr: fig([200, 200, 200], [10, 10, 10]), ewma: fig([300, 300, 300], [20, 20, 20]), prev: fig([200, 200, 200], [11, 11, 11]) };
  assert.equal(gate({ ...errs, sy: fig([200, 200, 200], [10, 11, 10]) }).pass, true);
  assert.match(gate({ ...errs, sy: fig([200, 200, 200], [12, 11, 11]) }).reasons.join(), /errors/);
  // no worse than the previous build beyond the spread of its paths (here ±20 ms)
  const prevTight = { ...base, lr: fig([400, 400, 400]), prev: fig([200, 200, 200]) };
  assert.equal(gate({ ...prevTight, sy: fig([230, 230, 230]) }).pass, false, '+30 ms over a previous build with no spread');
  assert.equal(gate({ ...base, lr: fig([400, 400, 400]), sy: fig([215, 215, 215]) }).pass, true, '+15 ms within the previous build\'s ±20 ms');
  // failing fast is not fast: a reference with > 1 % errors has an infinite P99 to success
  const inf = { ...base, lr: fig([Infinity, Infinity, Infinity], [500, 500, 500]), ewma: fig([Infinity, Infinity, Infinity], [400, 400, 400]), prev: fig([900, 900, 900], [10, 10, 10]) };
  assert.equal(gate({ ...inf, sy: fig([800, 800, 800], [9, 9, 9]) }).pass, true);
  // all infinite: the error counts decide
  const allInf = { ...inf, prev: fig([Infinity, Infinity, Infinity], [350, 350, 350]) };
  assert.equal(gate({ ...allInf, sy: fig([Infinity, Infinity, Infinity], [350, 350, 350]) }).pass, true);
  assert.equal(gate({ ...allInf, sy: fig([Infinity, Infinity, Infinity], [430, 430, 430]) }).pass, false);
});

test('p99ToSuccess: an error answer counts as never answered', () => {
  const r = { responseMs: Float64Array.from({ length: 1000 }, (_, i) => i), status: Uint16Array.from({ length: 1000 }, (_, i) => (i < 5 ? 503 : 200)) } as unknown as RunResult;
  assert.equal(p99ToSuccess(r), 994, 'the 5 fast errors push the P99 up by 5 ranks');
  const bad = { responseMs: r.responseMs, status: Uint16Array.from({ length: 1000 }, (_, i) => (i < 11 ? 503 : 200)) } as unknown as RunResult;
  assert.equal(p99ToSuccess(bad), Infinity);
});

test('service laws: the sampler has the requested mean; the bimodal law is 95 % fast, 5 % 10x', () => {
  for (const law of [{ kind: 'lognormal', sigma: 0.5 }, { kind: 'bimodal' }, { kind: 'fixed' }] as const) {
    const s = serviceSampler(law, 80);
    const r = mulberry32(7);
    let sum = 0;
    const n = 200_000;
    const seen = new Set<number>();
    for (let i = 0; i < n; i++) {
      const x = s(r);
      sum += x;
      if (seen.size < 10) seen.add(Math.round(x * 1000));
    }
    assert.ok(Math.abs(sum / n - 80) < 1.5, `${law.kind}: mean ${sum / n}`);
    if (law.kind === 'bimodal') assert.equal(seen.size, 2);
    if (law.kind === 'fixed') assert.equal(seen.size, 1);
  }
});

test('stall episode: the instance answers nothing inside the window, its requests finish after it', async () => {
  const fleet: FleetSpec = { speeds: [1, 1, 1, 1], slots: 4, meanMs: 50, sigma: 0.5 };
  const sp = makePath({ law: { kind: 'lognormal', sigma: 0.5 }, meanMs: 50, lambdaPerS: 100, rho: 0.3, seed: 3, warmupMs: 1000, endMs: 10_000 });
  const ep = { kind: 'stall' as const, inst: 1, fromMs: 4000, toMs: 6000 };
  const finishedAt: Array<[number, number]> = [];
  const p = new RoundRobin();
  const rr = Object.assign(p, { complete: (t: number, _id: number, inst: number) => finishedAt.push([t, inst]) });
  const r = await runPolicy(fleet, sp, rr, { episodes: [ep], ttftFraction: 1 });
  assert.ok(!finishedAt.some(([t, i]) => i === 1 && t >= ep.fromMs && t < ep.toMs), 'no answer from the stalled instance in the window');
  assert.ok(finishedAt.some(([t, i]) => i !== 1 && t >= ep.fromMs && t < ep.toMs), 'the others answer');
  // a request routed to it at the stall's start waits the whole stall
  let worst = 0;
  for (let i = 0; i < r.responseMs.length; i++) {
    const id = sp.firstMeasured + i;
    if (r.choice[id] === 1 && sp.arrivals[id] >= ep.fromMs && sp.arrivals[id] < ep.fromMs + 100) worst = Math.max(worst, r.responseMs[i]);
  }
  assert.ok(worst >= 1900, `a request sent at the stall's start answered after ${worst} ms`);
});

test('robustness --quick: the harness prints one gate verdict per cell, the filter deciding', { timeout: 900_000 }, () => {
  const out = mkdtempSync(path.join(tmpdir(), 'robustness-'));
  const wasm = path.join(ROOT, 'build/switchyard.wasm');
  const r = spawnSync(process.execPath, ['--import', 'tsx', path.join(ROOT, 'bench/robustness/run.ts'), '--quick', '--only', 'matrix', '--prev-wasm', wasm, '--out', out], { cwd: ROOT, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr.slice(-2000));
  const rows = r.stdout.split('\n').filter((l) => /^\| \d+ \|/.test(l));
  assert.equal(rows.length, 2, r.stdout);
  for (const l of rows) assert.match(l, /\| (PASS|\*\*FAIL\*\*.*) \|$/);
  assert.match(r.stdout, /gate: \d+ PASS, \d+ FAIL of 2 cells/);
  const doc = JSON.parse(readFileSync(path.join(out, 'robustness.json'), 'utf8'));
  const bh = doc.matrix.find((c: { cell: { episode: string } }) => c.cell.episode === 'blackhole');
  const mean = (v: number[]): number => v.reduce((a, b) => a + b, 0) / v.length;
  // the black hole: round robin sends it its share (errors), the oracle none
  assert.ok(mean(bh.policies.rr.errors) > 50, `round robin errors ${bh.policies.rr.errors}`);
  assert.equal(mean(bh.policies.oracle.errors), 0);
  for (const k of ['rr', 'lr', 'ewma', 'wrr', 'prev', 'sy', 'oracle']) assert.equal(bh.policies[k].p99.length, 2, k);
});
