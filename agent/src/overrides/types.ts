// Operator flags and overrides: the records, their validation (records may come from etcdctl,
// so they are checked like any other untrusted input) and the store interface.
import type { EventEmitter } from 'node:events';

export interface FlagEntry {
  value: boolean;
  author: string;
  reason: string;
  setAtMs: number;
  /** optional for flags; bounded by admin.maxOverrideS when set through the admin API */
  expiresAtMs?: number;
}

export interface OverrideEntry {
  /** a rule id of the set ... */
  rule?: string;
  /** ... or a routing target */
  target?: string;
  author: string;
  reason: string;
  setAtMs: number;
  /** mandatory */
  expiresAtMs: number;
}

export interface StoreStatus {
  kind: 'memory' | 'etcd';
  /** false while the store cannot be reached: the last known flags and overrides stay in force */
  connected: boolean;
  /** epoch ms of the last connected/disconnected transition */
  sinceMs: number;
  lastError?: string;
  flags: number;
  overrides: number;
  /** records refused (malformed, over the bound) since start */
  rejected: number;
  lastRejected?: string;
}

export interface StoreEvents {
  change: [];
  connection: [{ connected: boolean; error?: string }];
}

export interface OverrideStore extends EventEmitter<StoreEvents> {
  readonly kind: 'memory' | 'etcd';
  start(): Promise<void>;
  stop(): Promise<void>;
  flags(): ReadonlyMap<string, FlagEntry>;
  overrides(): ReadonlyMap<string, OverrideEntry>;
  putFlag(name: string, e: FlagEntry): Promise<void>;
  deleteFlag(name: string): Promise<boolean>;
  putOverride(set: string, e: OverrideEntry): Promise<void>;
  deleteOverride(set: string): Promise<boolean>;
  status(): StoreStatus;
}

export const NAME_RE = /^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$/;
const MAX_TEXT = 500;
const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const text = (v: unknown): v is string => typeof v === 'string' && v.length > 0 && v.length <= MAX_TEXT && !/[\x00-\x1f]/.test(v);
const time = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v) && v >= 0 && v <= 8.64e15;

/** A flag record from untrusted input (etcd value): the entry, or a reason it is refused. */
export function parseFlag(raw: unknown): FlagEntry | string {
  if (!isObj(raw)) return 'must be a JSON object';
  if (typeof raw.value !== 'boolean') return 'value: must be a boolean';
  if (!text(raw.author)) return `author: required, 1..${MAX_TEXT} characters`;
  if (!text(raw.reason)) return `reason: required, 1..${MAX_TEXT} characters`;
  if (!time(raw.setAtMs)) return 'setAtMs: must be epoch milliseconds';
  if (raw.expiresAtMs !== undefined && !time(raw.expiresAtMs)) return 'expiresAtMs: must be epoch milliseconds';
  return { value: raw.value, author: raw.author, reason: raw.reason, setAtMs: raw.setAtMs, ...(raw.expiresAtMs !== undefined ? { expiresAtMs: raw.expiresAtMs as number } : {}) };
}

/** An override record from untrusted input. */
export function parseOverride(raw: unknown): OverrideEntry | string {
  if (!isObj(raw)) return 'must be a JSON object';
  const hasRule = raw.rule !== undefined;
  const hasTarget = raw.target !== undefined;
  if (hasRule === hasTarget) return 'exactly one of rule, target';
  if (hasRule && !(typeof raw.rule === 'string' && NAME_RE.test(raw.rule))) return 'rule: must be a rule id';
  if (hasTarget && !(typeof raw.target === 'string' && /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/.test(raw.target))) return 'target: must be a routing target';
  if (!text(raw.author)) return `author: required, 1..${MAX_TEXT} characters`;
  if (!text(raw.reason)) return `reason: required, 1..${MAX_TEXT} characters`;
  if (!time(raw.setAtMs)) return 'setAtMs: must be epoch milliseconds';
  if (!time(raw.expiresAtMs)) return 'expiresAtMs: required (an override must expire), epoch milliseconds';
  return {
    ...(hasRule ? { rule: raw.rule as string } : { target: raw.target as string }),
    author: raw.author,
    reason: raw.reason,
    setAtMs: raw.setAtMs,
    expiresAtMs: raw.expiresAtMs,
  };
}
