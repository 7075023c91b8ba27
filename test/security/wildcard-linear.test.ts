// Issue 24 #1: with a wildcard authority configured (the contract's example has one), a 60 KB
// Host of 30,000 one-letter labels cost a worker 17-21 ms per request (a suffix substring built
// for every label: quadratic; ~250x a 60 KB Host without dots, 3.8x per doubling). The match now
// scans only as many characters from the end as the longest wildcard suffix, by index.
// Best-of batches through the real filter (bench/hostile-authorities.ts wildcardCost); the bounds
// are loose for a shared machine, the old build is off by orders of magnitude.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { wildcardCost } from '../../bench/hostile-authorities';

test('issue 24 #1: a 60 KB Host of one-letter labels costs about what one without dots does, and doubling it about doubles the cost', async () => {
  const flat = await wildcardCost(60_000, 'flat', 4, 3);
  const labels = await wildcardCost(60_000, 'labels', 4, 3);
  assert.ok(labels <= 5 * flat, `30,000 labels: ${labels.toFixed(0)} µs/request, no dots: ${flat.toFixed(0)} µs/request`);
  const labels2 = await wildcardCost(120_000, 'labels', 4, 3);
  assert.ok(labels2 <= 3 * labels, `60,000 labels: ${labels2.toFixed(0)} µs/request, 30,000: ${labels.toFixed(0)} µs/request (quadratic is 4x)`);
});
