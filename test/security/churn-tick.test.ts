// Issue 24 #2: per-address state was bounded in memory but not in time. After address churn and
// then a stable fleet past the 10 s grace, the per-tick loops (in-band sync and fusion, in-flight
// sweep/merge/encode) still walked every slot ever allocated: 6.2 ms per tick 40 s after the churn
// against 0.11 ms before. They now walk the live slots (Inflight.liveList), and the free slots
// at the top are given back. A bounded run of bench/churn-tick.ts (shipped refreshMs, in-band on).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { churnTick } from '../../bench/churn-tick';

test('issue 24 #2: 40 s after 150 snapshots of address churn the tick is back to its stable cost', async () => {
  const r = await churnTick({ snapshots: 150, per: 100 });
  // medians of 50 ticks; the old build is ~30x (9.0 ms vs 0.28 ms on the loaded test machine)
  assert.ok(r.after40Ms <= 3 * r.beforeMs + 0.2, JSON.stringify(r));
});
