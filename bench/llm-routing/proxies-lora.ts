// The K-proxy mode on the project's own fleet (scenarios.ts: 6 llama instances with three LoRA
// adapters, max_loras 2, and 2 mistral), for issue 22 item 2's last open state: the adapter streams
// (filter/assembly/lib/choice/adapter-streams.ts) are shared across one proxy's worker VMs, never
// across proxies — does sharing them across proxies pay? The published fleet (proxies.ts's other
// workloads) has no adapters, so it cannot tell. Workloads as run.ts builds them: `ph` prefix-heavy
// at 30 req/s, all standard; `over1` the same at 1× with the 20/40/40 % criticality mix (run.ts's
// overload base); `over2` the 2× overload (100 req/s, same mix). Per K, the TTFT of adapter requests against llama base-model requests (same
// instances), and how often an adapter request waited for a LoRA slot: at some engine step its
// adapter was not resident and every slot was pinned by running adapters (the engine's
// loadAdapter refused; observed by wrapping it, the engine unchanged).
import { runFleet } from './fleet';
import { quantile } from './report';
import { ADAPTERS, fleet, LLAMA, prefixHeavy, type Scenario } from './scenarios';
import { LlmEngine, type LlmRequest } from '../../sim/inference/llm/engine';
import type { ProxiesPolicy } from './proxies';

export const PROJECT_WORKLOADS = ['ph', 'over1', 'over2'] as const;

/** run.ts's quick / full windows and rates */
export function projectScenario(key: string, quick: boolean, seed: number): Scenario {
  const durationMs = quick ? 50_000 : 180_000;
  const warmupMs = quick ? 12_000 : 30_000;
  if (key === 'ph') return prefixHeavy({ seed, durationMs, warmupMs, ratePerS: 30 });
  if (key === 'over1') return prefixHeavy({ seed, durationMs, warmupMs, ratePerS: 30, mix: [0.2, 0.4] });
  // run.ts's 2× overload: twice the fleet's measured capacity (50 req/s)
  if (key === 'over2') return prefixHeavy({ seed, durationMs, warmupMs, ratePerS: 100, mix: [0.2, 0.4] });
  throw new Error(`unknown project workload ${key}`);
}

/** the waiting requests refused a LoRA slot at least once (by their prompt-token array, which the
 *  engine keeps by reference from the bench request) */
const blocked = new Set<number[]>();
/** adapter loads across the fleet (each adds loraLoadMs to its step, for every request in the batch) */
let loads = 0;
type LoadAdapter = (this: LlmEngine, a: string, plan: Array<{ r: LlmRequest }>) => boolean;
let wrapped = false;
/** installed on the first project run only: the other workloads run the engine untouched */
function watchSlots(): void {
  if (wrapped) return;
  wrapped = true;
  const proto = LlmEngine.prototype as unknown as { loadAdapter: LoadAdapter };
  const original = proto.loadAdapter;
  proto.loadAdapter = function (this: LlmEngine, a, plan) {
    const ok = original.call(this, a, plan);
    // every slot pinned: each waiting request for this adapter waits for a drain
    if (ok) loads++;
    if (!ok) for (const r of this.waiting) if (r.adapter === a) blocked.add(r.promptTokens);
    return ok;
  };
}

export interface ClassFigures {
  n: number; ttftP50: number; ttftP99: number; queueP99: number; slotWaited: number;
  /** of the requests at or above the class's TTFT P99 (its tail): how many, and how many waited for a slot */
  tail: number; tailSlotWaited: number; slotWaitedTtftP50: number;
}
export interface ProjectCell { workload: string; seed: number; policy: string; refused: number; adapterLoads: number; adapter: ClassFigures; base: ClassFigures; mistral: ClassFigures; metrics: Record<string, number> }

export function runProject(key: string, sc: Scenario, p: ProxiesPolicy, seed: number): ProjectCell {
  watchSlots();
  blocked.clear();
  loads = 0;
  const r = runFleet(fleet(), sc.requests, p, seed);
  if (r.outcomes.filter((o) => o !== undefined).length !== sc.requests.length) throw new Error(`${p.name} on ${key}: requests unaccounted for`);
  const m = r.outcomes.filter((o) => sc.requests[o.idx].measured);
  const of = (pred: (model: string) => boolean): ClassFigures => {
    const s = m.filter((o) => !o.shed && pred(sc.requests[o.idx].w.model));
    const p99 = quantile(s.map((o) => o.ttftMs), 0.99);
    const waited = s.filter((o) => blocked.has(sc.requests[o.idx].tokens));
    const tail = s.filter((o) => o.ttftMs >= p99);
    return {
      n: s.length,
      ttftP50: quantile(s.map((o) => o.ttftMs), 0.5),
      ttftP99: p99,
      queueP99: quantile(s.map((o) => o.queuedMs), 0.99),
      slotWaited: waited.length,
      tail: tail.length,
      tailSlotWaited: tail.filter((o) => blocked.has(sc.requests[o.idx].tokens)).length,
      slotWaitedTtftP50: quantile(waited.map((o) => o.ttftMs), 0.5),
    };
  };
  return {
    workload: key, seed, policy: p.name, refused: m.filter((o) => o.shed).length, adapterLoads: loads,
    adapter: of((x) => ADAPTERS.includes(x)), base: of((x) => x === LLAMA), mistral: of((x) => x !== LLAMA && !ADAPTERS.includes(x)),
    metrics: p.metrics(),
  };
}

const f0 = (x: number): string => (Number.isFinite(x) ? x.toFixed(0) : '–');

/** per policy and workload, per seed: adapter vs llama-base TTFT P50 / P99, slot waits */
export function projectTable(cells: ProjectCell[]): string {
  const lines = ['| workload | seed | router | adapter TTFT P50 / P99 (ms) | llama base TTFT P50 / P99 (ms) | mistral P99 | adapter queue P99 | adapter requests that waited for a LoRA slot (of them in the P99 tail; their TTFT P50) | refused | adapter loads | adapter_streams_dropped |', '|---|---|---|---|---|---|---|---|---|---|---|'];
  for (const c of cells) {
    const drop = Object.entries(c.metrics).filter(([k]) => k.startsWith('switchyard.request.adapter_streams_dropped')).reduce((a, [, v]) => a + v, 0);
    lines.push(`| ${c.workload} | ${c.seed} | ${c.policy} | ${f0(c.adapter.ttftP50)} / ${f0(c.adapter.ttftP99)} | ${f0(c.base.ttftP50)} / ${f0(c.base.ttftP99)} | ${f0(c.mistral.ttftP99)} | ${f0(c.adapter.queueP99)} | ${c.adapter.slotWaited} of ${c.adapter.n} (${(100 * c.adapter.slotWaited / Math.max(1, c.adapter.n)).toFixed(1)} %; ${c.adapter.tailSlotWaited} of ${c.adapter.tail}; ${f0(c.adapter.slotWaitedTtftP50)} ms) | ${c.refused} | ${c.adapterLoads} | ${drop} |`);
  }
  return lines.join('\n');
}
