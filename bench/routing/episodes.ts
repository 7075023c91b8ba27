// Figures of an episode (des.ts Episode) from a run's choices: how many requests the sick
// instance got while it was sick and after, how fast the policy moved traffic away, and how fast
// it gave the instance its share back after recovery. Pure functions of a RunResult.
import type { Episode, FleetSpec, RunResult } from './des';
import { COLORS } from './report';

export interface EpisodeStats {
  /** requests routed to the sick instance that arrived in [fromMs, toMs) */
  sentDuring: number;
  /** the same for its fair share (capacity share × all arrivals in the window) */
  fairDuring: number;
  /** requests routed to it that arrived in [toMs, toMs + afterMs) */
  sentAfter: number;
  fairAfter: number;
  /**
   * ms from the episode's start to the end of the first 1 s window (stepped by 250 ms) in which it
   * got less than half its fair share; null: never during the episode
   */
  reactMs: number | null;
  /**
   * ms from recovery (toMs) to the end of the first 1 s window, starting at or after recovery, in
   * which it got at least half its fair share again; null: not within afterMs
   */
  recoverMs: number | null;
  /** error answers (all requests, not only measured) */
  errors: number;
  /** error answers among requests that arrived during the episode */
  errorsDuring: number;
}

export const WINDOW_MS = 1000;
export const STEP_MS = 250;

/** Share of the fleet's capacity that instance `inst` holds (its fair share of the traffic). */
export function fairShare(fleet: FleetSpec, inst: number): number {
  return fleet.speeds[inst] / fleet.speeds.reduce((a, b) => a + b, 0);
}

/** Arrivals in [a, b) and how many of them went to `inst` (arrivals ascending). */
export function windowCounts(r: RunResult, inst: number, a: number, b: number): { all: number; sent: number } {
  const A = r.arrivals;
  let lo = 0;
  let hi = A.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (A[mid] < a) lo = mid + 1;
    else hi = mid;
  }
  let all = 0;
  let sent = 0;
  for (let i = lo; i < A.length && A[i] < b; i++) {
    if (r.choice[i] < 0) continue; // not routed: the run ended before it arrived
    all++;
    if (r.choice[i] === inst) sent++;
  }
  return { all, sent };
}

export function episodeStats(r: RunResult, fleet: FleetSpec, e: Episode, afterMs: number): EpisodeStats {
  const share = fairShare(fleet, e.inst);
  const during = windowCounts(r, e.inst, e.fromMs, e.toMs);
  const after = windowCounts(r, e.inst, e.toMs, e.toMs + afterMs);
  let reactMs: number | null = null;
  for (let a = e.fromMs; a + WINDOW_MS <= e.toMs; a += STEP_MS) {
    const w = windowCounts(r, e.inst, a, a + WINDOW_MS);
    if (w.all > 0 && w.sent < 0.5 * share * w.all) {
      reactMs = a + WINDOW_MS - e.fromMs;
      break;
    }
  }
  let recoverMs: number | null = null;
  for (let a = e.toMs; a + WINDOW_MS <= e.toMs + afterMs; a += STEP_MS) {
    const w = windowCounts(r, e.inst, a, a + WINDOW_MS);
    if (w.all > 0 && w.sent >= 0.5 * share * w.all) {
      recoverMs = a + WINDOW_MS - e.toMs;
      break;
    }
  }
  let errorsDuring = 0;
  if (e.kind === 'error') errorsDuring = during.sent; // every request it got in the episode was answered with an error
  return {
    sentDuring: during.sent, fairDuring: share * during.all, sentAfter: after.sent, fairAfter: share * after.all,
    reactMs, recoverMs, errors: r.errors, errorsDuring,
  };
}

/** The sick instance's share of the arrivals per 1 s window (stepped by 250 ms) over [fromMs, toMs). */
export function shareSeries(r: RunResult, inst: number, fromMs: number, toMs: number): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  for (let a = fromMs; a + WINDOW_MS <= toMs; a += STEP_MS) {
    const w = windowCounts(r, inst, a, a + WINDOW_MS);
    out.push([a + WINDOW_MS, w.all ? w.sent / w.all : 0]);
  }
  return out;
}


/** The sick instance's traffic share over time per policy, with the episode shaded. Hand-written SVG. */
export function shareSvg(series: Array<{ name: string; pts: Array<[number, number]> }>, e: Episode, fair: number, title: string): string {
  const W = 860;
  const H = 460;
  const L = 70;
  const R = 230;
  const T = 50;
  const B = 55;
  const pw = W - L - R;
  const ph = H - T - B;
  const xs = series.flatMap((s) => s.pts.map((p) => p[0]));
  const x0 = Math.min(...xs);
  const x1 = Math.max(...xs);
  const yMax = Math.max(2 * fair, ...series.flatMap((s) => s.pts.map((p) => p[1]))) * 1.05;
  const X = (t: number): number => L + ((t - x0) / (x1 - x0)) * pw;
  const Y = (v: number): number => T + ph - (v / yMax) * ph;
  const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  const o: string[] = [];
  o.push(`<?xml version="1.0" encoding="UTF-8"?>`);
  o.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="Helvetica, Arial, sans-serif" font-size="12">`);
  o.push(`<rect x="0" y="0" width="${W}" height="${H}" fill="white"/>`);
  o.push(`<text x="${L + pw / 2}" y="24" text-anchor="middle" font-size="15" font-weight="bold">${esc(title)}</text>`);
  o.push(`<rect x="${X(Math.max(e.fromMs, x0)).toFixed(1)}" y="${T}" width="${(X(Math.min(e.toMs, x1)) - X(Math.max(e.fromMs, x0))).toFixed(1)}" height="${ph}" fill="#fde0dc"/>`);
  for (const [v, label, dash] of [[fair, 'fair share', '4 3'], [fair / 2, 'half', '2 4']] as Array<[number, string, string]>) {
    o.push(`<line x1="${L}" y1="${Y(v).toFixed(1)}" x2="${L + pw}" y2="${Y(v).toFixed(1)}" stroke="#555" stroke-dasharray="${dash}"/>`);
    o.push(`<text x="${L + 4}" y="${(Y(v) - 4).toFixed(1)}" fill="#555">${label}</text>`);
  }
  for (let t = Math.ceil(x0 / 10_000) * 10_000; t <= x1; t += 10_000) {
    o.push(`<line x1="${X(t).toFixed(1)}" y1="${T}" x2="${X(t).toFixed(1)}" y2="${T + ph}" stroke="#eee"/>`);
    o.push(`<text x="${X(t).toFixed(1)}" y="${T + ph + 18}" text-anchor="middle">${t / 1000} s</text>`);
  }
  for (let k = 0; k <= 4; k++) {
    const v = (yMax * k) / 4;
    o.push(`<text x="${L - 6}" y="${(Y(v) + 4).toFixed(1)}" text-anchor="end">${(v * 100).toFixed(0)} %</text>`);
  }
  o.push(`<rect x="${L}" y="${T}" width="${pw}" height="${ph}" fill="none" stroke="#333"/>`);
  o.push(`<text x="${L + pw / 2}" y="${H - 14}" text-anchor="middle">virtual time (shaded: the episode)</text>`);
  o.push(`<text transform="translate(18 ${T + ph / 2}) rotate(-90)" text-anchor="middle">share of arrivals sent to the sick instance (1 s windows)</text>`);
  series.forEach((s, i) => {
    const c = COLORS[i % COLORS.length];
    o.push(`<polyline fill="none" stroke="${c}" stroke-width="1.6" points="${s.pts.map(([t, v]) => `${X(t).toFixed(1)},${Y(v).toFixed(1)}`).join(' ')}"/>`);
    const ly = T + 10 + i * 20;
    o.push(`<line x1="${L + pw + 14}" y1="${ly}" x2="${L + pw + 40}" y2="${ly}" stroke="${c}" stroke-width="2"/>`);
    o.push(`<text x="${L + pw + 46}" y="${ly + 4}">${esc(s.name)}</text>`);
  });
  o.push('</svg>');
  return o.join('\n') + '\n';
}
