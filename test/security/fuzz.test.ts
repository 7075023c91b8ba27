// Issue 11, "Evidence": the fuzzers of bench/fuzz.ts with bounded counts (seeded, deterministic).
// The long runs (10^5 snapshots, 10^4 configurations, 10^5 requests) are `tsx bench/fuzz.ts`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fuzzConfigs, fuzzRequests, fuzzSnapshots } from '../../bench/fuzz';

const classCount = (m: Map<string, number>, re: RegExp): number => [...m].filter(([k]) => re.test(k)).reduce((s, [, v]) => s + v, 0);

test('fuzz: 3,000 mutated snapshots through the real filter: 0 traps, each adopted exactly when the agent decoder accepts it, decisions kept otherwise', async () => {
  const r = await fuzzSnapshots(3000, 11);
  assert.equal(r.traps, 0);
  assert.deepEqual(r.disagreements, []);
  // Not vacuous: every mutation class ran, and both verdicts occurred in numbers.
  for (const kind of ['bitflip', 'bitflip+crc', 'truncate', 'truncate+crc', 'splice+crc', 'header+crc', 'number', 'record', 'sections', 'garbage']) {
    assert.ok(classCount(r.classes, new RegExp(`^${kind.replace('+', '\\+')} `)) > 50, `${kind}: ${classCount(r.classes, new RegExp(`^${kind.replace('+', '\\+')} `))}`);
  }
  assert.ok(classCount(r.classes, / refuse /) > 1000, 'refusals counted');
  assert.ok(classCount(r.classes, / adopt$/) > 300, 'valid mutants adopted');
  assert.ok(classCount(r.classes, /CRC mismatch/) > 100 && classCount(r.classes, /duplicate section/) > 20 && classCount(r.classes, /future-dated|older seq/) > 5,
    [...r.classes.keys()].join('\n'));
});

test('fuzz: 400 mutated plugin configurations: 0 traps, refusals name the field, the filter and the JSON Schema (ajv) agree', async () => {
  const r = await fuzzConfigs(400, 12);
  assert.equal(r.traps, 0);
  assert.deepEqual(r.disagreements, []);
  assert.ok(r.accepted >= 30 && r.refused >= 200, `${r.accepted} accepted, ${r.refused} refused`);
});

test('fuzz: 5,000 hostile requests (authorities, control characters, 100 KB values, 500 headers, spoofed and upstream-set filter headers): 0 traps, the filter owns its headers both ways', async () => {
  const r = await fuzzRequests(5000, 13);
  assert.equal(r.traps, 0);
  assert.deepEqual(r.disagreements, []);
  // Each path was exercised: link status, placement with debug on and off, other authorities.
  for (const k of ['link', 'placed', 'placed+debug', 'other']) assert.ok((r.classes.get(k) ?? 0) > 200, `${k}: ${r.classes.get(k)}`);
});
