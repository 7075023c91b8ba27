// Decision trace of one matrix cell on one seed (docs/benchmarks/robust-r8b.md): every request's
// choice with the exact in-flight state at that moment (one proxy: the instance's own count),
// its wait and service, for the filter and LEAST_REQUEST on the same sample path. Prints where
// the tail (the requests above the policy's own P99) was sent and how its wait arose.
//
//   npx tsx bench/robustness/trace.ts --cell s2/c4 --k 6 [--variants '{"shipped":{"tuning":{"debug":true}}}']
//     [--series-from MS --series-to MS --series-step MS] [--show-inst I] [--dump build/trace.json]
// seed = 20261201 + 1000 k (the matrix's k-th); one-proxy cells only. The debug header (tuning
// debug: true) adds the filter's price of each chosen instance; it changes no decision.
import * as path from 'node:path';
import { writeFileSync } from 'node:fs';
import { runPolicy, type EngineCtx, type RoutingPolicy, type RunResult } from '../routing/des';
import { type FilterTuning, SwitchyardPolicy } from '../routing/switchyard';
import { agentSpec, makePath, makePolicy, p99ToSuccess } from './common';
import { defaultCells, endOf, episodesOf, fleetOf, lambdaOf, TIMING } from './matrix';
import { cli, int, num, optNum, str } from '../cli';

const opt = cli('npx tsx bench/robustness/trace.ts', 'Decision trace of one matrix cell on one seed, the filter and LEAST_REQUEST on the same path.', {
  cell: str('s2/c4', 'substring of a one-proxy matrix cell id'),
  k: int(6, 'the seed: 20261201 + 1000 k', 0),
  variants: str('{"shipped":{}}', 'JSON: name -> {wasm?, tuning?, workers?}'),
  'show-inst': optNum('every decision for this instance'),
  'series-from': optNum('per-interval series from this time, ms'),
  'series-to': optNum('... to this time, ms'),
  'series-step': num(250, '... in steps of, ms', 1),
  dump: str('', 'write the records as JSON here'),
});

interface Rec { t: number; inst: number; state: number[]; snap?: string; dbg?: string }
function traced(p: RoutingPolicy, recs: Rec[]): RoutingPolicy {
  let ctx: EngineCtx;
  let snap = '';
  let cur = -1;
  return new Proxy(p, {
    get(target, prop, recv) {
      if (prop === 'init') return (c: EngineCtx) => {
        ctx = c;
        const r = target.init(c);
        const ag = (target as SwitchyardPolicy).agent;
        const host = (target as SwitchyardPolicy).host;
        if (host) {
          const orig = host.startStream.bind(host);
          // the debug response header (tuning debug: true) of each request, kept with its record
          (host as unknown as { startStream: unknown }).startStream = (h: unknown, b: unknown, e: unknown, _sink: unknown, ...rest: unknown[]) => {
            const id = cur;
            const sink = { headers: (hm: { get(k: string): string | undefined }) => { const d = hm.get('x-switchyard-debug'); if (d && recs[id]) recs[id].dbg = d; }, data(): void {}, reset(): void {} };
            return (orig as (...a: unknown[]) => unknown)(h, b, e, sink, ...rest);
          };
        }
        // the agent's latest publication: per instance E[S], P99/baseline, queue, rho (what the plan is built from)
        if (ag) ag.onPublish((pb) => { snap = (pb.snapshot.instances ?? []).map((x) => `${x.esMs.toFixed(0)}/${(x.p99Ms / x.baselineP99Ms).toFixed(1)}/${x.queueDepth.toFixed(0)}/${x.rho.toFixed(2)}`).join(' '); });
        return r;
      };
      if (prop === 'route') return (t: number, id: number) => {
        const state = Array.from(ctx.inSystem);
        cur = id;
        recs[id] = { t, inst: -1, state, snap };
        const inst = target.route(t, id);
        recs[id].inst = inst;
        return inst;
      };
      const v = Reflect.get(target, prop, recv);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
}

async function main(): Promise<void> {
  const cell = defaultCells().find((c) => c.id.includes(opt.cell));
  if (!cell || cell.proxies !== 1) throw new Error('--cell: a one-proxy default cell id substring');
  const k = opt.k;
  const variants = JSON.parse(opt.variants) as Record<string, { wasm?: string; tuning?: FilterTuning; workers?: number }>;
  const wasm = path.resolve('build/switchyard.wasm');
  const fleet = fleetOf(cell), lambda = lambdaOf(cell, fleet), episodes = episodesOf(cell, TIMING), endMs = endOf(cell, TIMING);
  const seed = 20261201 + 1000 * k;
  const sp = makePath({ law: cell.law, meanMs: fleet.meanMs, lambdaPerS: lambda, rho: cell.rho, seed, warmupMs: TIMING.warmupMs, endMs });
  const measuredRange: [number, number] = [sp.firstMeasured, sp.firstMeasured + sp.measured];
  const agent = agentSpec(cell.scrapeMs, cell.c);
  const runs: Record<string, { out: RunResult; recs: Rec[] }> = {};
  for (const r of ['lr', 'ewma'] as const) {
    const recs: Rec[] = [];
    const e = makePolicy(r, { fleet, proxies: 1, agent, episodes, seed, wasm, prevWasm: wasm, measuredRange });
    runs[r] = { out: await runPolicy(fleet, sp, traced(e.policy, recs), { episodes, ttftFraction: 0.1, orca: e.orca }), recs };
  }
  for (const [name, v] of Object.entries(variants)) {
    const recs: Rec[] = [];
    const p = new SwitchyardPolicy({ wasmPath: v.wasm ? path.resolve(v.wasm) : wasm, agent, seed, name, measuredRange, tuning: v.tuning ?? {}, workers: v.workers });
    runs[name] = { out: await runPolicy(fleet, sp, traced(p, recs), { episodes, ttftFraction: 0.1 }), recs };
  }
  const c = cell.c, m0 = sp.firstMeasured;
  console.log(`${cell.id} seed k=${k}: ${sp.measured} measured`);
  const dump: Record<string, unknown> = {};
  for (const [name, { out, recs }] of Object.entries(runs)) {
    const p99 = p99ToSuccess(out);
    const n = sp.measured;
    let queued = 0, queuedFree = 0, notMin = 0, tail = 0, tailQueued = 0, tailQueuedFree = 0, tailWait = 0, tailSvc = 0, waitSum = 0, tailBig = 0;
    let ahead = 0, tailAhead = 0;
    const rows: unknown[] = [];
    for (let j = 0; j < n; j++) {
      const id = m0 + j, r = recs[id], s = r.state, x = s[r.inst];
      const min = Math.min(...s);
      const svc = sp.baseService[id], resp = out.responseMs[j], wait = resp - svc;
      waitSum += wait;
      const q = x >= c, free = min < c;
      if (q) { queued++; ahead += x - c + 1; if (free) queuedFree++; }
      if (x > min) notMin++;
      if (resp >= p99) {
        tail++; tailWait += wait; tailSvc += svc;
        if (svc >= p99) tailBig++;
        if (q) { tailQueued++; tailAhead += x - c + 1; if (free) tailQueuedFree++; }
        rows.push({ id, t: r.t, inst: r.inst, state: s, svc, wait, resp, snap: r.snap, dbg: r.dbg });
      }
    }
    console.log(`${name.padEnd(10)} P99 ${p99.toFixed(0)}  mean wait ${(waitSum / n).toFixed(1)} ms; sent into a full instance ${queued} (${queuedFree} with a free one elsewhere, ${ahead} ahead in all); not the least loaded ${notMin}`);
    console.log(`           tail (>= P99) ${tail}: service alone >= P99 ${tailBig}; mean wait ${(tailWait / tail).toFixed(0)} ms, mean service ${(tailSvc / tail).toFixed(0)}; queued ${tailQueued} (free elsewhere ${tailQueuedFree}; ahead ${tailAhead})`);
    dump[name] = { p99, rows };
    {
      const W = 500, N = fleet.speeds.length;
      let j = 0, starved = 0, windows = 0;
      const perInst = Array(N).fill(0);
      for (let t0 = 0; t0 < recs[recs.length - 1].t - W; t0 += W) {
        while (j < recs.length && recs[j].t < t0) j++;
        const st = recs[j].state, sent = Array(N).fill(0);
        let tot = 0;
        for (let q = j; q < recs.length && recs[q].t < t0 + W; q++) { sent[recs[q].inst]++; tot++; }
        windows++;
        for (let i = 0; i < N; i++) if (st[i] < c && sent[i] <= tot / N / 8) { starved++; perInst[i]++; }
      }
      console.log(`           starved windows (an instance with a free slot getting <= 1/8 of its share of 500 ms): ${starved} of ${windows * N} [${perInst.join(',')}]`);
    }
    const showInst = opt['show-inst'];
    if (showInst !== undefined) for (const r of recs) if (r.inst === showInst && r.t >= (opt['series-from'] ?? 0) && r.t < (opt['series-to'] ?? Infinity)) console.log(`${name} ${(r.t / 1000).toFixed(3)} n=[${r.state.join(',')}] ${r.dbg ?? ''}`);
    const from = opt['series-from'] ?? NaN, to = opt['series-to'] ?? NaN, step = opt['series-step'];
    if (from === from) {
      // per interval: the exact in-flight counts at its start, where the interval's requests went, the
      // in-band factor the debug header gave for them (mean per instance) and the agent's snapshot
      let j = 0;
      while (j < recs.length && recs[j].t < from) j++;
      for (let t0 = from; t0 < to; t0 += step) {
        const sent = Array(fleet.speeds.length).fill(0), fac = Array(fleet.speeds.length).fill(0), w = Array(fleet.speeds.length).fill(0);
        const st = recs[j]?.state ?? [];
        const snap = recs[j]?.snap ?? '';
        for (; j < recs.length && recs[j].t < t0 + step; j++) {
          const r = recs[j];
          sent[r.inst]++;
          const m = /inband=([0-9.e+-]+)/.exec(r.dbg ?? ''), mw = /w_ms=([0-9.e+-]+)/.exec(r.dbg ?? '');
          if (m) fac[r.inst] += Number(m[1]);
          if (mw) w[r.inst] += Number(mw[1]);
        }
        console.log(`${name} ${(t0 / 1000).toFixed(2)} n=[${st.join(',')}] sent=[${sent.join(',')}] f=[${fac.map((x, i) => (sent[i] ? x / sent[i] : NaN).toFixed(1)).join(',')}] w=[${w.map((x, i) => (sent[i] ? x / sent[i] : NaN).toFixed(0)).join(',')}] snap ${snap}`);
      }
    }
  }
  const f = opt.dump;
  if (f) writeFileSync(f, JSON.stringify(dump));
}
main().catch((e) => { console.error(e); process.exit(1); });
