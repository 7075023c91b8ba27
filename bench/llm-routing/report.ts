// Per-run figures and the issue-10 targets.
import type { Criticality, RunResult } from './fleet';
import type { Scenario } from './scenarios';

export function quantile(xs: number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = xs.slice().sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(p * s.length) - 1))];
}

export interface Summary {
  policy: string;
  scenario: string;
  measured: number;
  served: number;
  shed: Record<Criticality, number>;
  ttftP50: number;
  ttftP99: number;
  e2eP50: number;
  e2eP99: number;
  /** measured requests served with TTFT <= slo, per second of the measured window */
  goodputPerS: number;
  /** Σ cached prompt tokens / Σ prompt tokens over the served measured requests */
  prefixHitRate: number;
  /** per class; queueP99: arrival to first scheduled by the engine (the queue part of TTFT, in the JSON only) */
  byCrit: Record<Criticality, { n: number; ttftP99: number; e2eP99: number; queueP99: number }>;
  preemptions: number;
  routeUsPerRequest: number;
}

export function summarize(sc: Scenario, r: RunResult, sloMs: number): Summary {
  const m = r.outcomes.filter((o) => sc.requests[o.idx].measured);
  const served = m.filter((o) => !o.shed);
  const shed: Record<Criticality, number> = { critical: 0, standard: 0, sheddable: 0 };
  for (const o of m) if (o.shed) shed[sc.requests[o.idx].criticality]++;
  const byCrit = {} as Summary['byCrit'];
  for (const c of ['critical', 'standard', 'sheddable'] as Criticality[]) {
    const s = served.filter((o) => sc.requests[o.idx].criticality === c);
    byCrit[c] = { n: s.length, ttftP99: quantile(s.map((o) => o.ttftMs), 0.99), e2eP99: quantile(s.map((o) => o.e2eMs), 0.99), queueP99: quantile(s.map((o) => o.queuedMs), 0.99) };
  }
  const tok = served.reduce((a, o) => a + o.promptTokens, 0);
  return {
    policy: r.policy,
    scenario: sc.name,
    measured: m.length,
    served: served.length,
    shed,
    ttftP50: quantile(served.map((o) => o.ttftMs), 0.5),
    ttftP99: quantile(served.map((o) => o.ttftMs), 0.99),
    e2eP50: quantile(served.map((o) => o.e2eMs), 0.5),
    e2eP99: quantile(served.map((o) => o.e2eMs), 0.99),
    goodputPerS: served.filter((o) => o.ttftMs <= sloMs).length / ((sc.measureToMs - sc.measureFromMs) / 1000),
    prefixHitRate: tok ? served.reduce((a, o) => a + o.cachedTokens, 0) / tok : 0,
    byCrit,
    preemptions: served.reduce((a, o) => a + o.preemptions, 0),
    routeUsPerRequest: (r.routeCpuMs * 1000) / Math.max(1, sc.requests.length),
  };
}

const f0 = (x: number): string => (Number.isFinite(x) ? x.toFixed(0) : '–');

export function table(rows: Summary[], sloMs: number): string {
  const h = `| policy | TTFT P50 / P99 (ms) | e2e P50 / P99 (ms) | goodput at TTFT ≤ ${sloMs} ms (req/s) | prefix hit rate | shed | route µs/req |`;
  const lines = [h, '|---|---|---|---|---|---|---|'];
  for (const s of rows) {
    const shed = s.shed.critical + s.shed.standard + s.shed.sheddable;
    lines.push(`| ${s.policy} | ${f0(s.ttftP50)} / ${f0(s.ttftP99)} | ${f0(s.e2eP50)} / ${f0(s.e2eP99)} | ${s.goodputPerS.toFixed(1)} | ${(100 * s.prefixHitRate).toFixed(0)} % | ${shed} | ${s.routeUsPerRequest.toFixed(1)} |`);
  }
  return lines.join('\n');
}

export function overloadTable(base: Summary[], over: Summary[]): string {
  const lines = ['| policy | critical TTFT P99: 1× → 2× (ms) | standard TTFT P99 2× | sheddable TTFT P99 2× | shed at 2× critical / standard / sheddable | served at 2× |', '|---|---|---|---|---|---|'];
  for (const o of over) {
    const b = base.find((x) => x.policy === o.policy);
    lines.push(`| ${o.policy} | ${f0(b?.byCrit.critical.ttftP99 ?? NaN)} → ${f0(o.byCrit.critical.ttftP99)} | ${f0(o.byCrit.standard.ttftP99)} | ${f0(o.byCrit.sheddable.ttftP99)} | ${o.shed.critical} / ${o.shed.standard} / ${o.shed.sheddable} | ${o.served} of ${o.measured} |`);
  }
  return lines.join('\n');
}
