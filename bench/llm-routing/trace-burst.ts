// Trace of a cold-burst cell's placement (issue 20, docs/benchmarks/llm-r9b.md): per worker, the
// requests and groups it served, the group starts (misses) and uncached prompt tokens it computed,
// when its last request ended; the makespan is the last worker's. `tsx bench/llm-routing/trace-burst.ts
// [--seed 1] [--workload grouped|shuffled] [--policy switchyard|cache] [--wasm build/switchyard.wasm]`
import { runFleet } from './fleet';
import { scenarios } from './matrix';
import { publishedFleet } from './published';
import { SglangCacheAware } from './cache-aware';
import { SwitchyardFilterPolicy } from './filter';
import { cli, flag, int, oneOf, str } from '../cli';

const opt = cli('npx tsx bench/llm-routing/trace-burst.ts', "Trace of a cold-burst cell's placement per worker.", {
  seed: int(1, 'seed'),
  workload: oneOf(['grouped', 'shuffled'], 'grouped', 'burst order'),
  policy: oneOf(['switchyard', 'cache'], 'switchyard', 'the filter or the cache-aware router'),
  wasm: str('build/switchyard.wasm', 'filter module'),
  seq: flag('per group, the workers its requests went to'),
  starts: flag("each group's first request: the worker chosen and every worker's groups and requests before it"),
});
const seed = opt.seed;
const key = opt.workload;
const pol = opt.policy;
const { sc } = scenarios(false, seed, [key])[0];
const p = pol === 'cache' ? new SglangCacheAware() : new SwitchyardFilterPolicy({ wasmPath: opt.wasm, agent: { scrapeIntervalMs: 1000 }, name: 'switchyard' });
const r = runFleet(publishedFleet(sc.numBlocks), sc.requests, p, seed);
const os = r.outcomes.filter((o) => !o.shed);
const t0 = Math.min(...os.map((o) => o.arrivalMs));
const groupOf = (i: number): string => sc.requests[i].w.group ?? '';
console.log(`${p.name} ${sc.name} seed ${seed}: ${os.length} served, makespan ${((Math.max(...os.map((o) => o.arrivalMs + o.e2eMs)) - t0) / 1000).toFixed(2)} s`);
console.log('| worker | requests | groups | groups split here (started elsewhere) | misses (< half cached) | uncached tokens | last first token (s) | end (s) |');
console.log('|---|---|---|---|---|---|---|---|');
const firstAt = new Map<string, number>();
for (const o of [...os].sort((a, b) => a.arrivalMs - b.arrivalMs)) if (!firstAt.has(groupOf(o.idx))) firstAt.set(groupOf(o.idx), o.instance);
for (let w = 0; w < 8; w++) {
  const mine = os.filter((o) => o.instance === w);
  const groups = new Set(mine.map((o) => groupOf(o.idx)));
  const split = [...groups].filter((g) => firstAt.get(g) !== w).length;
  const misses = mine.filter((o) => o.cachedTokens < o.promptTokens / 2).length;
  const unc = mine.reduce((a, o) => a + o.promptTokens - o.cachedTokens, 0);
  const lastFt = Math.max(...mine.map((o) => o.arrivalMs + o.ttftMs)) - t0;
  const end = Math.max(...mine.map((o) => o.arrivalMs + o.e2eMs)) - t0;
  console.log(`| w${w} | ${mine.length} | ${groups.size} | ${split} | ${misses} | ${unc} | ${(lastFt / 1000).toFixed(2)} | ${(end / 1000).toFixed(2)} |`);
}
if (opt.seq) {
  // per group in arrival order: the workers its requests went to (run-length), e.g. 3×9 5×7
  const byGroup = new Map<string, number[]>();
  for (const o of [...os].sort((a, b) => a.arrivalMs - b.arrivalMs)) {
    const g = groupOf(o.idx);
    if (!byGroup.has(g)) byGroup.set(g, []);
    byGroup.get(g)!.push(o.instance);
  }
  const line: string[] = [];
  for (const [g, ws] of byGroup) {
    const runs: string[] = [];
    for (let i = 0; i < ws.length;) { let j = i; while (j < ws.length && ws[j] === ws[i]) j++; runs.push(`w${ws[i]}×${j - i}`); i = j; }
    line.push(`${g}: ${runs.join(' ')}`);
  }
  console.log(line.join('\n'));
}
if (opt.starts) {
  // each group's first request in arrival order: its position, the worker chosen, and every
  // worker's groups started / requests sent before it
  const groups = Array.from({ length: 8 }, () => 0), reqs = Array.from({ length: 8 }, () => 0);
  const seen = new Set<string>();
  let pos = 0;
  for (const o of [...os].sort((a, b) => a.arrivalMs - b.arrivalMs)) {
    const g = groupOf(o.idx);
    if (!seen.has(g)) {
      seen.add(g);
      console.log(`#${String(pos).padStart(4)} ${g.padEnd(6)} -> w${o.instance}   groups ${groups.join(' ')}   requests ${reqs.join(' ')}`);
      groups[o.instance]++;
    }
    reqs[o.instance]++;
    pos++;
  }
}
