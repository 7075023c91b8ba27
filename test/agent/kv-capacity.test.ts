// The KV capacity the agent publishes (kvSeqs): running sequences ÷ KV-cache usage, smoothed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ALPHA, KvCapacity, MIN_USAGE } from '../../agent/src/inference/kv-capacity';

test('KV capacity: running ÷ usage, smoothed over scrapes', () => {
  const k = new KvCapacity();
  assert.ok(Number.isNaN(k.value()), 'unknown before the first usable scrape');
  assert.equal(k.observe(12, 0.5), 24);
  assert.equal(k.value(), 24);
  // the next scrape says 30 sequences fit: the estimate moves by ALPHA of the difference
  k.observe(15, 0.5);
  assert.ok(Math.abs(k.value() - (24 + ALPHA * 6)) < 1e-9);
});

test('KV capacity: scrapes that say little are skipped, the last estimate kept', () => {
  const k = new KvCapacity();
  k.observe(20, 0.8);
  for (const [running, usage] of [[0, 0.5], [3, MIN_USAGE / 2], [undefined, 0.5], [10, undefined], [NaN, 0.5], [10, NaN], [10, 1.5], [10, -0.2], [Infinity, 0.5]] as Array<[number | undefined, number | undefined]>) {
    k.observe(running, usage);
    assert.equal(k.value(), 25, `running ${running}, usage ${usage}`);
  }
  // a cache at MIN_USAGE counts
  k.observe(1, MIN_USAGE);
  assert.ok(Math.abs(k.value() - (0.8 * 25 + 0.2 * 10)) < 1e-9);
});

test('KV capacity: outside 1..65535 sequences it is published as unknown', () => {
  const k = new KvCapacity();
  k.observe(70_000, 1);
  assert.ok(Number.isNaN(k.value()));
});
