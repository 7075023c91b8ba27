// Rule actions and their validation. The filter applies them per request (D5); the agent only
// publishes them, so every bound that protects the filter is enforced here, at config load.

export type RuleAction =
  /** replace the rule set's routing header with `target` (a VirtualService / Envoy route matches it) */
  | { kind: 'route'; target: string }
  /** replace x-cross-cloud-status */
  | { kind: 'link-status'; status: 'normal' | 'degraded' }
  /** pick one target per request by weight (deterministic for a request id) and route to it */
  | { kind: 'split'; targets: Array<{ target: string; weight: number }> }
  /** answer locally, never forwarded */
  | { kind: 'local-reply'; status: number; headers: Record<string, string>; body: string };

export const MAX_BODY_BYTES = 4096;
export const MAX_REPLY_HEADERS = 16;
export const MAX_HEADER_VALUE_BYTES = 1024;
export const MAX_SPLIT_TARGETS = 16;
export const MAX_WEIGHT = 1_000_000;
export const TARGET_RE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
/** RFC 9110 token, lower case: HTTP/2 and Envoy carry header names lower-cased */
const HEADER_NAME_RE = /^[a-z0-9!#$%&'*+.^_`|~-]{1,128}$/;
/** RFC 9110 field-value without CR/LF/NUL */
const HEADER_VALUE_RE = /^[\t\x20-\x7e\x80-\xff]*$/;

/** connection-specific headers (RFC 9110 §7.6.1, RFC 9113 §8.2.2): Envoy drops or rejects them */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te', 'trailer', 'proxy-authenticate', 'proxy-authorization']);
/** headers Envoy computes itself on a local reply, or the filter owns */
const RESERVED = new Set(['content-length', 'host', 'x-cross-cloud-status', 'x-switchyard-endpoint', 'x-degraded']);

/** Problems with a header name a rule would write, or undefined if it is acceptable. */
export function headerNameProblem(name: string): string | undefined {
  if (typeof name !== 'string' || name.length === 0) return 'must be a non-empty string';
  if (name.startsWith(':')) return `"${name}" is a pseudo-header`;
  if (!HEADER_NAME_RE.test(name)) return `"${name}" is not a valid lower-case header name`;
  if (HOP_BY_HOP.has(name)) return `"${name}" is a hop-by-hop header`;
  if (name.startsWith('x-envoy-')) return `"${name}" is owned by Envoy`;
  if (RESERVED.has(name)) return `"${name}" is owned by Envoy or the filter`;
  return undefined;
}

/** Validate one action (already shaped by the JSON schema); returns "field: reason" problems. */
export function actionProblems(a: RuleAction, field: string): string[] {
  const p: string[] = [];
  switch (a.kind) {
    case 'route':
      if (!TARGET_RE.test(a.target)) p.push(`${field}.target: must match ${TARGET_RE.source}`);
      break;
    case 'link-status':
      if (a.status !== 'normal' && a.status !== 'degraded') p.push(`${field}.status: must be normal or degraded`);
      break;
    case 'split': {
      if (!Array.isArray(a.targets) || a.targets.length === 0) p.push(`${field}.targets: at least one target`);
      else if (a.targets.length > MAX_SPLIT_TARGETS) p.push(`${field}.targets: at most ${MAX_SPLIT_TARGETS}`);
      else {
        let sum = 0;
        const seen = new Set<string>();
        a.targets.forEach((t, i) => {
          if (!TARGET_RE.test(t.target)) p.push(`${field}.targets[${i}].target: must match ${TARGET_RE.source}`);
          else if (seen.has(t.target)) p.push(`${field}.targets[${i}].target: duplicate "${t.target}"`);
          seen.add(t.target);
          if (!Number.isInteger(t.weight) || t.weight < 0 || t.weight > MAX_WEIGHT) p.push(`${field}.targets[${i}].weight: must be an integer 0..${MAX_WEIGHT}`);
          else sum += t.weight;
        });
        if (p.length === 0 && sum <= 0) p.push(`${field}.targets: weights must sum to more than 0`);
      }
      break;
    }
    case 'local-reply': {
      if (!Number.isInteger(a.status) || a.status < 200 || a.status > 599) p.push(`${field}.status: must be an integer 200..599`);
      const names = Object.keys(a.headers ?? {});
      if (names.length > MAX_REPLY_HEADERS) p.push(`${field}.headers: at most ${MAX_REPLY_HEADERS}`);
      for (const n of names) {
        const np = headerNameProblem(n);
        if (np) p.push(`${field}.headers.${n}: ${np}`);
        const v = a.headers[n];
        if (typeof v !== 'string' || !HEADER_VALUE_RE.test(v) || Buffer.byteLength(v) > MAX_HEADER_VALUE_BYTES)
          p.push(`${field}.headers.${n}: value must be a string of at most ${MAX_HEADER_VALUE_BYTES} bytes without CR, LF or NUL`);
      }
      if (typeof a.body !== 'string') p.push(`${field}.body: must be a string`);
      else if (Buffer.byteLength(a.body) > MAX_BODY_BYTES) p.push(`${field}.body: at most ${MAX_BODY_BYTES} bytes (UTF-8)`);
      break;
    }
    default:
      p.push(`${field}.kind: must be route, link-status, split or local-reply`);
  }
  return p;
}

/** the routing targets an action may write (for the override-by-target check) */
export function actionTargets(a: RuleAction): string[] {
  if (a.kind === 'route') return [a.target];
  if (a.kind === 'split') return a.targets.map((t) => t.target);
  return [];
}
