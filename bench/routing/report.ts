// Tables, burst (herding) analysis and the SVG plot of the routing benchmark.
import type { Burst, FleetSpec, RunResult, Summary } from './des';
import { quantile } from './des';

export interface Row {
  policy: string;
  /** 'filter' = the compiled filter in the host; 'baseline' = Envoy LB emulation; 'model' = TS model of the choice; 'oracle' */
  kind: 'baseline' | 'filter' | 'model' | 'oracle';
  rho: number;
  scrapeMs?: number;
  summary: Summary;
  /** P99 of 5 consecutive batches of the measured requests (arrival order): min, max */
  p99Batches: [number, number];
  /** measured requests per instance */
  perInstance: number[];
  wallMs: number;
  virtualS: number;
  extra?: Record<string, unknown>;
}

export function p99BatchRange(rt: Float64Array, batches = 5): [number, number] {
  const n = Math.floor(rt.length / batches);
  let lo = Infinity;
  let hi = -Infinity;
  for (let b = 0; b < batches; b++) {
    const s = Float64Array.from(rt.subarray(b * n, (b + 1) * n)).sort();
    const v = quantile(s, 0.99);
    lo = Math.min(lo, v);
    hi = Math.max(hi, v);
  }
  return [lo, hi];
}

const ms = (v: number): string => (v >= 100_000 ? `${(v / 1000).toFixed(0)}s` : v >= 10_000 ? `${(v / 1000).toFixed(1)}s` : v.toFixed(0));

function pad(s: string, n: number, right = false): string {
  return right ? s.padEnd(n) : s.padStart(n);
}

/** Main table: P50/P99/P99.9 per policy and rho; ratio columns for `focus` against RR and LR. */
export function mainTable(rows: Row[], rhos: number[], policies: string[], focus: string[]): string {
  const out: string[] = [];
  const w = Math.max(...policies.map((p) => p.length), 10) + 2;
  const head = pad('policy', w, true) + rhos.map((r) => pad(`rho=${r}: P50 / P99 / P99.9`, 30)).join('');
  out.push(head, '-'.repeat(head.length));
  for (const p of policies) {
    let line = pad(p, w, true);
    for (const r of rhos) {
      const row = rows.find((x) => x.policy === p && x.rho === r);
      line += pad(row ? `${ms(row.summary.p50Ms)} / ${ms(row.summary.p99Ms)} / ${ms(row.summary.p999Ms)}` : '-', 30);
    }
    out.push(line);
  }
  out.push('');
  const head2 = pad('P99 ratio', w, true) + rhos.map((r) => pad(`rho=${r}: /RR   /LR`, 30)).join('');
  out.push(head2, '-'.repeat(head2.length));
  for (const p of focus) {
    let line = pad(p, w, true);
    for (const r of rhos) {
      const a = rows.find((x) => x.policy === p && x.rho === r);
      const rr = rows.find((x) => x.policy === 'round-robin' && x.rho === r);
      const lr = rows.find((x) => x.policy === 'least-request' && x.rho === r);
      line += pad(a && rr && lr ? `${(a.summary.p99Ms / rr.summary.p99Ms).toFixed(3)}  ${(a.summary.p99Ms / lr.summary.p99Ms).toFixed(3)}` : '-', 30);
    }
    out.push(line);
  }
  return out.join('\n');
}

export interface TargetCheck {
  policy: string;
  rho085VsRR: { ratio: number; target: number; ok: boolean };
  rho085VsLR: { ratio: number; target: number; ok: boolean };
  neverWorseThanLR: { ok: boolean; ratios: Record<string, number> };
  allOk: boolean;
}

export function checkTargets(rows: Row[], policy: string, rhos: number[]): TargetCheck {
  const get = (p: string, r: number): Row | undefined => rows.find((x) => x.policy === p && x.rho === r);
  const at = (p: string, r: number): number => get(p, r)?.summary.p99Ms ?? NaN;
  const rr = at(policy, 0.85) / at('round-robin', 0.85);
  const lr = at(policy, 0.85) / at('least-request', 0.85);
  const ratios: Record<string, number> = {};
  let never = true;
  for (const r of rhos) {
    const q = at(policy, r) / at('least-request', r);
    ratios[String(r)] = q;
    if (!(q <= 1)) never = false;
  }
  const c: TargetCheck = {
    policy,
    rho085VsRR: { ratio: rr, target: 0.5, ok: rr <= 0.5 },
    rho085VsLR: { ratio: lr, target: 0.8, ok: lr <= 0.8 },
    neverWorseThanLR: { ok: never, ratios },
    allOk: false,
  };
  c.allOk = c.rho085VsRR.ok && c.rho085VsLR.ok && c.neverWorseThanLR.ok;
  return c;
}

export function targetText(c: TargetCheck): string {
  const f = (b: boolean): string => (b ? 'MET' : 'NOT MET');
  const r = Object.entries(c.neverWorseThanLR.ratios).map(([k, v]) => `${k}: ${v.toFixed(2)}`).join(', ');
  return [
    `${c.policy}:`,
    `  P99 <= 0.5 x round-robin at rho=0.85:   ${c.rho085VsRR.ratio.toFixed(3)}  ${f(c.rho085VsRR.ok)}`,
    `  P99 <= 0.8 x LEAST_REQUEST at rho=0.85: ${c.rho085VsLR.ratio.toFixed(3)}  ${f(c.rho085VsLR.ok)}`,
    `  P99 <= LEAST_REQUEST at every rho:      ${r}  ${f(c.neverWorseThanLR.ok)}`,
  ].join('\n');
}

// ---------------------------------------------------------------- herding

export interface BurstStats {
  policy: string;
  /** per burst: max over instances of (share of the burst's requests) / (capacity share) */
  herdRatio: number[];
  herdRatioMean: number;
  herdRatioMax: number;
  /** share of the burst's requests that went to the single most-chosen instance (mean over bursts) */
  topShareMean: number;
  /** same ratio over whole scrape intervals outside bursts (steady state), mean */
  steadyHerdRatioMean: number;
  /** response times of requests that arrived in a burst or within 2 s after it */
  burstP50Ms: number;
  burstP99Ms: number;
  /** choice distribution inside bursts, summed over bursts */
  burstCounts: number[];
}

export function burstStats(policy: string, fleet: FleetSpec, r: RunResult, bursts: Burst[], firstMeasured: number, windowMs: number): BurstStats {
  const capTotal = fleet.speeds.reduce((a, b) => a + b, 0);
  const capShare = fleet.speeds.map((s) => s / capTotal);
  const A = r.arrivals;
  const ratioOf = (counts: number[]): [number, number] => {
    const tot = counts.reduce((a, b) => a + b, 0);
    if (tot === 0) return [NaN, NaN];
    let hr = 0;
    let top = 0;
    counts.forEach((c, j) => {
      hr = Math.max(hr, c / tot / capShare[j]);
      top = Math.max(top, c / tot);
    });
    return [hr, top];
  };
  const herd: number[] = [];
  const tops: number[] = [];
  const total = new Array(fleet.speeds.length).fill(0);
  const burstRt: number[] = [];
  const m0 = firstMeasured;
  for (const b of bursts) {
    const counts = new Array(fleet.speeds.length).fill(0);
    for (let i = 0; i < A.length; i++) {
      const t = A[i];
      if (t >= b.atMs && t < b.atMs + b.durationMs && r.choice[i] >= 0) {
        counts[r.choice[i]]++;
        total[r.choice[i]]++;
      }
      if (t >= b.atMs && t < b.atMs + b.durationMs + 2000 && i >= m0 && i - m0 < r.responseMs.length) burstRt.push(r.responseMs[i - m0]);
    }
    const [hr, top] = ratioOf(counts);
    herd.push(hr);
    tops.push(top);
  }
  // steady state: windows of windowMs (one snapshot interval) that do not touch a burst
  const steady: number[] = [];
  const tEnd = A[Math.min(A.length - 1, m0 + r.responseMs.length - 1)];
  for (let w0 = A[m0]; w0 + windowMs <= tEnd; w0 += windowMs) {
    if (bursts.some((b) => w0 < b.atMs + b.durationMs + 2000 && w0 + windowMs > b.atMs)) continue;
    const counts = new Array(fleet.speeds.length).fill(0);
    for (let i = m0; i < A.length && A[i] < w0 + windowMs; i++) if (A[i] >= w0 && r.choice[i] >= 0) counts[r.choice[i]]++;
    const [hr] = ratioOf(counts);
    if (Number.isFinite(hr)) steady.push(hr);
  }
  const s = Float64Array.from(burstRt).sort();
  const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
  return {
    policy,
    herdRatio: herd,
    herdRatioMean: mean(herd),
    herdRatioMax: Math.max(...herd),
    topShareMean: mean(tops),
    steadyHerdRatioMean: steady.length ? mean(steady) : NaN,
    burstP50Ms: quantile(s, 0.5),
    burstP99Ms: quantile(s, 0.99),
    burstCounts: total,
  };
}

export function burstTable(stats: BurstStats[], fleet: FleetSpec): string {
  const capTotal = fleet.speeds.reduce((a, b) => a + b, 0);
  const w = Math.max(...stats.map((s) => s.policy.length), 10) + 2;
  const out = [
    pad('policy', w, true) + pad('herd mean', 11) + pad('herd max', 10) + pad('top share', 11) + pad('steady herd', 13) + pad('burst P50', 11) + pad('burst P99', 11) + '   burst requests per instance (capacity share %)',
  ];
  out.push('-'.repeat(out[0].length));
  for (const s of stats) {
    out.push(
      pad(s.policy, w, true) + pad(s.herdRatioMean.toFixed(2), 11) + pad(s.herdRatioMax.toFixed(2), 10) + pad((s.topShareMean * 100).toFixed(0) + '%', 11) +
        pad(s.steadyHerdRatioMean.toFixed(2), 13) + pad(ms(s.burstP50Ms), 11) + pad(ms(s.burstP99Ms), 11) + '   ' + s.burstCounts.join(','),
    );
  }
  out.push(`capacity shares: ${fleet.speeds.map((v) => ((100 * v) / capTotal).toFixed(1)).join(', ')} %`);
  return out.join('\n');
}

// ---------------------------------------------------------------- SVG

/** Plot palette shared by the routing SVGs. */
export const COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22', '#17becf'];

/** P99 vs rho per policy, log-y. Hand-written SVG, no dependencies. */
export function svgPlot(rows: Row[], policies: Array<{ name: string; dashed?: boolean; label?: string }>, rhos: number[], title: string): string {
  const W = 820;
  const H = 520;
  const L = 80;
  const R = 250;
  const T = 50;
  const B = 60;
  const pw = W - L - R;
  const ph = H - T - B;
  const vals = rows.filter((r) => policies.some((p) => p.name === r.policy)).map((r) => r.summary.p99Ms).filter((v) => v > 0 && Number.isFinite(v));
  const lo = Math.pow(10, Math.floor(Math.log10(Math.min(...vals))));
  const hi = Math.pow(10, Math.ceil(Math.log10(Math.max(...vals))));
  const x0 = Math.min(...rhos) - 0.05;
  const x1 = Math.max(...rhos) + 0.05;
  const X = (r: number): number => L + ((r - x0) / (x1 - x0)) * pw;
  const Y = (v: number): number => T + ph - ((Math.log10(v) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * ph;
  const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  const o: string[] = [];
  o.push(`<?xml version="1.0" encoding="UTF-8"?>`);
  o.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="Helvetica, Arial, sans-serif" font-size="12">`);
  o.push(`<rect x="0" y="0" width="${W}" height="${H}" fill="white"/>`);
  o.push(`<text x="${L + pw / 2}" y="24" text-anchor="middle" font-size="15" font-weight="bold">${esc(title)}</text>`);
  // grid: decades and 2x, 5x
  for (let d = lo; d <= hi * 1.0001; d *= 10) {
    for (const k of [1, 2, 5]) {
      const v = d * k;
      if (v > hi * 1.0001) break;
      const y = Y(v);
      o.push(`<line x1="${L}" y1="${y.toFixed(1)}" x2="${L + pw}" y2="${y.toFixed(1)}" stroke="${k === 1 ? '#bbb' : '#e5e5e5'}" stroke-width="1"/>`);
      if (k === 1 || (Math.log10(hi / lo) <= 3 && k !== 1)) {
        const label = v >= 1000 ? `${v / 1000} s` : `${v} ms`;
        o.push(`<text x="${L - 6}" y="${(y + 4).toFixed(1)}" text-anchor="end" fill="#333">${label}</text>`);
      }
    }
  }
  for (const r of rhos) {
    const x = X(r);
    o.push(`<line x1="${x.toFixed(1)}" y1="${T}" x2="${x.toFixed(1)}" y2="${T + ph}" stroke="#eee"/>`);
    o.push(`<text x="${x.toFixed(1)}" y="${T + ph + 18}" text-anchor="middle">${r}</text>`);
  }
  o.push(`<rect x="${L}" y="${T}" width="${pw}" height="${ph}" fill="none" stroke="#333"/>`);
  o.push(`<text x="${L + pw / 2}" y="${H - 18}" text-anchor="middle">offered load ρ (fraction of fleet capacity Σ c·speed / E[S])</text>`);
  o.push(`<text transform="translate(20 ${T + ph / 2}) rotate(-90)" text-anchor="middle">P99 response time (queue + service), log scale</text>`);
  policies.forEach((p, i) => {
    const pts = rhos
      .map((r) => rows.find((x) => x.policy === p.name && x.rho === r))
      .filter((x): x is Row => !!x && x.summary.p99Ms > 0)
      .map((x) => [X(x.rho), Y(x.summary.p99Ms)] as const);
    const c = COLORS[i % COLORS.length];
    if (pts.length > 1) o.push(`<polyline fill="none" stroke="${c}" stroke-width="2"${p.dashed ? ' stroke-dasharray="6 4"' : ''} points="${pts.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(' ')}"/>`);
    for (const [x, y] of pts) o.push(`<circle cx="${x.toFixed(1)}" cy="${y.toFixed(1)}" r="3.5" fill="${c}"/>`);
    const ly = T + 10 + i * 20;
    o.push(`<line x1="${L + pw + 16}" y1="${ly}" x2="${L + pw + 44}" y2="${ly}" stroke="${c}" stroke-width="2"${p.dashed ? ' stroke-dasharray="6 4"' : ''}/>`);
    o.push(`<text x="${L + pw + 50}" y="${ly + 4}">${esc(p.label ?? p.name)}</text>`);
  });
  o.push('</svg>');
  return o.join('\n') + '\n';
}

// ---------------------------------------------------------------- spread over sample paths

export interface SpreadRow {
  fleet: string;
  seed: number;
  lrP99: number;
  switchyardP99: number;
  oracleP99: number;
}

/** Per fleet: every seed's P99s and ratios to LEAST_REQUEST, then mean / min / max of the ratios. */
export function spreadTable(rows: SpreadRow[]): string {
  const out: string[] = [];
  const head = `${pad('fleet', 6, true)}${pad('seed', 10)}${pad('LR P99', 9)}${pad('switchyard', 12)}${pad('oracle', 9)}${pad('switchyard/LR', 15)}${pad('oracle/LR', 11)}`;
  out.push(head, '-'.repeat(head.length));
  for (const fleet of [...new Set(rows.map((r) => r.fleet))]) {
    const rs = rows.filter((r) => r.fleet === fleet);
    for (const r of rs) {
      out.push(`${pad(fleet, 6, true)}${pad(String(r.seed), 10)}${pad(ms(r.lrP99), 9)}${pad(ms(r.switchyardP99), 12)}${pad(ms(r.oracleP99), 9)}` +
        `${pad((r.switchyardP99 / r.lrP99).toFixed(3), 15)}${pad((r.oracleP99 / r.lrP99).toFixed(3), 11)}`);
    }
    const stat = (f: (r: SpreadRow) => number): string => {
      const v = rs.map(f);
      return `${(v.reduce((a, b) => a + b, 0) / v.length).toFixed(3)} [${Math.min(...v).toFixed(3)}, ${Math.max(...v).toFixed(3)}]`;
    };
    out.push(`${pad(fleet, 6, true)}  mean [min, max]:  switchyard/LR ${stat((r) => r.switchyardP99 / r.lrP99)}   oracle/LR ${stat((r) => r.oracleP99 / r.lrP99)}`);
  }
  return out.join('\n');
}
