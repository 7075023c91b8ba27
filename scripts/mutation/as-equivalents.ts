// Equivalent AssemblyScript mutants: the checked-in list scripts/mutation/equivalent-as.json says
// which mutants no test can kill because no behaviour tells them apart from the original, each
// with the argument. The report prints every score twice, raw and excluding the listed ones.
//
// An entry is keyed by file + operator + the original line's text + the mutated line's text (both
// trimmed; for a deleted guard `after` is ""), not by line number, so it survives edits elsewhere
// in the file. An entry whose mutant the generator no longer produces (the line changed or went
// away) is STALE: it is reported, never silently applied. PURE apart from reading files.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { generateMutants, type Mutant } from './as-mutants';

export interface Equivalent {
  file: string;
  operator: Mutant['operator'];
  before: string;
  after: string;
  reason: string;
}

export const EQUIVALENTS_FILE = 'scripts/mutation/equivalent-as.json';

const norm = (s: string) => s.trim();
export const keyOf = (m: { file: string; operator: string; before: string; after: string }): string =>
  `${m.file}\u0000${m.operator}\u0000${norm(m.before)}\u0000${norm(m.after)}`;

/** Reads and validates the list: each field present and non-empty (after may be ""), no duplicate key. */
export function loadEquivalents(root: string): Equivalent[] {
  const file = path.join(root, EQUIVALENTS_FILE);
  if (!fs.existsSync(file)) return [];
  const list = JSON.parse(fs.readFileSync(file, 'utf8')) as unknown;
  if (!Array.isArray(list)) throw new Error(`${EQUIVALENTS_FILE}: expected an array`);
  const seen = new Set<string>();
  return list.map((e: Record<string, unknown>, i) => {
    for (const k of ['file', 'operator', 'before', 'after', 'reason']) {
      if (typeof e[k] !== 'string') throw new Error(`${EQUIVALENTS_FILE}[${i}].${k}: expected a string`);
    }
    if (!(e.reason as string).trim()) throw new Error(`${EQUIVALENTS_FILE}[${i}].reason: must say why the mutant is equivalent`);
    const eq = e as unknown as Equivalent;
    const k = keyOf(eq);
    if (seen.has(k)) throw new Error(`${EQUIVALENTS_FILE}[${i}]: duplicate of an earlier entry (${eq.file} ${eq.operator})`);
    seen.add(k);
    return eq;
  });
}

/** Entries whose mutant the generator no longer produces from the current source. */
export function staleEquivalents(root: string, list: readonly Equivalent[]): Equivalent[] {
  const live = new Map<string, Set<string>>();
  const keysOf = (file: string): Set<string> => {
    let s = live.get(file);
    if (!s) {
      const abs = path.join(root, file);
      s = new Set(fs.existsSync(abs) ? generateMutants(file, fs.readFileSync(abs, 'utf8')).map(keyOf) : []);
      live.set(file, s);
    }
    return s;
  };
  return list.filter((e) => !keysOf(e.file).has(keyOf(e)));
}

/** key → reason, for the report */
export function equivalentIndex(list: readonly Equivalent[]): Map<string, string> {
  return new Map(list.map((e) => [keyOf(e), e.reason]));
}
