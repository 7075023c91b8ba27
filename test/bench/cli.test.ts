// The benchmark scripts' flag parser (bench/cli.ts): unknown flags and bad numbers are refused
// with the flag named, defaults apply when absent, and a real script exits 2 on a mistyped flag
// instead of running its defaults.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { CliError, flag, int, list, num, nums, oneOf, optNum, optStr, parseFlags, str, usage } from '../../bench/cli';

const ROOT = path.resolve(__dirname, '../..');
const spec = {
  seed: int(1, 'first seed', 0),
  rate: num(2, 'x saturation', 0),
  quick: flag('short paths'),
  wasm: str('build/switchyard.wasm', 'filter'),
  prev: optStr('previous build'),
  over: optNum('threshold'),
  cells: list('', 'cell ids'),
  ks: nums('1,4', 'proxies'),
  only: oneOf(['all', 'linkerd', 'matrix'] as const, 'all', 'which part'),
};

test('defaults when absent; values parsed when given', () => {
  const d = parseFlags(spec, [])!;
  assert.deepEqual(d, { seed: 1, rate: 2, quick: false, wasm: 'build/switchyard.wasm', prev: undefined, over: undefined, cells: [], ks: [1, 4], only: 'all' });
  const v = parseFlags(spec, ['--seed', '7', '--rate=0.5', '--quick', '--wasm', '/x.wasm', '--prev', 'abc', '--over=-3', '--cells', 'a,,b', '--ks', '16', '--only', 'matrix'])!;
  assert.deepEqual(v, { seed: 7, rate: 0.5, quick: true, wasm: '/x.wasm', prev: 'abc', over: -3, cells: ['a', 'b'], ks: [16], only: 'matrix' });
});

test('refused with the flag named: unknown flag, missing value, bad number, out of range, not one of', () => {
  const refuses = (argv: string[], re: RegExp): void => {
    assert.throws(() => parseFlags(spec, argv), (e: unknown) => e instanceof CliError && re.test((e as Error).message), argv.join(' '));
  };
  refuses(['--seeds', '3'], /seeds/); // the typo that once ran the defaults
  refuses(['--seed'], /seed/);
  refuses(['--seed', 'x'], /--seed must be a number, got "x"/);
  refuses(['--seed', '1.5'], /--seed must be an integer/);
  refuses(['--seed=-1'], /--seed must be >= 0/);
  refuses(['--rate', 'NaN'], /--rate must be a number/);
  refuses(['--rate', ''], /--rate must be a number/);
  refuses(['--ks', '1,x'], /--ks must be a number, got "x"/);
  refuses(['--only', 'both'], /--only must be one of all\|linkerd\|matrix, got "both"/);
  refuses(['stray'], /stray/);
});

test('--help returns no values and usage lists every flag with its default', () => {
  assert.equal(parseFlags(spec, ['--help']), undefined);
  const u = usage('x', 'About.', spec);
  for (const k of Object.keys(spec)) assert.match(u, new RegExp(`--${k}\\b`));
  assert.match(u, /--seed VALUE\s+first seed \(default 1\)/);
  assert.match(u, /--only VALUE\s+which part \(all\|linkerd\|matrix; default all\)/);
});

test('a benchmark script refuses a mistyped flag with exit 2 and prints its usage on --help', () => {
  const run = (args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', path.join(ROOT, 'bench/churn-tick.ts'), ...args], { cwd: ROOT, encoding: 'utf8' });
  const bad = run(['--snapshot', '2']);
  assert.equal(bad.status, 2, bad.stderr);
  assert.match(bad.stderr, /snapshot/);
  assert.match(bad.stderr, /usage: /);
  const help = run(['--help']);
  assert.equal(help.status, 0, help.stderr);
  assert.match(help.stdout, /--snapshots VALUE\s+snapshots of new addresses, one every 100 ms \(default 300\)/);
});
