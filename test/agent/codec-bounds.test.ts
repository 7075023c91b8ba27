// Snapshot codec bounds at their exact values: u64 fields at 2^53 - 1 and 2^53, override text cut
// at exactly 255 UTF-8 bytes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as zlib from 'node:zlib';
import { decodeSnapshot, encodeSnapshot, HEADER } from '../../agent/src/snapshot/codec';
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
