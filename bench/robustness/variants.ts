// Ablations on matrix cells (docs/benchmarks/robust-r7.md): the reference policies and any number
// of filter variants -- another module (a build with one rule changed), a plugin-config tuning,
// or a host setting (worker VMs) -- on the same sample paths as the matrix (same seeds, same
// cells). Tuned or rebuilt variants never count for the gate; this prints P99 to success per seed.
//
//   npx tsx bench/robustness/variants.ts --cells deterministic/c4,s1.1/c1/r0.85/none [--seeds 3] [--refs lr,ewma]
//     --variants '{"shipped":{}, "w1":{"workers":1}, "off":{"tuning":{"inband":{"enabled":false}}}, "X":{"wasm":"build/diag/vX.wasm"}}'
//
// --cells: substrings of matrix cell ids (the first default cell containing each); one proxy only.
import * as path from 'node:path';
import { runPolicy } from '../routing/des';
import { type FilterTuning, SwitchyardPolicy } from '../routing/switchyard';
import { agentSpec, makePath, makePolicy, mean, measuredErrors, type PolicyKey, p99ToSuccess } from './common';
import { defaultCells, endOf, episodesOf, fleetOf, lambdaOf, TIMING } from './matrix';
import { cli, int, list, str } from '../cli';

interface Variant { wasm?: string; tuning?: FilterTuning; workers?: number }

async function main(): Promise<void> {
  const o = cli('npx tsx bench/robustness/variants.ts', 'Filter variants and the reference policies on the matrix cells\' sample paths (P99 to success per seed).', {
    cells: list('', 'substrings of matrix cell ids (the first default cell containing each; one-proxy cells)'),
    seeds: int(3, 'seeds (20261201 + 1000 k)', 1),
    variants: str('{"shipped":{}}', 'JSON: name -> {wasm?, tuning?, workers?}'),
    refs: list('lr,ewma', 'reference policies'),
    wasm: str('build/switchyard.wasm', 'the module of variants that name none'),
  });
  const ids = o.cells;
  const nSeeds = o.seeds;
  const variants = JSON.parse(o.variants) as Record<string, Variant>;
  const refs = o.refs as PolicyKey[];
  const wasm = path.resolve(o.wasm);
  if (!ids.length) throw new Error('--cells: at least one cell id substring');
  for (const id of ids) {
    const cell = defaultCells().find((c) => c.id.includes(id));
    if (!cell) throw new Error(`--cells: no default cell contains ${id}`);
    if (cell.proxies !== 1) throw new Error(`${cell.id}: variants run one proxy only`);
    const fleet = fleetOf(cell), lambda = lambdaOf(cell, fleet), episodes = episodesOf(cell, TIMING), endMs = endOf(cell, TIMING);
    const res: Record<string, number[]> = {};
    for (let k = 0; k < nSeeds; k++) {
      const seed = 20261201 + 1000 * k;
      const sp = makePath({ law: cell.law, meanMs: fleet.meanMs, lambdaPerS: lambda, rho: cell.rho, seed, warmupMs: TIMING.warmupMs, endMs });
      const measuredRange: [number, number] = [sp.firstMeasured, sp.firstMeasured + sp.measured];
      const agent = agentSpec(cell.scrapeMs, cell.c);
      for (const r of refs) {
        const e = makePolicy(r, { fleet, proxies: 1, agent, episodes, seed, wasm, prevWasm: wasm, measuredRange });
        (res[r] ??= []).push(p99ToSuccess(await runPolicy(fleet, sp, e.policy, { episodes, ttftFraction: 0.1, orca: e.orca })));
      }
      for (const [name, v] of Object.entries(variants)) {
        const p = new SwitchyardPolicy({ wasmPath: v.wasm ? path.resolve(v.wasm) : wasm, agent, seed, name, measuredRange, tuning: v.tuning ?? {}, workers: v.workers });
        const out = await runPolicy(fleet, sp, p, { episodes, ttftFraction: 0.1 });
        (res[name] ??= []).push(p99ToSuccess(out));
        (res[`${name} errors`] ??= []).push(measuredErrors(out));
        // measured requests the filter forwarded without an endpoint (all-ineligible: the fallback P2C routed them)
        (res[`${name} fallback`] ??= []).push(p.stats.fallbackMeasured);
      }
    }
    console.log(cell.id);
    for (const [k, v] of Object.entries(res)) console.log(`  ${k.padEnd(24)} ${mean(v).toFixed(1).padStart(9)}  [${v.map((x) => x.toFixed(0)).join(' / ')}]`);
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
