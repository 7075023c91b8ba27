// Trace of the overload workload's critical tail (issue 20, llm-r8c.md): the switchyard-filter
// (1000 ms) row of run.ts's overload cells, one seed, 1× or 2×; per critical request with TTFT
// over --over ms: where it went, its queue wait, preemptions, the filter's debug header, and
// per instance at its arrival: queued (by criticality) / running, and the last scrape's
// waiting / running / KV. `tsx bench/llm-routing/trace-overload.ts [--seed 3] [--rate 2]
// [--over 800] [--wasm build/switchyard.wasm] [--window a,b] [--by-model]`
import { runFleet, type RoutingPolicy } from './fleet';
import { fleet, prefixHeavy } from './scenarios';
import { SwitchyardFilterPolicy } from './filter';
import type { Scraped } from './scrape';
import { LlmEngine } from '../../sim/inference/llm/engine';
import { quantile } from './report';
import { cli, flag, int, num, oneOf, optNum, optStr, str } from '../cli';

const opt = cli('npx tsx bench/llm-routing/trace-overload.ts', "Trace of the overload workload's critical tail, one seed, 1x or 2x.", {
  seed: int(3, 'seed'),
  rate: oneOf(['1', '2'], '2', 'load: 1x or 2x'),
  over: num(800, 'trace the critical requests with TTFT over this, ms'),
  wasm: str('build/switchyard.wasm', 'filter module'),
  debug: flag("the filter's debug header per request"),
  'by-model': flag('the critical TTFT P99 per pool'),
  window: optStr('a,b: every arrival in [a, b] ms'),
  inst: optNum('with --window: only the requests sent to this instance (and the shed)'),
  engine: optStr('idx,a,b: log the engine request idx was sent to, each step in [a, b] ms'),
});
const seed = opt.seed;
const x = Number(opt.rate);
const over = opt.over;
const sc = prefixHeavy({ seed, durationMs: 50_000, warmupMs: 12_000, ratePerS: x === 1 ? 30 : 50 * x, mix: [0.2, 0.4] });
// c / s / h: critical, standard, sheddable (two of them start with s)
const crit = (i: number): string => ({ critical: 'c', standard: 's', sheddable: 'h' })[sc.requests[i].criticality];
const dbg = new Map<number, string>();
const p = new SwitchyardFilterPolicy({ wasmPath: opt.wasm, agent: { scrapeIntervalMs: 1000 },
  ...(opt.debug ? { service: { debug: true }, onDebug: (i: number, d: string) => dbg.set(i, d) } : {}) });
// the scrapes the policy saw, per instance (time, waiting, running, kv)
const scr: Array<Array<{ t: number; w: number; r: number; kv: number; lr: string; lw: string }>> = Array.from({ length: 8 }, () => []);
// the filter reads /metrics (onMetrics); onScrape, which it does not define, only records the same scrape
(p as { onScrape?: RoutingPolicy['onScrape'] }).onScrape = (t: number, i: number, m: Scraped) => { scr[i].push({ t, w: m.numRequestsWaiting, r: m.numRequestsRunning, kv: m.kvCacheUsagePerc, lr: m.runningLoraAdapters.join('+'), lw: m.waitingLoraAdapters.join('+') }); };
// --engine idx,a,b: log the engine request idx was sent to, each step in [a, b] ms (its waiting
// queue: criticality, adapter, prompt; running: adapters; resident adapters; free blocks)
let eng: LlmEngine | undefined;
const engArg = opt.engine ?? '';
if (engArg) {
  const [ix, a, b] = engArg.split(',').map(Number);
  const byTokens = new Map(sc.requests.map((q) => [q.tokens, q.idx]));
  const sub = LlmEngine.prototype.submit;
  LlmEngine.prototype.submit = function (this: LlmEngine, q: Parameters<typeof sub>[0], t: number) { if (byTokens.get(q.promptTokens) === ix) eng = this; return sub.call(this, q, t); };
  const step = LlmEngine.prototype.step;
  LlmEngine.prototype.step = function (this: LlmEngine) {
    const res = step.call(this);
    if (this === eng && res && res.startMs >= a && res.startMs <= b) {
      const who = (q: { promptTokens: number[] }): string => { const i = byTokens.get(q.promptTokens) ?? -1; return `${i}${i >= 0 ? crit(i) : ''}`; };
      const e = this as unknown as { loras: Map<string, true>; freePlain: unknown[]; freeCached: Map<number, unknown> };
      console.log(`step ${res.startMs.toFixed(0)}-${res.endMs.toFixed(0)} prefill ${res.prefillTokens} decode ${res.decodeSeqs} loaded [${res.loadedAdapters}] preempted ${res.preempted.length} | loras [${[...e.loras.keys()]}] free ${e.freePlain.length}+${e.freeCached.size} | running ${this.running.length} [${this.running.map((q) => `${who(q)}:${q.adapter ?? 'base'}:${q.computed}/${q.target.length}`).join(' ')}] | waiting [${this.waiting.map((q) => `${who(q)}:${q.adapter ?? 'base'}:${q.promptTokens.length}`).join(' ')}]`);
    }
    return res;
  };
}
const r = runFleet(fleet(), sc.requests, p, seed);
const os = r.outcomes;
const lastScrape = (t: number, w: number): string => { const s = scr[w].filter((e) => e.t <= t).pop(); return s ? `${s.w}w/${s.r}r/kv${(100 * s.kv).toFixed(0)} lora run [${s.lr}] wait [${s.lw}] @-${(t - s.t).toFixed(0)}` : '-'; };
const queued = (t: number, w: number): string => {
  const q = os.filter((o) => !o.shed && o.instance === w && o.arrivalMs <= t && o.arrivalMs + o.queuedMs > t);
  return `${q.filter((o) => crit(o.idx) === 'c').length}c${q.filter((o) => crit(o.idx) === 's').length}s${q.filter((o) => crit(o.idx) === 'h').length}h`;
};
const running = (t: number, w: number): number => os.filter((o) => !o.shed && o.instance === w && o.arrivalMs + o.queuedMs <= t && o.arrivalMs + o.e2eMs > t).length;
const meas = os.filter((o) => sc.requests[o.idx].measured);
const cr = meas.filter((o) => !o.shed && sc.requests[o.idx].criticality === 'critical').sort((a, b) => b.ttftMs - a.ttftMs);
console.log(`seed ${seed} ${x}x: ${cr.length} measured critical served; top TTFTs ${cr.slice(0, 6).map((o) => o.ttftMs.toFixed(0)).join(', ')}; shed c/s/h ${['critical', 'standard', 'sheddable'].map((c) => meas.filter((o) => o.shed && sc.requests[o.idx].criticality === c).length).join('/')}`);
// --by-model: the critical TTFT P99 per pool, the llama adapters together and each base model. The
// 2x P99 is about the 7th largest of ~700, so which pool's episode lands there decides it; this
// shows whether a change moved the pool it acts on or only the path (docs/benchmarks/llm-r9a.md)
if (opt['by-model']) {
  const pool = (m: string): string => (m.endsWith('-lora') ? 'llama adapters' : m);
  const models = [...new Set(cr.map((o) => pool(sc.requests[o.idx].w.model)))].sort();
  for (const m of models) {
    const v = cr.filter((o) => pool(sc.requests[o.idx].w.model) === m).map((o) => o.ttftMs);
    console.log(`by-model ${m}: ${v.length} critical, TTFT P99 ${quantile(v, 0.99).toFixed(0)} max ${Math.max(...v).toFixed(0)} ms`);
  }
}
for (const o of cr.filter((o) => o.ttftMs > over).sort((a, b) => a.arrivalMs - b.arrivalMs)) {
  console.log(`\n#${o.idx} t=${o.arrivalMs.toFixed(0)} -> w${o.instance} model ${sc.requests[o.idx].w.model} ttft ${o.ttftMs.toFixed(0)} queued ${o.queuedMs.toFixed(0)} prompt ${o.promptTokens} cached ${o.cachedTokens} preempt ${o.preemptions}`);
  if (dbg.has(o.idx)) console.log(`  debug: ${dbg.get(o.idx)}`);
  for (let w = 0; w < 8; w++) console.log(`  w${w}: queued ${queued(o.arrivalMs, w)} running ${running(o.arrivalMs, w)} | scrape ${lastScrape(o.arrivalMs, w)}`);
}
if (opt.window !== undefined) {
  const [a, b] = opt.window.split(',').map(Number);
  console.log('\narrivals in window:');
  for (const o of [...os].sort((a, b) => a.arrivalMs - b.arrivalMs).filter((o) => o.arrivalMs >= a && o.arrivalMs <= b && (o.shed || opt.inst === undefined || o.instance === opt.inst))) {
    console.log(`#${o.idx} t=${o.arrivalMs.toFixed(0)} ${crit(o.idx)} ${sc.requests[o.idx].w.model} ${o.shed ? 'SHED' : `-> w${o.instance} ttft ${o.ttftMs.toFixed(0)} q ${o.queuedMs.toFixed(0)} pre ${o.preemptions} prompt ${o.promptTokens} cached ${o.cachedTokens}`}`);
    if (dbg.has(o.idx)) console.log(`  debug: ${dbg.get(o.idx)}`);
  }
}
