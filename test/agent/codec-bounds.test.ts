// Snapshot codec bounds at their exact values: u64 fields at 2^53 - 1 and 2^53, override text cut
// at exactly 255 UTF-8 bytes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as zlib from 'node:zlib';
import type { RuleDecision } from '../../agent/src/rules/engine';
import { decodeSection, decodeSnapshot, encodeLlmSection, encodeSnapshot, HEADER } from '../../agent/src/snapshot/codec';
import { kvUsageOrNaN, LLM_SECTION, llmTermOrNaN, type InstanceLlmRecord } from '../../agent/src/snapshot/llm';
import { isIPv6 } from '../../agent/src/snapshot/rules';
import { decisionProblem } from '../../agent/src/snapshot/rules-section';
import { RULE_DECISIONS } from '../fixtures/snapshot/generate';

const peers = [{ name: 'cloud-b', state: 'normal' as const, avgRttMs: 5, lastRttMs: 6, degradeStreak: 0, recoverStreak: 0, lastSampleAtMs: 7 }];

function withU64(offset: number, v: bigint): Buffer {
  const doc = encodeSnapshot({ seq: 1, generatedAtMs: 2, peers });
  doc.writeBigUInt64LE(v, offset);
  doc.writeUInt32LE(zlib.crc32(doc.subarray(HEADER.crcFrom)) >>> 0, HEADER.crc);
  return doc;
}

test('u64 fields: 2^53 - 1 is read, 2^53 and above refuse the document naming the field', () => {
  const max = 2n ** 53n - 1n;
  assert.equal(decodeSnapshot(withU64(HEADER.seq, max)).seq, Number.MAX_SAFE_INTEGER);
  assert.equal(decodeSnapshot(withU64(HEADER.generatedAtMs, max)).generatedAtMs, Number.MAX_SAFE_INTEGER);
  assert.equal(encodeSnapshot({ seq: Number.MAX_SAFE_INTEGER, generatedAtMs: 1, peers }).readBigUInt64LE(HEADER.seq), max);
  assert.throws(() => decodeSnapshot(withU64(HEADER.seq, max + 1n)), /seq 9007199254740992 exceeds 2\^53/);
  assert.throws(() => decodeSnapshot(withU64(HEADER.generatedAtMs, 2n ** 64n - 1n)), /generatedAtMs 18446744073709551615 exceeds 2\^53/);
});

test('override author and reason: up to 255 UTF-8 bytes kept whole, longer ones cut to the longest prefix that fits', () => {
  const base = RULE_DECISIONS.find((d) => d.override)!;
  const back = (author: string, reason: string): { author: string; reason: string } => {
    const d = decodeSnapshot(encodeSnapshot({ seq: 1, generatedAtMs: 1, peers: [], rules: [{ ...base, override: { ...base.override!, author, reason } }] })).rules![0];
    return { author: d.override!.author, reason: d.override!.reason };
  };
  const a255 = 'a'.repeat(255);
  assert.deepEqual(back(a255, a255), { author: a255, reason: a255 });
  assert.deepEqual(back('a'.repeat(300), 'b'.repeat(256)), { author: a255, reason: 'b'.repeat(255) });
  // 1 + 2·127 = 255 bytes fit exactly; the 128th 'é' would make 257
  const mixed = 'a' + 'é'.repeat(200);
  assert.equal(back('x', mixed).reason, 'a' + 'é'.repeat(127));
  // a 4-byte code point is never split: 252 + 4 > 255
  assert.equal(back('x', 'c'.repeat(252) + '😀' + 'c').reason, 'c'.repeat(252));
});

const rule = (over: Partial<RuleDecision>): RuleDecision => ({ ...RULE_DECISIONS[0], ...over });
const encodeRules = (rules: RuleDecision[]): Buffer => encodeSnapshot({ seq: 1, generatedAtMs: 1, peers: [], rules });

test('RULES bounds: 64 rule sets and 64 authorities per set are written, one more is refused naming the field', () => {
  const sets = Array.from({ length: 64 }, (_, i) => rule({ set: `s${i}` }));
  assert.equal(decodeSnapshot(encodeRules(sets)).rules!.length, 64);
  assert.throws(() => encodeRules([...sets, rule({ set: 's64' })]), /rules: at most 64 rule sets/);
  const auth = Array.from({ length: 64 }, (_, i) => `h${i}.example`);
  assert.deepEqual(decodeSnapshot(encodeRules([rule({ authorities: auth })])).rules![0].authorities, auth);
  assert.throws(() => encodeRules([rule({ authorities: [...auth, 'h64.example'] })]), /rules\[0\]\.authorities: at most 64/);
});

test('decisionProblem: an authority of 253 characters is a host name, 254 is not', () => {
  const host = (n: number): string => `${'a'.repeat(n - 8)}.example`;
  assert.equal(decisionProblem(rule({ authorities: [host(253)] })), undefined);
  assert.match(decisionProblem(rule({ authorities: ['ok.example', host(254)] })) ?? '', /authority 1: not a lower-case host name/);
});

test('LLM section: a record with an empty service name refuses the document; the terms NaN/out of range read as unknown', () => {
  const rec: InstanceLlmRecord = { service: 'x', addr: '10.0.0.1:8000', prefillMsPerToken: 0.1, decodeMsPerToken: 5, kvCacheUsage: 0.5, kvSeqs: 24, maxLoras: 2, models: [] };
  const ok = encodeLlmSection([rec]);
  assert.equal(decodeSection(LLM_SECTION, ok)[0].service, 'x');
  // the same payload with the service string emptied (u16 count, u16 reserved, u8 length, 'x')
  const empty = Buffer.concat([ok.subarray(0, 4), Buffer.from([0]), ok.subarray(6)]);
  assert.throws(() => decodeSection(LLM_SECTION, empty), /llm\[0\]: empty service/);
  for (const v of [NaN, Infinity, -1, 0, 60_001]) assert.ok(Number.isNaN(llmTermOrNaN(v)), `term ${v}`);
  for (const v of [1e-5, 0.5, 60_000]) assert.equal(llmTermOrNaN(v), v);
  for (const v of [NaN, -0.01, 1.01]) assert.ok(Number.isNaN(kvUsageOrNaN(v)), `kv ${v}`);
  for (const v of [0, 1]) assert.equal(kvUsageOrNaN(v), v);
});

test('isIPv6 on a range: a single ":" at the end of the range is refused even when ":" follows outside it', () => {
  assert.equal(isIPv6('1:2:3:4:5:6:7::', 0, 14), false, '"1:2:3:4:5:6:7:" then ":" outside the range');
  assert.equal(isIPv6('1:2:3:4:5:6:7::', 0, 15), true);
  assert.equal(isIPv6('[1::2:]', 1, 6), false);
  assert.equal(isIPv6('x1::2y', 1, 5), true);
});
