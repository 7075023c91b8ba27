// Rule decisions (issue 8, decision D5): the agent evaluates the rules and publishes one
// decision per rule set in the snapshot's RULES section; the filter applies it per request.
// This module turns the decoded decisions into a per-snapshot plan, so the request path does
// one authority lookup and then only indexes pre-encoded bytes:
//   - an authority matcher over every decision's authorities (first set listed wins a name);
//   - per decision: the route header's index among the configured ones, the pre-encoded route
//     value, the split's cumulative weights and pre-encoded targets, the local reply's status,
//     header names/values and body, the debug header value;
//   - decisions whose routeHeader the configuration does not declare are refused: the filter
//     strips only declared headers, so writing an undeclared one would let a client-sent copy of
//     it pass on every other request.
import { AuthorityMatcher, checkPattern, shortNames } from "./authority";
import { RulesConfig, STATUS_NORMAL, STATUS_DEGRADED } from "./config";

export const ACTION_ROUTE: u8 = 1;
export const ACTION_LINK_STATUS: u8 = 2;
export const ACTION_SPLIT: u8 = 3;
export const ACTION_LOCAL_REPLY: u8 = 4;

// Bounds of the RULES section (docs/contracts.md); the agent enforces the same at config load.
export const MAX_RULE_SETS: i32 = 64;
export const MAX_SET_AUTHORITIES: i32 = 64;
export const MAX_SPLIT_TARGETS: i32 = 16;
export const MAX_SPLIT_WEIGHT: u32 = 1000000;
export const MAX_REPLY_HEADERS: i32 = 16;
export const MAX_REPLY_HEADER_VALUE_BYTES: i32 = 1024;
export const MAX_REPLY_BODY_BYTES: i32 = 4096;
export const MAX_BECAUSE: i32 = 64;

export class SplitTarget {
  constructor(public target: string, public weight: u32) {}
}

export class Because {
  constructor(public name: string, public value: bool) {}
}

/** One rule set's decision as the agent published it (agent RuleDecision, docs/rules.md). */
export class RuleDecision {
  set: string = "";
  authorities: Array<string> = [];
  routeHeader: string = "";
  version: u64 = 0;
  ruleId: string = "";
  kind: u8 = ACTION_ROUTE;
  /** route: the target */
  target: string = "";
  /** link-status: STATUS_NORMAL / STATUS_DEGRADED */
  linkStatus: i32 = STATUS_NORMAL;
  /** split: targets and integer weights */
  targets: Array<SplitTarget> = [];
  /** local-reply */
  replyStatus: i32 = 0;
  replyHeaderNames: Array<string> = [];
  replyHeaderValues: Array<string> = [];
  replyBody: string = "";
  sinceMs: u64 = 0;
  because: Array<Because> = [];
  /** an operator override is in force (author/reason/expiry are for humans: /status) */
  overridden: bool = false;
  overrideAuthor: string = "";
  overrideReason: string = "";
  overrideExpiresAtMs: u64 = 0;
}

/** What the request path applies for one accepted decision. */
export class RuleApply {
  set: string = "";
  ruleId: string = "";
  version: u64 = 0;
  kind: u8 = ACTION_ROUTE;
  /** index of the decision's routeHeader in RulesConfig.routeHeaders */
  header: i32 = 0;
  /** route: the value to write */
  value: ArrayBuffer = new ArrayBuffer(0);
  linkStatus: i32 = STATUS_NORMAL;
  /** split: cumulative weights (cum[i] = sum of weights 0..i) and the values to write */
  cum: StaticArray<u64> = new StaticArray<u64>(0);
  values: Array<ArrayBuffer> = [];
  total: u64 = 0;
  replyStatus: i32 = 0;
  replyNames: Array<ArrayBuffer> = [];
  replyValues: Array<ArrayBuffer> = [];
  replyBody: ArrayBuffer = new ArrayBuffer(0);
  /** value of the debug header: "rule set=<set> rule=<id> version=<v>" */
  debug: string = "";
}

export class RulesPlan {
  matcher: AuthorityMatcher = new AuthorityMatcher();
  applies: Array<RuleApply> = [];
  /** "set <name>: why" for every decision refused by this configuration */
  refused: Array<string> = [];
  /** the set name of each refused entry (for log-once bookkeeping) */
  refusedSets: Array<string> = [];

  get size(): i32 { return this.applies.length; }

  /** Index into applies for raw `:authority` bytes, or -1. */
  @inline match(raw: ArrayBuffer): i32 {
    return this.applies.length == 0 ? -1 : this.matcher.matchRaw(raw);
  }
}

function indexOfHeader(cfg: RulesConfig, name: string): i32 {
  for (let i = 0; i < cfg.routeHeaders.length; i++) if (cfg.routeHeaders[i] == name) return i;
  return -1;
}

/** The per-snapshot plan for `decisions` under configuration `cfg`. */
export function planRules(cfg: RulesConfig, decisions: Array<RuleDecision>): RulesPlan {
  const plan = new RulesPlan();
  const n = decisions.length < MAX_RULE_SETS ? decisions.length : MAX_RULE_SETS;
  for (let i = 0; i < n; i++) {
    const d = decisions[i];
    const h = indexOfHeader(cfg, d.routeHeader);
    if (h < 0) {
      plan.refused.push("set " + d.set + ": routeHeader \"" + d.routeHeader + "\" is not declared in rules.routeHeaders");
      plan.refusedSets.push(d.set);
      continue;
    }
    const a = new RuleApply();
    a.set = d.set;
    a.ruleId = d.ruleId;
    a.version = d.version;
    a.kind = d.kind;
    a.header = h;
    a.debug = "rule set=" + d.set + " rule=" + d.ruleId + " version=" + d.version.toString();
    if (d.kind == ACTION_ROUTE) {
      a.value = String.UTF8.encode(d.target);
    } else if (d.kind == ACTION_LINK_STATUS) {
      a.linkStatus = d.linkStatus == STATUS_DEGRADED ? STATUS_DEGRADED : STATUS_NORMAL;
    } else if (d.kind == ACTION_SPLIT) {
      const m = d.targets.length;
      a.cum = new StaticArray<u64>(m);
      let sum: u64 = 0;
      for (let k = 0; k < m; k++) {
        sum += <u64>d.targets[k].weight;
        a.cum[k] = sum;
        a.values.push(String.UTF8.encode(d.targets[k].target));
      }
      a.total = sum;
    } else {
      a.replyStatus = d.replyStatus;
      for (let k = 0; k < d.replyHeaderNames.length; k++) {
        a.replyNames.push(String.UTF8.encode(d.replyHeaderNames[k]));
        a.replyValues.push(String.UTF8.encode(d.replyHeaderValues[k]));
      }
      a.replyBody = String.UTF8.encode(d.replyBody);
    }
    const idx = plan.applies.length;
    plan.applies.push(a);
    for (let k = 0; k < d.authorities.length; k++) plan.matcher.add(d.authorities[k], idx);
    for (let k = 0; k < d.authorities.length; k++) {
      const derived = shortNames(d.authorities[k]);
      for (let j = 0; j < derived.length; j++) plan.matcher.add(derived[j], idx);
    }
  }
  return plan;
}

/** Index of the split target for a point in [0, total): the first k with point < cum[k]. */
export function splitIndex(cum: StaticArray<u64>, point: u64): i32 {
  const m = cum.length;
  for (let k = 0; k < m; k++) if (point < unchecked(cum[k])) return k;
  return m - 1;
}

/**
 * A request id's point in [0, total): FNV-1a 64 over its bytes, reduced modulo total. The same
 * id gives the same target on every worker VM and every proxy holding the same decision.
 */
export function requestIdPoint(raw: ArrayBuffer, total: u64): u64 {
  let h: u64 = 0xcbf29ce484222325;
  const p = changetype<usize>(raw);
  const n = <usize>raw.byteLength;
  for (let i: usize = 0; i < n; i++) {
    h ^= <u64>load<u8>(p + i);
    h *= 0x100000001b3;
  }
  // fold the high bits in: FNV's low bits alone mix poorly for short, similar ids
  h ^= h >> 32;
  return total == 0 ? 0 : h % total;
}

/** A uniform point in [0, total) from r in [0, 1). */
export function randomPoint(r: f64, total: u64): u64 {
  if (total == 0) return 0;
  const p = <u64>(r * <f64>total);
  return p >= total ? total - 1 : p;
}

/** "" when `d` is structurally valid (the RULES section's bounds), else the reason. */
export function decisionProblem(d: RuleDecision): string {
  if (!isSetName(d.set)) return "set name must match [A-Za-z0-9][A-Za-z0-9._-]{0,62}";
  if (d.authorities.length == 0 || d.authorities.length > MAX_SET_AUTHORITIES) return "set " + d.set + ": 1.." + MAX_SET_AUTHORITIES.toString() + " authorities";
  for (let i = 0; i < d.authorities.length; i++) {
    const why = checkPattern(d.authorities[i]);
    if (why.length > 0) return "set " + d.set + ": authority " + i.toString() + ": " + why;
  }
  if (!isRuleHeaderName(d.routeHeader)) return "set " + d.set + ": routeHeader is not a lower-case header name";
  if (d.version == 0) return "set " + d.set + ": version must be >= 1";
  if (d.ruleId.length == 0 || d.ruleId.length > 200) return "set " + d.set + ": rule id must be 1..200 characters";
  if (d.because.length > MAX_BECAUSE) return "set " + d.set + ": at most " + MAX_BECAUSE.toString() + " variables in because";
  if (d.kind == ACTION_ROUTE) {
    if (!isTarget(d.target)) return "set " + d.set + ": route target must match [A-Za-z0-9][A-Za-z0-9._:-]{0,127}";
  } else if (d.kind == ACTION_LINK_STATUS) {
    if (d.linkStatus != STATUS_NORMAL && d.linkStatus != STATUS_DEGRADED) return "set " + d.set + ": link status must be normal or degraded";
  } else if (d.kind == ACTION_SPLIT) {
    const m = d.targets.length;
    if (m == 0 || m > MAX_SPLIT_TARGETS) return "set " + d.set + ": 1.." + MAX_SPLIT_TARGETS.toString() + " split targets";
    let sum: u64 = 0;
    for (let k = 0; k < m; k++) {
      if (!isTarget(d.targets[k].target)) return "set " + d.set + ": split target " + k.toString() + " must match [A-Za-z0-9][A-Za-z0-9._:-]{0,127}";
      if (d.targets[k].weight > MAX_SPLIT_WEIGHT) return "set " + d.set + ": split weight " + k.toString() + " above " + MAX_SPLIT_WEIGHT.toString();
      sum += <u64>d.targets[k].weight;
    }
    if (sum == 0) return "set " + d.set + ": split weights sum to 0";
  } else if (d.kind == ACTION_LOCAL_REPLY) {
    if (d.replyStatus < 200 || d.replyStatus > 599) return "set " + d.set + ": local reply status must be 200..599";
    const h = d.replyHeaderNames.length;
    if (h > MAX_REPLY_HEADERS || h != d.replyHeaderValues.length) return "set " + d.set + ": at most " + MAX_REPLY_HEADERS.toString() + " reply headers";
    for (let k = 0; k < h; k++) {
      if (!isRuleHeaderName(d.replyHeaderNames[k])) return "set " + d.set + ": reply header " + k.toString() + " is not a lower-case header name";
      if (!isHeaderValue(d.replyHeaderValues[k])) return "set " + d.set + ": reply header " + k.toString() + " value: at most " + MAX_REPLY_HEADER_VALUE_BYTES.toString() + " bytes without CR, LF or NUL";
    }
    if (String.UTF8.byteLength(d.replyBody) > MAX_REPLY_BODY_BYTES) return "set " + d.set + ": reply body above " + MAX_REPLY_BODY_BYTES.toString() + " bytes";
  } else {
    return "set " + d.set + ": unknown action kind " + d.kind.toString();
  }
  return "";
}

function isAlnum(c: i32): bool {
  return (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || (c >= 0x30 && c <= 0x39);
}

function isSetName(s: string): bool {
  if (s.length == 0 || s.length > 63 || !isAlnum(s.charCodeAt(0))) return false;
  for (let i = 1; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (!isAlnum(c) && c != 0x2e && c != 0x5f && c != 0x2d) return false;
  }
  return true;
}

function isTarget(s: string): bool {
  if (s.length == 0 || s.length > 128 || !isAlnum(s.charCodeAt(0))) return false;
  for (let i = 1; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (!isAlnum(c) && c != 0x2e && c != 0x5f && c != 0x3a && c != 0x2d) return false;
  }
  return true;
}

/** RFC 9110 token, lower case, 1..128 (agent actions.ts HEADER_NAME_RE). */
function isRuleHeaderName(s: string): bool {
  if (s.length == 0 || s.length > 128) return false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if ((c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39)) continue;
    if ("!#$%&'*+.^_`|~-".indexOf(String.fromCharCode(c)) < 0) return false;
  }
  return true;
}

function isHeaderValue(s: string): bool {
  if (String.UTF8.byteLength(s) > MAX_REPLY_HEADER_VALUE_BYTES) return false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c == 0x0d || c == 0x0a || c == 0) return false;
    if (c < 0x20 && c != 0x09) return false;
    if (c == 0x7f) return false;
  }
  return true;
}
