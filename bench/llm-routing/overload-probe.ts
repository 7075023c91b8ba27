// The overload cells of run.ts for the switchyard-filter (1000 ms) row alone (issue 20, llm-r14a.md):
// critical TTFT P99 at 1× and 2×, their ratio, standard TTFT P99 at 2×, sheds, the critical queue
// wait and P99 per model. Same scenarios, seeds and durations as run.ts (full: 180 s, 30 s
// warm-up; --quick: 50 s, 12 s). `--request` merges a JSON object over the filter's request block
// (a probe of a setting; never a shipped figure). Environment, for tracing: TAIL=a,b with
// TAILDUMP=1 lists the critical requests with TTFT ≥ a ms at 1× / ≥ b ms at 2×; WIN=a,b prints the
// scrapes of instances INSTS (default 6,7: the mistral pool) and the sends and sheds per second
// and class (c / s / h) in [a, b] s at 2×; SCRAPE the agent's scrape interval (ms, default 1000).
//   npx tsx bench/llm-routing/overload-probe.ts [--seeds 1,2,3,4,5] [--quick] [--rates 1,2] [--wasm abs] [--request '{...}']
import { runFleet, type Outcome } from './fleet';
import { fleet, prefixHeavy, type Scenario } from './scenarios';
import { SwitchyardFilterPolicy } from './filter';
import { quantile, summarize } from './report';
import { cli, flag, list, str } from '../cli';

const opts = cli('npx tsx bench/llm-routing/overload-probe.ts', "run.ts's overload cells, the switchyard-filter (1000 ms) row only.", {
  quick: flag('50 s runs (default full: 180 s)'),
  seeds: list('1,2,3,4,5', 'seeds'),
  wasm: str('build/switchyard.wasm', 'filter build'),
  request: str('', 'JSON merged over the request block'),
  rates: list('1,2', 'loads: 1 and/or 2 (× capacity; 1 = the 30 req/s base)'),
});
const durationMs = opts.quick ? 50_000 : 180_000;
const warmupMs = opts.quick ? 12_000 : 30_000;
const request = opts.request ? (JSON.parse(opts.request) as Record<string, unknown>) : undefined;
const f0 = (x: number): string => (Number.isFinite(x) ? x.toFixed(0) : '-');
console.log(`| seed | crit 1x P99 | crit 2x P99 | ratio | std 2x P99 | shed 2x c/s/h | crit P99 by model |`);
console.log('|---|---|---|---|---|---|---|');
const ratios: number[] = [];
const tail: Record<number, number> = { 1: Infinity, 2: Infinity };
if (process.env.TAIL) { const [a, b] = process.env.TAIL.split(',').map(Number); tail[1] = a; tail[2] = b; }
for (const s of opts.seeds.map(Number)) {
  const res: Record<string, ReturnType<typeof summarize>> = {};
  let byModel = '';
  const dumps: Record<number, Outcome[]> = {};
  const reqs: Record<number, Scenario['requests']> = {};
  for (const x of opts.rates.map(Number)) {
    const sc: Scenario = prefixHeavy({ seed: s, durationMs, warmupMs, ratePerS: x === 1 ? 30 : 100, mix: [0.2, 0.4] });
    const p = new SwitchyardFilterPolicy({ wasmPath: opts.wasm, agent: { scrapeIntervalMs: Number(process.env.SCRAPE ?? 1000) }, ...(request ? { request } : {}) });
    const scr: string[] = [];
    const win = process.env.WIN ? process.env.WIN.split(',').map(Number) : null;
    const insts = (process.env.INSTS ?? '6,7').split(',').map(Number);
    if (win && x === 2) (p as { onScrape?: (t: number, i: number, m: import('./scrape').Scraped) => void }).onScrape = (t, i, m) => { if (t >= win[0] * 1000 && t <= win[1] * 1000 && insts.includes(i)) scr.push(`    scrape t=${(t / 1000).toFixed(1)} i${i} w ${m.numRequestsWaiting} r ${m.numRequestsRunning} kv ${m.kvCacheUsagePerc.toFixed(2)}`); };
    const r = runFleet(fleet(), sc.requests, p, s);
    if (win && x === 2) {
      const per = new Map<number, Record<string, number>>();
      for (const o of r.outcomes) {
        const q = sc.requests[o.idx];
        if (o.arrivalMs < win[0] * 1000 || o.arrivalMs > win[1] * 1000) continue;
        if (!(o.shed ? insts.some((i) => fleet()[i].cfg.models!.includes(q.w.model)) : insts.includes(o.instance))) continue;
        const sec = Math.floor(o.arrivalMs / 1000);
        const rec = per.get(sec) ?? {};
        const k = ({ critical: 'c', standard: 's', sheddable: 'h' } as Record<string, string>)[q.criticality] + (o.shed ? '-shed' : '-sent');
        rec[k] = (rec[k] ?? 0) + 1;
        per.set(sec, rec);
      }
      for (const line of scr) console.log(line);
      for (const [sec, rec] of [...per.entries()].sort((a, b) => a[0] - b[0])) console.log(`    sec ${sec}: ${Object.entries(rec).sort().map(([k, v]) => `${k} ${v}`).join(' ')}`);
    }
    res[x] = summarize(sc, r, 500);
    reqs[x] = sc.requests;
    const qs: number[] = [], svc: number[] = [];
    const tails: Outcome[] = [];
    {
      const groups = new Map<string, number[]>();
      for (const o of r.outcomes) {
        const q = sc.requests[o.idx];
        if (!q.measured || o.shed || q.criticality !== 'critical') continue;
        const k = q.w.model;
        if (!groups.has(k)) groups.set(k, []);
        groups.get(k)!.push(o.ttftMs);
        qs.push(o.queuedMs); svc.push(o.ttftMs - o.queuedMs);
        if (o.ttftMs >= tail[x]) { tails.push(o); (dumps[x] ??= []).push(o); }
      }
      byModel += `${x}x: queue P99 ${f0(quantile(qs, 0.99))} P90 ${f0(quantile(qs, 0.9))}, ttft-queue P99 ${f0(quantile(svc, 0.99))}; tail (n=${tails.length}) queued mean ${f0(tails.reduce((a, o) => a + o.queuedMs, 0) / Math.max(1, tails.length))} preempt ${tails.reduce((a, o) => a + o.preemptions, 0)} inst ${tails.map((o) => o.instance).join('')}; ` + [...groups.entries()].sort().map(([k, v]) => `${k} ${f0(quantile(v, 0.99))}`).join(', ') + ' ';
    }
  }
  if (process.env.TAILDUMP) for (const [x, ts] of Object.entries(dumps)) for (const o of ts.sort((a, b) => a.arrivalMs - b.arrivalMs)) console.log(`  ${x}x t=${(o.arrivalMs / 1000).toFixed(1)} inst ${o.instance} ttft ${f0(o.ttftMs)} queued ${f0(o.queuedMs)} prompt ${o.promptTokens} cached ${o.cachedTokens} model ${reqs[Number(x)][o.idx].w.model}`);
  const b = res[1], o = res[2];
  const ratio = b && o ? o.byCrit.critical.ttftP99 / b.byCrit.critical.ttftP99 : NaN;
  ratios.push(ratio);
  console.log(`| ${s} | ${f0(b?.byCrit.critical.ttftP99 ?? NaN)} | ${f0(o?.byCrit.critical.ttftP99 ?? NaN)} | ${ratio.toFixed(2)} | ${f0(o?.byCrit.standard.ttftP99 ?? NaN)} | ${o ? `${o.shed.critical}/${o.shed.standard}/${o.shed.sheddable}` : '-'} | ${byModel} |`);
  if (b) console.log(`|   | 1x shed ${b.shed.critical}/${b.shed.standard}/${b.shed.sheddable}, std 1x P99 ${f0(b.byCrit.standard.ttftP99)} |`);
}
const ok = ratios.filter((r) => r <= 1.1).length;
console.log(`\nmean ratio ${(ratios.reduce((a, r) => a + r, 0) / ratios.length).toFixed(3)}, <= 1.1 on ${ok} of ${ratios.length}`);
