// The LLM section (type 4) on the agent side: the golden fixture accept-llm.bin decoded by the
// codec's oracle (the filter's as-pect suite decodes the same bytes: snapshot-llm.spec.ts), the
// round trip, the D1 value rules (out of range -> NaN, the record stays), the bounds and the JSON view.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { decodeSnapshot, encodeSnapshot, snapshotToJson } from '../../agent/src/snapshot/codec';
import { MAX_LLM_MODELS, MODEL_BASE, MODEL_LOADED, MODEL_WAITING, type InstanceLlmRecord } from '../../agent/src/snapshot/llm';
import { FIXTURE_DIR } from '../fixtures/snapshot/generate';

test('accept-llm.bin: models with flags, terms, KV usage; out-of-range numbers read as unknown (NaN); esSource', () => {
  const s = decodeSnapshot(readFileSync(join(FIXTURE_DIR, 'accept-llm.bin')));
  assert.ok(s.llm);
  assert.equal(s.llm.length, 4);
  const a = s.llm[0];
  assert.equal(a.addr, '10.0.0.7:8000');
  assert.equal(a.prefillMsPerToken, 0.125);
  assert.equal(a.decodeMsPerToken, 6.25);
  assert.equal(a.kvCacheUsage, 0.4375);
  assert.equal(a.kvSeqs, 24.5);
  assert.equal(a.maxLoras, 2);
  assert.deepEqual(a.models.map((m) => [m.name, m.flags]), [
    ['meta-llama/Llama-3.1-8B-Instruct', MODEL_BASE], ['sql-lora', MODEL_LOADED], ['chat-lora', MODEL_LOADED | MODEL_WAITING], ['summ-lora', MODEL_WAITING], ['idle-lora', 0],
  ]);
  assert.equal(s.llm[1].addr, '[fd00::7]:8000');
  assert.ok(Number.isNaN(s.llm[1].prefillMsPerToken) && Number.isNaN(s.llm[1].decodeMsPerToken) && Number.isNaN(s.llm[1].kvCacheUsage));
  assert.deepEqual(s.llm[1].models, []);
  for (const r of s.llm.slice(2)) {
    assert.ok(Number.isNaN(r.prefillMsPerToken), `${r.addr} prefill`);
    assert.ok(Number.isNaN(r.decodeMsPerToken), `${r.addr} decode`);
    assert.ok(Number.isNaN(r.kvCacheUsage), `${r.addr} kv`);
    assert.ok(Number.isNaN(r.kvSeqs), `${r.addr} kvSeqs (0.5 and 70000 written: out of 1..65535)`);
  }
  assert.equal(s.llm[2].maxLoras, 65535);
  assert.equal(s.llm[2].models[0].flags, MODEL_BASE, 'flag bits 3-7 ignored');
  assert.equal(s.llm[3].models[0].name.length, 255);
  assert.deepEqual(s.instances?.map((r) => r.esSource), ['measured', 'service-median', 'prior']);
  const j = snapshotToJson(s) as { llm: Array<Record<string, unknown>>; instances: Array<Record<string, unknown>> };
  assert.equal(j.llm[1].prefillMsPerToken, null);
  assert.deepEqual(j.llm[0].models, [
    { name: 'meta-llama/Llama-3.1-8B-Instruct', base: true, loaded: false, waiting: false },
    { name: 'sql-lora', base: false, loaded: true, waiting: false },
    { name: 'chat-lora', base: false, loaded: true, waiting: true },
    { name: 'summ-lora', base: false, loaded: false, waiting: true },
    { name: 'idle-lora', base: false, loaded: false, waiting: false },
  ]);
  assert.equal(j.instances[2].esSource, 'prior');
});

test('LLM section round trip; absent when undefined; encoder bounds name the field', () => {
  const rec: InstanceLlmRecord = { service: 'llm', addr: '10.1.1.1:8000', prefillMsPerToken: 0.1, decodeMsPerToken: 7, kvCacheUsage: 0, kvSeqs: 24.5, maxLoras: 4, models: [{ name: 'base', flags: MODEL_BASE }] };
  const back = decodeSnapshot(encodeSnapshot({ seq: 1, generatedAtMs: 1, peers: [], llm: [rec] }));
  assert.deepEqual(back.llm, [{ ...rec, prefillMsPerToken: Math.fround(0.1) }]);
  assert.equal(decodeSnapshot(encodeSnapshot({ seq: 1, generatedAtMs: 1, peers: [] })).llm, undefined);
  const many = Array.from({ length: MAX_LLM_MODELS + 1 }, (_, i) => ({ name: `m${i}`, flags: 0 }));
  assert.throws(() => encodeSnapshot({ seq: 1, generatedAtMs: 1, peers: [], llm: [{ ...rec, models: many }] }), /llm\[0\]\.models: more than 64/);
  assert.throws(() => encodeSnapshot({ seq: 1, generatedAtMs: 1, peers: [], llm: [{ ...rec, addr: 'h:1' }] }), /llm\[0\]\.addr/);
  assert.throws(() => encodeSnapshot({ seq: 1, generatedAtMs: 1, peers: [], llm: [{ ...rec, models: [{ name: 'x'.repeat(256), flags: 0 }] }] }), /llm\[0\]\.models\[0\]\.name: string longer than 255/);
  // D1: an out-of-range term is carried as unknown, the record stays
  const bad = decodeSnapshot(encodeSnapshot({ seq: 1, generatedAtMs: 1, peers: [], llm: [{ ...rec, prefillMsPerToken: -3, kvCacheUsage: 2, kvSeqs: 0 }] }));
  assert.equal(bad.llm?.length, 1);
  assert.ok(Number.isNaN(bad.llm![0].prefillMsPerToken) && Number.isNaN(bad.llm![0].kvCacheUsage) && Number.isNaN(bad.llm![0].kvSeqs));
  assert.equal(bad.llm![0].decodeMsPerToken, 7);
});

test('accept-llm-decode-line.bin: the decode line (section type 5) merged into the LLM records by address; out of range unknown', () => {
  const s = decodeSnapshot(readFileSync(join(FIXTURE_DIR, 'accept-llm-decode-line.bin')));
  assert.ok(s.llm);
  assert.equal(s.llm[0].decodeIdleMs, 10.75);
  assert.equal(s.llm[0].decodeMsPerSeq, 0.1875);
  assert.equal(s.llm[2].decodeIdleMs, undefined);
  assert.equal(s.llm[1].decodeIdleMs, undefined);
  assert.deepEqual(s.unknownSections, []);
});

test('the KV capacity (section type 6): written only when known, merged by address, out of range unknown; a document without it decodes as before', () => {
  const rec: InstanceLlmRecord = { service: 'llm', addr: '10.1.1.1:8000', prefillMsPerToken: NaN, decodeMsPerToken: NaN, kvCacheUsage: 0, kvSeqs: NaN, maxLoras: 0, models: [{ name: 'base', flags: MODEL_BASE }] };
  const known = { ...rec, kvTokens: 424_000 };
  const other = { ...rec, addr: '10.1.1.2:8000', kvTokens: NaN };
  const bad = { ...rec, addr: '10.1.1.3:8000', kvTokens: 0 };
  const buf = encodeSnapshot({ seq: 1, generatedAtMs: 1, peers: [], llm: [known, other, bad] });
  const back = decodeSnapshot(buf);
  assert.equal(back.llm![0].kvTokens, 424_000);
  assert.equal(back.llm![1].kvTokens, undefined, 'unknown: not written');
  assert.equal(back.llm![2].kvTokens, undefined, 'below 1: unknown');
  assert.deepEqual(back.unknownSections, []);
  const json = snapshotToJson(back) as { llm: Array<Record<string, unknown>> };
  assert.equal(json.llm[0].kvTokens, 424_000);
  assert.equal('kvTokens' in json.llm[1], false);
  // no instance known: no section 6, the bytes of an agent that predates it
  const none = encodeSnapshot({ seq: 1, generatedAtMs: 1, peers: [], llm: [rec] });
  assert.ok(none.length < encodeSnapshot({ seq: 1, generatedAtMs: 1, peers: [], llm: [known] }).length);
  assert.deepEqual(none, encodeSnapshot({ seq: 1, generatedAtMs: 1, peers: [], llm: [{ ...rec, kvTokens: NaN }] }));
  assert.equal(decodeSnapshot(none).llm![0].kvTokens, undefined);
});
