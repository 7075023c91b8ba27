// The verdict of `npm start -- --once`: did routing follow the leased line? PURE.
//
// Per phase (each judged after its first second, the reaction time): requests to the payment
// service, how many went to cloud-b, how many carried x-cross-cloud-status: degraded.
//   normal, restored: some traffic crossed the line (cloud-b > 0) AND the phase was not mostly
//                     degraded (degraded <= half): a steady 10 ms line must read as normal,
//                     not only "sometimes normal" (a starved agent marked 141 of 183 degraded);
//   slow:             nothing crossed the line and every request was degraded.

export interface PhaseCounts {
  cloudB: number;
  total: number;
  degraded: number;
}

export type Verdict = Record<'normal' | 'slow' | 'restored', PhaseCounts>;

/** Above this share of degraded requests a normal/restored phase fails. */
export const MAX_DEGRADED_SHARE_WHEN_NORMAL = 0.5;

export function judgeOnce(v: Verdict): { ok: boolean; problems: string[] } {
  const problems: string[] = [];
  for (const name of ['normal', 'restored'] as const) {
    const p = v[name];
    if (!p || p.total === 0) {
      problems.push(`${name}: no requests`);
      continue;
    }
    if (p.cloudB === 0) problems.push(`${name}: no request crossed the line`);
    if (p.degraded > MAX_DEGRADED_SHARE_WHEN_NORMAL * p.total) {
      problems.push(`${name}: mostly degraded (${p.degraded} of ${p.total}) while the line was steady`);
    }
  }
  const s = v.slow;
  if (!s || s.total === 0) problems.push('slow: no requests');
  else {
    if (s.cloudB > 0) problems.push(`slow: ${s.cloudB} of ${s.total} requests crossed the slow line`);
    if (s.degraded !== s.total) problems.push(`slow: ${s.total - s.degraded} of ${s.total} requests not marked degraded`);
  }
  return { ok: problems.length === 0, problems };
}

/** The inference demo's totals per policy (rig/llm.ts). */
export interface LlmPolicyCounts {
  sent: number;
  ok: number;
  errors: number;
  /** prompt tokens served from the prefix cache / prompt tokens (NaN: none answered) */
  hitRate: number;
}

/** Errors above this share of a policy's requests fail the demo. */
export const MAX_LLM_ERROR_SHARE = 0.05;
export const MIN_LLM_ANSWERED = 20;

/**
 * The inference demo's verdict: every policy answered (≥ MIN_LLM_ANSWERED, errors ≤ 5 %), and the
 * request-aware choice served more of the prompt tokens from the prefix cache than Envoy's
 * LEAST_REQUEST on the same requests. PURE.
 */
export function judgeLlm(v: Record<'request-aware' | 'body-blind' | 'least-request', LlmPolicyCounts>): { ok: boolean; problems: string[] } {
  const problems: string[] = [];
  for (const [name, p] of Object.entries(v)) {
    if (p.ok < MIN_LLM_ANSWERED) problems.push(`${name}: only ${p.ok} requests answered`);
    if (p.errors > MAX_LLM_ERROR_SHARE * Math.max(1, p.sent)) problems.push(`${name}: ${p.errors} of ${p.sent} requests failed`);
  }
  const a = v['request-aware'].hitRate, lr = v['least-request'].hitRate;
  if (!(a > lr)) problems.push(`request-aware prefix hit rate ${(100 * a).toFixed(0)}% is not above least-request's ${(100 * lr).toFixed(0)}%`);
  return { ok: problems.length === 0, problems };
}
