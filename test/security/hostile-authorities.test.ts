// Issue 11 #2: distinct hostile authorities must not grow a worker VM's memory (the authority
// cache was bounded in entries, not bytes: 8,200 distinct 60 KB authorities took 1 GiB).
// A bounded-count run of bench/hostile-authorities.ts (10^6 there).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { hostileAuthorities } from '../../bench/hostile-authorities';

test('wasm memory stays bounded under distinct large hostile authorities', async () => {
  // 20,000 cache-sized authorities overflow the 256 KiB cache many times; 2,000 × 60 KB (120 MB
  // of authorities) took the old filter past 100 MiB.
  const r = await hostileAuthorities(20_000, 300, 2000);
  assert.ok(r.afterSmallMiB - r.startMiB <= 4, JSON.stringify(r));
  assert.ok(r.afterLargeMiB - r.startMiB <= 8, JSON.stringify(r));
});
