// Admission end to end (issue 20, cause 1): a burst on a cold fleet through the compiled filter
// (build/switchyard.wasm in the embedded host), fed by the agent's own code reading each simulated
// vLLM's /metrics, on the shipped defaults (scrape 1 s, publish 250 ms, concurrency inferred, band
// picker). Before: slots inferred as 1 per idle instance were shed on at 2 per slot and 500 of 512
// requests got a 429. Now: capacity unknown means admit, and the servers queue the burst.
// Run `npm run build:filter` first.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { coldBurst, runColdBurst } from '../../bench/llm-routing/cold-burst';

test('cold fleet, burst of 512 standard requests within 200 ms, shipped defaults: none refused, all served', { timeout: 300_000 }, () => {
  const reqs = coldBurst({ seed: 1 });
  assert.equal(reqs.length, 512);
  assert.ok(reqs.every((r) => r.criticality === 'standard'));
  const r = runColdBurst({ seed: 1 });
  assert.equal(r.refused, 0, `${r.refused} of 512 refused`);
  assert.equal(r.served, 512);
  // the burst is served by the whole llama pool, with prefix reuse (not one instance, not cold prompts)
  assert.ok(r.hitRate > 0.3, `prefix hit rate ${r.hitRate}`);
});
