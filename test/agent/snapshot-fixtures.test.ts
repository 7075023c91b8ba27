// The golden snapshot fixtures (test/fixtures/snapshot/) on the agent side: the committed bytes
// are what the codec writes today, and the codec's decoder (the test oracle) reads each one as
// the manifest says. The filter's as-pect suite decodes the same files
// (filter/__tests__/snapshot-fixtures.spec.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { decodeSnapshot, encodeSnapshot, snapshotToJson, SnapshotDecodeError } from '../../agent/src/snapshot/codec';
import type { RuleDecision } from '../../agent/src/rules/engine';
import { judge, INSTANCE_NUMBER_RULES, isEndpointAddress } from '../../agent/src/snapshot/rules';
import { buildFixtures, manifestOf, FIXTURE_DIR, RULE_DECISIONS, NUMBER_CASES, NUMBER_TABLE, RTT_TABLE, BOUNDARY_ROWS } from '../fixtures/snapshot/generate';

const manifest = JSON.parse(readFileSync(join(FIXTURE_DIR, 'manifest.json'), 'utf8')) as { fixtures: { file: string; expect: string; error?: string }[] };

test('committed fixtures are what the codec writes (regenerate deliberately: npx tsx test/fixtures/snapshot/generate.ts)', () => {
  const built = buildFixtures();
  assert.equal(readFileSync(join(FIXTURE_DIR, 'manifest.json'), 'utf8'), manifestOf(built), 'manifest.json');
  for (const f of built) assert.equal(readFileSync(join(FIXTURE_DIR, f.file)).toString('hex'), f.bytes.toString('hex'), f.file);
});

test('every fixture decodes (or is refused) as the manifest says', () => {
  assert.ok(manifest.fixtures.length >= 20);
  for (const f of manifest.fixtures) {
    const bytes = readFileSync(join(FIXTURE_DIR, f.file));
    if (f.expect === 'accept') {
      assert.doesNotThrow(() => decodeSnapshot(bytes), f.file);
    } else {
      assert.throws(() => decodeSnapshot(bytes), (e: unknown) => e instanceof SnapshotDecodeError && e.message.includes(f.error!), `${f.file}: error containing "${f.error}"`);
    }
  }
});

test('accept-full.bin: header, boot id, every reason, every slots source, IPv6, unknown section', () => {
  const d = decodeSnapshot(readFileSync(join(FIXTURE_DIR, 'accept-full.bin')));
  assert.equal(d.seq, 1_764_000_000_000_007);
  assert.equal(d.generatedAtMs, 1_764_000_000_456);
  assert.equal(d.bootId, 0x5eed0001);
  assert.deepEqual(d.unknownSections, [77]);
  assert.deepEqual(d.peers.map((p) => [p.name, p.state, p.lastRttMs, p.recoverStreak]), [['cloud-b', 'degraded', 120.5, 3], ['cloud-c', 'normal', NaN, 65535]]);
  const inst = d.instances!;
  assert.deepEqual(inst.map((i) => i.reason), ['ok', 'unreachable', 'http_error', 'parse_error', 'stale', 'no_data', 'invalid_data']);
  assert.deepEqual(inst.map((i) => i.slotsSource), ['inferred', 'configured', 'exporter', 'inferred', 'inferred', 'inferred', 'inferred']);
  assert.deepEqual(inst.slice(0, 3).map((i) => i.addr), ['10.0.0.7:8000', '[fd00::7]:8000', '[::ffff:10.1.2.3]:65535']);
  assert.deepEqual([inst[0].healthy, inst[0].rho, inst[0].esMs, inst[0].slots, inst[0].dataAgeMs], [true, 0.5, 100, 4, 250]);
  const json = snapshotToJson(d) as { bootId: number; instances: { slotsSource: string }[] };
  assert.equal(json.bootId, 0x5eed0001);
  assert.deepEqual(json.instances.map((i) => i.slotsSource).slice(0, 3), ['inferred', 'configured', 'exporter']);
});

test('accept-numbers.bin: each field x {NaN, +Inf, -Inf, 0, negative, denormal, huge} and the boundaries (D1)', () => {
  const d = decodeSnapshot(readFileSync(join(FIXTURE_DIR, 'accept-numbers.bin')));
  const expectedRows = Object.keys(NUMBER_TABLE).length * Object.keys(NUMBER_CASES).length + BOUNDARY_ROWS.length;
  assert.equal(d.instances!.length, expectedRows);
  for (const r of d.instances!) {
    const [field, c, outcome] = r.service.split('|');
    const v = (r as unknown as Record<string, number>)[field];
    if (outcome === 'invalid') {
      assert.deepEqual([r.healthy, r.reason], [false, 'invalid_data'], r.service);
      if (field === 'slots') assert.equal(r.slots, 1, `${r.service}: bad slots read as 1`);
    } else {
      assert.deepEqual([r.healthy, r.reason], [true, 'ok'], r.service);
      if (outcome === 'unknown') assert.ok(Number.isNaN(v), r.service);
    }
    void c;
  }
  assert.equal(d.peers.length, 2 * Object.keys(NUMBER_CASES).length);
  for (const p of d.peers) {
    const [field, , outcome] = p.name.split('|');
    const v = (p as unknown as Record<string, number>)[field];
    assert.equal(Number.isNaN(v), outcome === 'unknown', p.name);
  }
});

test('rules.ts agrees with the written-out table, and the encoder applies it before writing', () => {
  const cases = Object.values(NUMBER_CASES);
  for (const rule of INSTANCE_NUMBER_RULES) {
    assert.deepEqual(cases.map((v) => judge(v, rule)), NUMBER_TABLE[rule.field], rule.field);
  }
  for (const [field, , v, outcome] of BOUNDARY_ROWS) assert.equal(judge(v, INSTANCE_NUMBER_RULES.find((r) => r.field === field)!), outcome, `${field} ${v}`);
  assert.deepEqual(cases.map((v) => judge(v, { min: 0, max: 3_600_000, nanIsUnknown: true }) === 'ok' ? 'ok' : 'unknown'), RTT_TABLE);
  assert.equal(isEndpointAddress('[::1]:1'), true);
  assert.equal(isEndpointAddress('255.255.255.255:65535'), true);
  assert.equal(isEndpointAddress('0.0.0.0:80'), true);
});

// the same lists as filter/__tests__/snapshot-rules.spec.ts
const VALID = ['0.0.0.0:80', '255.255.255.255:65535', '10.0.0.7:8000', '[::]:1', '[::1]:8000', '[1:2:3:4:5:6:7:8]:80',
  '[1::]:80', '[fd00::7]:8000', '[::ffff:1.2.3.4]:80', '[FD00:0:0:0:0:0:0:AbCd]:443'];
const INVALID = ['', ':80', '1.2.3.4:', '1.2.3.4', '1.2.3:80', '1.2.3.4.5:80', '01.2.3.4:80', '1.2.3.256:80', '1.2.3.4:0',
  '1.2.3.4:65536', '1.2.3.4:08', '1.2.3.4:+80', 'a.b.c.d:80', '[1:2:3:4:5:6:7:8:9]:80', '[:1]:80', '[1:]:80', '[]:80', '[::1]80',
  '[1::2::3]:80', '[12345::]:80', '[::1%lo]:80', '::1:80', '[::1.2.3]:80', '1.2.3.4:80\r\n', ' 1.2.3.4:80'];

test('endpoint addresses: the same accept and refuse lists as the filter', () => {
  for (const a of VALID) assert.equal(isEndpointAddress(a), true, a);
  for (const a of INVALID) assert.equal(isEndpointAddress(a), false, JSON.stringify(a));
});

test('accept-rules.bin: every action kind, an override, because, UTF-8 override text; the JSON view carries the decisions', () => {
  const d = decodeSnapshot(readFileSync(join(FIXTURE_DIR, 'accept-rules.bin')));
  assert.deepEqual(d.rules, RULE_DECISIONS);
  const json = snapshotToJson(d) as { rules: unknown[] };
  assert.deepEqual(json.rules, RULE_DECISIONS);
});

test('RULES section: an encoder round trip keeps each decision; the agent refuses what the filter refuses', () => {
  const ds: RuleDecision[] = [{ ...RULE_DECISIONS[0], because: Array.from({ length: 80 }, (_, i) => ({ name: `v${i}`, value: i % 2 === 0 })) }];
  const back = decodeSnapshot(encodeSnapshot({ seq: 1, generatedAtMs: 1, peers: [], rules: ds })).rules!;
  assert.equal(back[0].because.length, 64, 'because is cut to 64 variables (it is for humans)');
  assert.deepEqual(back[0].action, ds[0].action);
  assert.throws(() => encodeSnapshot({ seq: 1, generatedAtMs: 1, peers: [], rules: [{ ...RULE_DECISIONS[2], action: { kind: 'local-reply', status: 503, headers: {}, body: 'x'.repeat(4097) } }] }), /body: string longer than 4096 bytes/);
  const long = 'é'.repeat(200);
  const o = decodeSnapshot(encodeSnapshot({ seq: 1, generatedAtMs: 1, peers: [], rules: [{ ...RULE_DECISIONS[1], override: { ...RULE_DECISIONS[1].override!, reason: long } }] })).rules![0];
  assert.ok(Buffer.byteLength(o.override!.reason) <= 255 && long.startsWith(o.override!.reason), 'override reason cut on a code point boundary');
});
