// Figures of the cold-burst run (bench/llm-routing/cold-burst.ts): served, refused, req/s, TTFT P99,
// prefix hit rate per seed. `npm run build:filter` first (or pass --wasm).
import { runColdBurst } from './cold-burst';
  const arg = (k: string): string | undefined => { const i = process.argv.indexOf(k); return i >= 0 ? process.argv[i + 1] : undefined; };
  const seeds = (arg('--seeds') ?? '1,2').split(',').map(Number);
  const n = Number(arg('--n') ?? 512);
  const wasmPath = arg('--wasm');
  console.log(`cold burst: ${n} standard requests within 200 ms on the idle 8-instance fleet (llama-3-8b: 6 instances), shipped defaults${wasmPath ? `, ${wasmPath}` : ''}`);
  console.log('| seed | served | refused (429) | req/s | TTFT P99 (s) | prefix hit rate |');
  console.log('|---|---|---|---|---|---|');
  for (const seed of seeds) {
    const x = runColdBurst({ seed, n, wasmPath });
    console.log(`| ${seed} | ${x.served} | ${x.refused} | ${x.reqPerS.toFixed(1)} | ${x.ttftP99S.toFixed(2)} | ${(100 * x.hitRate).toFixed(0)} % |`);
  }
