// Figures of the cold-burst run (bench/llm-routing/cold-burst.ts): served, refused, req/s, TTFT P99,
// prefix hit rate per seed. `npm run build:filter` first (or pass --wasm).
import { runColdBurst } from './cold-burst';
import { cli, int, nums, optStr } from '../cli';

const o = cli('npx tsx bench/llm-routing/cold-burst-run.ts', 'A cold burst of standard requests on the idle fleet: served, refused, req/s, TTFT P99, hit rate.', {
  seeds: nums('1,2', 'seeds'),
  n: int(512, 'requests in the burst', 1),
  wasm: optStr('filter module (default build/switchyard.wasm)'),
});
const { seeds, n } = o;
const wasmPath = o.wasm;
console.log(`cold burst: ${n} standard requests within 200 ms on the idle 8-instance fleet (llama-3-8b: 6 instances), shipped defaults${wasmPath ? `, ${wasmPath}` : ''}`);
console.log('| seed | served | refused (429) | req/s | TTFT P99 (s) | prefix hit rate |');
console.log('|---|---|---|---|---|---|');
for (const seed of seeds) {
  const x = runColdBurst({ seed, n, wasmPath });
  console.log(`| ${seed} | ${x.served} | ${x.refused} | ${x.reqPerS.toFixed(1)} | ${x.ttftP99S.toFixed(2)} | ${(100 * x.hitRate).toFixed(0)} % |`);
}
