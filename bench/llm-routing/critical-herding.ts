// Probe (llm-r14a.md): the matrix's Poisson, no-shared-prefix and eviction-heavy workloads (8 identical
// workers) with every request critical, full mode, seeds 1-2: whether critical requests' own-prefill-rate
// term (picker-calm.ts) herds them onto the instance whose estimate happened to be lowest.
//   npx tsx bench/llm-routing/critical-herding.ts <abs path to a filter build>
import { scenarios } from './matrix';
import { runFleet } from './fleet';
import { publishedFleet } from './published';
import { SwitchyardFilterPolicy } from './filter';
import { quantile } from './report';
const wasm = process.argv[2];
for (const seed of [1, 2]) for (const { key, sc } of scenarios(false, seed, ['p60', 'p90', 'ns', 'ev'])) {
  for (const r of sc.requests) (r as { criticality: string }).criticality = 'critical';
  const p = new SwitchyardFilterPolicy({ wasmPath: wasm, agent: { scrapeIntervalMs: 1000 }, name: 'x' });
  const res = runFleet(publishedFleet(sc.numBlocks), sc.requests, p, seed);
  const m = res.outcomes.filter((o) => !o.shed);
  const t = m.map((o) => o.ttftMs);
  console.log(`seed ${seed} ${key}: TTFT P50 ${quantile(t, 0.5).toFixed(0)} P99 ${quantile(t, 0.99).toFixed(0)} ms, sent per instance ${res.sent.join(',')}`);
}
