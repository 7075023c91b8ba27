// RULES section (type 3) of the snapshot: one rule decision per rule set (docs/rules.md "What
// the filter needs", docs/contracts.md "RULES section"). The agent validated and bounded every
// field at config load; write() re-checks only what the layout needs and read() applies the
// bounds the filter applies (filter/assembly/lib/rule-decisions.ts decisionProblem): a section
// that breaks one is a structural defect, the whole document is refused (D1).
import type { Reader, SectionCodec, Writer } from './codec';
import { readRecords, writeRecords } from './records';
import type { RuleDecision } from '../rules/engine';
import type { RuleAction } from '../rules/actions';

export const SECTION_RULES_TYPE = 3;

export const MAX_RULE_SETS = 64;
export const MAX_SET_AUTHORITIES = 64;
export const MAX_SPLIT_TARGETS = 16;
export const MAX_SPLIT_WEIGHT = 1_000_000;
export const MAX_REPLY_HEADERS = 16;
export const MAX_REPLY_HEADER_VALUE_BYTES = 1024;
export const MAX_REPLY_BODY_BYTES = 4096;
/** `because` is for humans: the encoder keeps the first 64 variables */
export const MAX_BECAUSE = 64;

const KIND_CODES: Record<RuleAction['kind'], number> = { route: 1, 'link-status': 2, split: 3, 'local-reply': 4 };
const SET_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;
const TARGET_RE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
const HEADER_RE = /^[a-z0-9!#$%&'*+.^_`|~-]{1,128}$/;
const AUTHORITY_RE = /^(\*\.)?[a-z0-9_-]+(\.[a-z0-9_-]+)*$/;
// eslint-disable-next-line no-control-regex
const HEADER_VALUE_BAD = /[\r\n\0]/;

/** At most `max` UTF-8 bytes, cut on a code point boundary (author and reason are free text). */
function cut(s: string, max = 255): string {
  if (Buffer.byteLength(s) <= max) return s;
  let out = '';
  for (const ch of s) {
    if (Buffer.byteLength(out + ch) > max) break;
    out += ch;
  }
  return out;
}

/** The bounds a decoded decision must meet; the message names the set and the field. */
export function decisionProblem(d: RuleDecision): string | undefined {
  const at = `set ${d.set}`;
  if (!SET_RE.test(d.set)) return `set name ${JSON.stringify(d.set)} must match ${SET_RE.source}`;
  if (d.authorities.length < 1 || d.authorities.length > MAX_SET_AUTHORITIES) return `${at}: 1..${MAX_SET_AUTHORITIES} authorities`;
  const badAuth = d.authorities.findIndex((a) => a.length > 253 || !AUTHORITY_RE.test(a));
  if (badAuth >= 0) return `${at}: authority ${badAuth}: not a lower-case host name or *.suffix`;
  if (!HEADER_RE.test(d.routeHeader)) return `${at}: routeHeader is not a lower-case header name`;
  if (!Number.isInteger(d.version) || d.version < 1) return `${at}: version must be >= 1`;
  if (d.ruleId.length < 1 || d.ruleId.length > 200) return `${at}: rule id must be 1..200 characters`;
  const a = d.action;
  switch (a.kind) {
    case 'route':
      if (!TARGET_RE.test(a.target)) return `${at}: route target must match ${TARGET_RE.source}`;
      break;
    case 'link-status':
      if (a.status !== 'normal' && a.status !== 'degraded') return `${at}: link status must be normal or degraded`;
      break;
    case 'split': {
      if (a.targets.length < 1 || a.targets.length > MAX_SPLIT_TARGETS) return `${at}: 1..${MAX_SPLIT_TARGETS} split targets`;
      let sum = 0;
      for (let k = 0; k < a.targets.length; k++) {
        if (!TARGET_RE.test(a.targets[k].target)) return `${at}: split target ${k} must match ${TARGET_RE.source}`;
        if (a.targets[k].weight > MAX_SPLIT_WEIGHT) return `${at}: split weight ${k} above ${MAX_SPLIT_WEIGHT}`;
        // Stryker disable next-line AssignmentOperator: equivalent, only sum === 0 is asked, and -Σw is 0 exactly when Σw is
        sum += a.targets[k].weight;
      }
      if (sum === 0) return `${at}: split weights sum to 0`;
      break;
    }
    case 'local-reply': {
      if (a.status < 200 || a.status > 599) return `${at}: local reply status must be 200..599`;
      const names = Object.keys(a.headers);
      if (names.length > MAX_REPLY_HEADERS) return `${at}: at most ${MAX_REPLY_HEADERS} reply headers`;
      for (let k = 0; k < names.length; k++) {
        if (!HEADER_RE.test(names[k])) return `${at}: reply header ${k} is not a lower-case header name`;
        const v = a.headers[names[k]];
        if (Buffer.byteLength(v) > MAX_REPLY_HEADER_VALUE_BYTES || HEADER_VALUE_BAD.test(v)) {
          return `${at}: reply header ${k} value: at most ${MAX_REPLY_HEADER_VALUE_BYTES} bytes without CR, LF or NUL`;
        }
      }
      if (Buffer.byteLength(a.body) > MAX_REPLY_BODY_BYTES) return `${at}: reply body above ${MAX_REPLY_BODY_BYTES} bytes`;
      break;
    }
  }
  return undefined;
}

export const RULES_SECTION: SectionCodec<RuleDecision[]> = {
  type: SECTION_RULES_TYPE,
  name: 'RULES',
  write(w: Writer, decisions: RuleDecision[]) {
    if (decisions.length > MAX_RULE_SETS) throw new RangeError(`rules: at most ${MAX_RULE_SETS} rule sets`);
    writeRecords(w, 'rules', decisions, (d, i) => {
      const f = `rules[${i}]`;
      w.str(d.set, `${f}.set`);
      if (d.authorities.length > MAX_SET_AUTHORITIES) throw new RangeError(`${f}.authorities: at most ${MAX_SET_AUTHORITIES}`);
      w.u8(d.authorities.length);
      d.authorities.forEach((a, k) => w.str(a, `${f}.authorities[${k}]`));
      w.str(d.routeHeader, `${f}.routeHeader`);
      w.u64(d.version);
      w.str(d.ruleId, `${f}.ruleId`);
      w.u64(Math.max(0, Math.floor(d.sinceMs)));
      const a = d.action;
      const code = KIND_CODES[a.kind];
      if (code === undefined) throw new RangeError(`${f}.action.kind: unknown`);
      w.u8(code);
      switch (a.kind) {
        case 'route':
          w.str(a.target, `${f}.action.target`);
          break;
        case 'link-status':
          w.u8(a.status === 'degraded' ? 1 : 0);
          break;
        case 'split':
          if (a.targets.length > MAX_SPLIT_TARGETS) throw new RangeError(`${f}.action.targets: at most ${MAX_SPLIT_TARGETS}`);
          w.u8(a.targets.length);
          a.targets.forEach((t, k) => {
            w.str(t.target, `${f}.action.targets[${k}].target`);
            w.u32(t.weight);
          });
          break;
        case 'local-reply': {
          w.u16(a.status);
          const names = Object.keys(a.headers);
          if (names.length > MAX_REPLY_HEADERS) throw new RangeError(`${f}.action.headers: at most ${MAX_REPLY_HEADERS}`);
          w.u8(names.length);
          for (const n of names) {
            w.str(n, `${f}.action.headers`);
            w.str16(a.headers[n], MAX_REPLY_HEADER_VALUE_BYTES, `${f}.action.headers.${n}`);
          }
          w.str16(a.body, MAX_REPLY_BODY_BYTES, `${f}.action.body`);
          break;
        }
      }
      const because = d.because.slice(0, MAX_BECAUSE);
      w.u8(because.length);
      because.forEach((b, k) => {
        w.str(b.name, `${f}.because[${k}].name`);
        w.u8(b.value ? 1 : 0);
      });
      const o = d.override;
      w.u8(o ? 1 : 0);
      if (o) {
        w.u8(o.rule !== undefined ? 0 : 1);
        w.str(o.rule ?? o.target ?? '', `${f}.override.rule`);
        w.str(cut(o.author), `${f}.override.author`);
        w.str(cut(o.reason), `${f}.override.reason`);
        w.u64(Math.max(0, Math.floor(o.setAtMs)));
        w.u64(Math.max(0, Math.floor(o.expiresAtMs)));
      }
    });
  },
  read(r: Reader): RuleDecision[] {
    const seen = new Set<string>();
    return readRecords(r, 'rules', (i): RuleDecision => {
      const set = r.str('rules', i, 'set');
      const nAuth = r.u8();
      const authorities: string[] = [];
      for (let k = 0; k < nAuth; k++) authorities.push(r.str('rules', i, `authorities[${k}]`));
      const routeHeader = r.str('rules', i, 'routeHeader');
      const version = r.u64('rules', i, 'version');
      const ruleId = r.str('rules', i, 'ruleId');
      const sinceMs = r.u64('rules', i, 'sinceMs');
      const kind = r.u8();
      let action: RuleAction;
      if (kind === 1) action = { kind: 'route', target: r.str('rules', i, 'action.target') };
      else if (kind === 2) {
        const st = r.u8();
        if (st > 1) r.fail(`rules[${i}]: unknown link status ${st}`);
        action = { kind: 'link-status', status: st === 1 ? 'degraded' : 'normal' };
      } else if (kind === 3) {
        const n = r.u8();
        const targets: Array<{ target: string; weight: number }> = [];
        for (let k = 0; k < n; k++) targets.push({ target: r.str('rules', i, `action.targets[${k}].target`), weight: r.u32() });
        action = { kind: 'split', targets };
      } else if (kind === 4) {
        const status = r.u16();
        const n = r.u8();
        const headers: Record<string, string> = {};
        for (let k = 0; k < n; k++) {
          const name = r.str('rules', i, `action.headers[${k}]`);
          if (Object.prototype.hasOwnProperty.call(headers, name)) r.fail(`rules[${i}]: duplicate reply header ${name}`);
          headers[name] = r.str16('rules', i, `action.headers[${k}].value`);
        }
        action = { kind: 'local-reply', status, headers, body: r.str16('rules', i, 'action.body') };
      } else {
        return r.fail(`set ${set}: unknown action kind ${kind}`);
      }
      const nBecause = r.u8();
      if (nBecause > MAX_BECAUSE) r.fail(`set ${set}: at most ${MAX_BECAUSE} variables in because`);
      const because: Array<{ name: string; value: boolean }> = [];
      for (let k = 0; k < nBecause; k++) {
        const name = r.str('rules', i, `because[${k}].name`);
        const v = r.u8();
        if (v > 1) r.fail(`set ${set}: because[${k}] value ${v} is not 0 or 1`);
        because.push({ name, value: v === 1 });
      }
      const d: RuleDecision = { set, authorities, routeHeader, version, ruleId, action, sinceMs, because };
      const has = r.u8();
      if (has > 1) r.fail(`set ${set}: override flag ${has} is not 0 or 1`);
      if (has === 1) {
        const by = r.u8();
        if (by > 1) r.fail(`set ${set}: unknown override kind ${by}`);
        const name = r.str('rules', i, 'override.rule');
        const author = r.str('rules', i, 'override.author');
        const reason = r.str('rules', i, 'override.reason');
        const setAtMs = r.u64('rules', i, 'override.setAtMs');
        const expiresAtMs = r.u64('rules', i, 'override.expiresAtMs');
        d.override = { ...(by === 0 ? { rule: name } : { target: name }), author, reason, setAtMs, expiresAtMs };
      }
      const problem = decisionProblem(d);
      if (problem) r.fail(problem);
      if (seen.has(set)) r.fail(`duplicate rule set ${set}`);
      seen.add(set);
      return d;
    }, MAX_RULE_SETS);
  },
};
