// Trace of one mesh DES cell (issue 22 r7): where the P99 tail of the filter comes from.
//   npx tsx bench/mesh/trace.ts --fleet A --rho 0.95 --k 64 --seed 2 [--tuning JSON]
// For every measured request: the instance chosen, the requests in system there and the least
// anywhere at the decision (ground truth), its queue wait and service time. Prints the tail
// (response >= P99) decomposed, and the same for the all-seeing LEAST_REQUEST on the same path.
import * as path from 'node:path';
import { DEFAULT_AGENT, type AgentSpec } from '../routing/agent-model';
import { MultiProxy } from '../routing/choose-model';
import { type EngineCtx, LeastRequest, makeSamplePath, type RoutingPolicy, runPolicy, summarize } from '../routing/des';
import { SwitchyardPolicy } from '../routing/switchyard';
import { FLEETS } from './proxies';
import { cli, int, num, str } from '../cli';

const ROOT = path.resolve(__dirname, '../..');

class Traced implements RoutingPolicy {
  ctx!: EngineCtx;
  atRoute: Int32Array[] = [];
  get name(): string { return this.inner.name; }
  constructor(readonly inner: RoutingPolicy) {}
  init(ctx: EngineCtx): void { this.ctx = ctx; this.inner.init(ctx); }
  advanceTo(t: number): void { this.inner.advanceTo?.(t); }
  route(t: number, id: number): number {
    this.atRoute[id] = Int32Array.from(this.ctx.inSystem);
    return this.inner.route(t, id);
  }
  respond(t: number, id: number, inst: number, a: Parameters<NonNullable<RoutingPolicy['respond']>>[3]): void { this.inner.respond?.(t, id, inst, a); }
  complete(t: number, id: number, inst: number): void { this.inner.complete?.(t, id, inst); }
  finish(t: number): void { this.inner.finish?.(t); }
}

async function main(): Promise<void> {
  const o = cli('npx tsx bench/mesh/trace.ts', 'Trace of one mesh DES cell: where the P99 tail of the filter comes from.', {
    fleet: str('A', 'fleet'),
    rho: num(0.95, 'utilisation', 0),
    k: int(64, 'proxies', 1),
    seed: int(2, 'seed'),
    measured: int(3000, 'measured requests', 1),
    tuning: str('{}', 'filter tuning, JSON'),
    wasm: str('build/switchyard.wasm', 'filter module'),
    'mesh-agents': int(1, 'mesh agents', 1),
  });
  const fleetName = o.fleet;
  const fleet = FLEETS[fleetName];
  if (!fleet) throw new Error(`--fleet: one of ${Object.keys(FLEETS).join(', ')}, got ${fleetName}`);
  const { rho, k, seed, measured } = o;
  const tuning = JSON.parse(o.tuning) as Record<string, unknown>;
  const sp = makeSamplePath(fleet, { rho, seed, warmupMs: 10000, measured });
  const mr: [number, number] = [sp.firstMeasured, sp.firstMeasured + sp.measured];
  const agent: AgentSpec = { ...DEFAULT_AGENT, scrapeIntervalMs: 1000 };
  const wasm = path.resolve(ROOT, o.wasm);
  const mk = (): RoutingPolicy => new MultiProxy(`mesh x${k}`, (i, shared) => new SwitchyardPolicy({
    wasmPath: wasm, agent, seed: seed + i, name: `mesh #${i}`, sharedAgent: shared, measuredRange: mr, tuning: tuning as never, inflightGroup: i,
  }), k, { spec: agent, seed, meshAgents: o['mesh-agents'] }, seed);
  for (const [label, pol] of [['all-seeing LR', new LeastRequest(seed)], [`mesh x${k}`, mk()]] as Array<[string, RoutingPolicy]>) {
    const t = new Traced(pol);
    const r = await runPolicy(fleet, sp, t);
    const s = summarize(r.responseMs);
    const rows: Array<{ id: number; inst: number; resp: number; svc: number; wait: number; nAt: number; excess: number; at: number }> = [];
    for (let j = 0; j < sp.measured; j++) {
      const id = sp.firstMeasured + j;
      const inst = r.choice[id];
      const svc = sp.baseService[id] / fleet.speeds[inst];
      const snap = t.atRoute[id];
      let best = Infinity;
      for (let i = 0; i < snap.length; i++) best = Math.min(best, snap[i] / fleet.speeds[i]);
      rows.push({ id, inst, resp: r.responseMs[j], svc, wait: r.responseMs[j] - svc, nAt: snap[inst], excess: snap[inst] / fleet.speeds[inst] - best, at: sp.arrivals[id] });
    }
    const tail = rows.filter((x) => x.resp >= s.p99Ms);
    const waited = rows.filter((x) => x.wait > 1);
    const perInst = fleet.speeds.map((_, i) => rows.filter((x) => x.inst === i).length);
    const tailInst = fleet.speeds.map((_, i) => tail.filter((x) => x.inst === i).length);
    const mean = (a: number[]): number => a.reduce((x, y) => x + y, 0) / Math.max(1, a.length);
    console.log(`\n== ${label}: P50 ${s.p50Ms.toFixed(0)} P99 ${s.p99Ms.toFixed(0)} P99.9 ${s.p999Ms.toFixed(0)}`);
    console.log(`  per instance (speeds ${fleet.speeds.join(',')}): ${perInst.join(' ')}; tail per instance ${tailInst.join(' ')}`);
    console.log(`  requests that waited: ${waited.length} (mean wait ${mean(waited.map((x) => x.wait)).toFixed(0)} ms); sent to n>=c: ${rows.filter((x) => x.nAt >= fleet.slots).length}`);
    console.log(`  tail (${tail.length}): mean svc ${mean(tail.map((x) => x.svc)).toFixed(0)} wait ${mean(tail.map((x) => x.wait)).toFixed(0)}; tail with wait>svc ${tail.filter((x) => x.wait > x.svc).length}; mean nAt ${mean(tail.map((x) => x.nAt)).toFixed(2)} excess(n/speed - best) ${mean(tail.map((x) => x.excess)).toFixed(2)}`);
    const waitSorted = rows.map((x) => x.wait).sort((a, b) => a - b);
    console.log(`  wait P50 ${waitSorted[Math.floor(0.5 * waitSorted.length)].toFixed(0)} P90 ${waitSorted[Math.floor(0.9 * waitSorted.length)].toFixed(0)} P99 ${waitSorted[Math.floor(0.99 * waitSorted.length)].toFixed(0)}`);
    const bySvc = [...tail].sort((a, b) => b.resp - a.resp).slice(0, 12);
    for (const x of bySvc) console.log(`    id ${x.id} t ${(x.at / 1000).toFixed(2)}s inst ${x.inst} resp ${x.resp.toFixed(0)} svc ${x.svc.toFixed(0)} wait ${x.wait.toFixed(0)} nAt ${x.nAt} excess ${x.excess.toFixed(2)}`);
  }
}
main().catch((e) => { console.error(e); process.exit(1); });
