// Trace of a matrix cell's worst TTFTs (issue 20, llm-r7b.md): per request, where it went, what was
// in prefill on every worker when it arrived (reconstructed from the outcomes: arrived, no first
// token yet), its prefix hit. `tsx bench/llm-routing/trace-tail.ts [--seed 1] [--workload p60]
// [--policy switchyard|cache] [--wasm build/switchyard.wasm] [--worst 12]`
import { runFleet } from './fleet';
import { scenarios } from './matrix';
import { publishedFleet } from './published';
import { SglangCacheAware } from './cache-aware';
import { SwitchyardFilterPolicy } from './filter';
import { cli, flag, int, oneOf, optStr, str } from '../cli';

const opt = cli('npx tsx bench/llm-routing/trace-tail.ts', "Trace of a matrix cell's worst TTFTs.", {
  seed: int(1, 'seed'),
  workload: str('p60', 'matrix workload key'),
  policy: oneOf(['switchyard', 'cache'], 'switchyard', 'the filter or the cache-aware router'),
  wasm: str('build/switchyard.wasm', 'filter module'),
  worst: int(12, 'requests traced', 1),
  debug: flag("the filter's debug header per request"),
  window: optStr('a,b: every arrival in [a, b] ms after the first'),
});
const seed = opt.seed;
const key = opt.workload;
const pol = opt.policy;
const worst = opt.worst;
const { sc } = scenarios(false, seed, [key])[0];
const dbg = new Map<number, string>();
const p = pol === 'cache' ? new SglangCacheAware() : new SwitchyardFilterPolicy({
  wasmPath: opt.wasm, agent: { scrapeIntervalMs: 1000 }, name: 'switchyard',
  ...(opt.debug ? { service: { debug: true }, onDebug: (i: number, d: string) => dbg.set(i, d) } : {}),
});
const r = runFleet(publishedFleet(sc.numBlocks), sc.requests, p, seed);
const os = r.outcomes;
const t0 = Math.min(...os.map((o) => o.arrivalMs));
const groupOf = (i: number): string => sc.requests[i].w.group ?? '';
// requests of a group seen before this one (any worker), and on the chosen worker
const order = [...os].sort((a, b) => a.arrivalMs - b.arrivalMs);
const seenGroup = new Map<string, Set<number>>();
const info = new Map<number, { prior: number; onHolder: boolean; holders: number[] }>();
for (const o of order) {
  const g = groupOf(o.idx);
  const s = seenGroup.get(g) ?? new Set<number>();
  info.set(o.idx, { prior: s.size, onHolder: s.has(o.instance), holders: [...s] });
  s.add(o.instance);
  seenGroup.set(g, s);
}
const inPrefill = (t: number, w: number): number => os.filter((o) => o.instance === w && o.arrivalMs < t && o.arrivalMs + o.ttftMs > t).length;
const prefillTok = (t: number, w: number): number => os.filter((o) => o.instance === w && o.arrivalMs < t && o.arrivalMs + o.ttftMs > t).reduce((a, o) => a + o.promptTokens - o.cachedTokens, 0);
const running = (t: number, w: number): number => os.filter((o) => o.instance === w && o.arrivalMs < t && o.arrivalMs + o.e2eMs > t).length;
const bad = [...os].filter((o) => !o.shed).sort((a, b) => b.ttftMs - a.ttftMs).slice(0, worst);
console.log(`${p.name} ${sc.name} seed ${seed}: P99 TTFT rank ${Math.ceil(0.99 * os.length)} of ${os.length}; first arrival ${t0.toFixed(0)} ms`);
console.log('idx  t-t0(ms) ttft(ms) queued inst prompt cached group prior onHolder holders | per worker at arrival: in-prefill(new tokens) / in-flight');
for (const o of bad.sort((a, b) => a.arrivalMs - b.arrivalMs)) {
  const f = info.get(o.idx)!;
  const per = Array.from({ length: 8 }, (_, w) => `${w}:${inPrefill(o.arrivalMs, w)}(${prefillTok(o.arrivalMs, w)})/${running(o.arrivalMs, w)}`).join(' ');
  console.log(`${String(o.idx).padStart(4)} ${(o.arrivalMs - t0).toFixed(0).padStart(8)} ${o.ttftMs.toFixed(0).padStart(8)} ${o.queuedMs.toFixed(0).padStart(6)} ${String(o.instance).padStart(4)} ${String(o.promptTokens).padStart(6)} ${String(o.cachedTokens).padStart(6)} ${groupOf(o.idx).padStart(6)} ${String(f.prior).padStart(5)} ${String(f.onHolder).padStart(8)} [${f.holders.join(',')}] | ${per}`);
}
if (opt.window !== undefined) {
  const [a, b] = opt.window.split(',').map(Number);
  console.log('\nall arrivals in window:');
  for (const o of order.filter((o) => o.arrivalMs - t0 >= a && o.arrivalMs - t0 <= b)) {
    const f = info.get(o.idx)!;
    console.log(`${String(o.idx).padStart(4)} ${(o.arrivalMs - t0).toFixed(0).padStart(6)} ttft ${o.ttftMs.toFixed(0).padStart(5)} q ${o.queuedMs.toFixed(0).padStart(5)} -> w${o.instance} prompt ${o.promptTokens} cached ${o.cachedTokens} ${groupOf(o.idx)} prior ${f.prior} holder ${f.onHolder} [${f.holders.join(',')}] | ${Array.from({ length: 8 }, (_, w) => `${inPrefill(o.arrivalMs, w)}(${prefillTok(o.arrivalMs, w)})`).join(' ')}`);
    if (dbg.has(o.idx)) console.log(`       debug: ${dbg.get(o.idx)}`);
  }
}
if ('stats' in p) console.log(JSON.stringify((p as SwitchyardFilterPolicy).stats));
