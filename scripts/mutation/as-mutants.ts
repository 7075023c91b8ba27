// Mutant generation for the AssemblyScript filter (filter/assembly/lib/**, filter/assembly/plugin/**).
// No maintained mutation tool understands AssemblyScript, so mutants are derived from source
// patterns (not a hand-kept list: they follow the code as it changes). PURE: text in, mutants out.
//
// Operators (each mutant is ONE change at one place):
//   relational   < ↔ <=, > ↔ >=            (only spaced binary operators: `a < b`, never generics)
//   equality     == ↔ !=, === ↔ !==
//   logical      && ↔ ||
//   arithmetic   + ↔ -, += ↔ -=           (spaced binary operators only)
//   constant     integer literal n → n+1, n-1
//   return       return true ↔ return false
//   guard        delete a guard `if (...) return|continue|break ...;` (one line, or `if (...) {`
//                + one such statement + `}`)

import { mulberry32 } from '../../sim/inference/prng';
export interface Mutant {
  /** stable id: file:line:col:operator:variant */
  id: string;
  file: string;
  /** 1-based line of the change */
  line: number;
  operator: 'relational' | 'equality' | 'logical' | 'arithmetic' | 'constant' | 'return' | 'guard';
  /** lines [line, line + removed) of the original are replaced by `replacement` */
  removed: number;
  replacement: string[];
  /** the original first line and its mutated form, for the report */
  before: string;
  after: string;
}

/** The code part of each line: comments and string contents blanked (same length), so patterns
 *  never match inside them. Handles // and block comments and '…', "…", `…` on one line. */
export function codeMask(lines: readonly string[]): string[] {
  const out: string[] = [];
  let inBlock = false;
  for (const line of lines) {
    let m = '';
    let quote = '';
    for (let i = 0; i < line.length; i++) {
      const c = line[i];
      if (inBlock) {
        if (c === '*' && line[i + 1] === '/') { inBlock = false; m += '  '; i++; } else m += ' ';
        continue;
      }
      if (quote) {
        if (c === '\\') { m += '  '; i++; continue; }
        if (c === quote) { quote = ''; m += c; } else m += ' ';
        continue;
      }
      if (c === '/' && line[i + 1] === '/') { m += ' '.repeat(line.length - i); break; }
      if (c === '/' && line[i + 1] === '*') { inBlock = true; m += '  '; i++; continue; }
      if (c === '"' || c === "'" || c === '`') quote = c;
      m += c;
    }
    out.push(m);
  }
  return out;
}

interface Swap { operator: Mutant['operator']; re: RegExp; to: (s: string) => string[] }

const SWAPS: Swap[] = [
  { operator: 'relational', re: / (<=|>=|<|>) /g, to: (s) => [({ '<': '<=', '<=': '<', '>': '>=', '>=': '>' } as Record<string, string>)[s]] },
  { operator: 'equality', re: / (===|!==|==|!=) /g, to: (s) => [({ '==': '!=', '!=': '==', '===': '!==', '!==': '===' } as Record<string, string>)[s]] },
  { operator: 'logical', re: / (&&|\|\|) /g, to: (s) => [s === '&&' ? '||' : '&&'] },
  { operator: 'arithmetic', re: / (\+=|-=|\+|-) /g, to: (s) => [({ '+': '-', '-': '+', '+=': '-=', '-=': '+=' } as Record<string, string>)[s]] },
  // integer literals not part of an identifier, a float, a hex/binary literal or a type (u8 ...)
  { operator: 'constant', re: /(?<![\w.$])(\d+)(?![\w.])/g, to: (s) => { const n = Number(s); return n > 0 ? [String(n + 1), String(n - 1)] : [String(n + 1)]; } },
  { operator: 'return', re: /\breturn (true|false)\b/g, to: (s) => [s === 'true' ? 'false' : 'true'] },
];

/** Lines that carry no behaviour worth mutating (imports, decorators, declarations only). */
function skipLine(code: string): boolean {
  const t = code.trim();
  return t === '' || t.startsWith('import ') || t.startsWith('export {') || t.startsWith('@') || /^export \* from/.test(t);
}

const GUARD_ONE = /^\s*if \(.*\)\s*(\{\s*)?(return\b[^;]*|continue|break);\s*(\})?\s*$/;
const GUARD_OPEN = /^\s*if \(.*\)\s*\{\s*$/;
const GUARD_BODY = /^\s*(return\b[^;]*|continue|break);\s*$/;

export function generateMutants(file: string, source: string): Mutant[] {
  const lines = source.split('\n');
  const mask = codeMask(lines);
  const out: Mutant[] = [];
  for (let i = 0; i < lines.length; i++) {
    const code = mask[i];
    if (skipLine(code)) continue;
    for (const sw of SWAPS) {
      sw.re.lastIndex = 0;
      for (let m = sw.re.exec(code); m; m = sw.re.exec(code)) {
        const tok = m[1];
        const col = m.index + m[0].indexOf(tok);
        // `-` of a negative literal or a unary minus is not a binary operator; `a - 1` is.
        const variants = sw.to(tok);
        variants.forEach((rep, v) => {
          const after = lines[i].slice(0, col) + rep + lines[i].slice(col + tok.length);
          out.push({
            id: `${file}:${i + 1}:${col + 1}:${sw.operator}:${v}`,
            file, line: i + 1, operator: sw.operator, removed: 1, replacement: [after],
            before: lines[i], after,
          });
        });
      }
    }
    if (GUARD_ONE.test(code)) {
      out.push({ id: `${file}:${i + 1}:1:guard:0`, file, line: i + 1, operator: 'guard', removed: 1, replacement: [''], before: lines[i], after: '' });
    } else if (GUARD_OPEN.test(code) && i + 2 < lines.length && GUARD_BODY.test(mask[i + 1]) && /^\s*\}\s*$/.test(mask[i + 2])) {
      out.push({ id: `${file}:${i + 1}:1:guard:0`, file, line: i + 1, operator: 'guard', removed: 3, replacement: [''], before: `${lines[i].trim()} ${lines[i + 1].trim()} }`, after: '' });
    }
  }
  return out;
}

/** The mutated source. */
export function applyMutant(source: string, m: Mutant): string {
  const lines = source.split('\n');
  lines.splice(m.line - 1, m.removed, ...m.replacement);
  return lines.join('\n');
}

/** mulberry32 (sim/inference/prng.ts): a small seeded PRNG, so a sample is reproducible from its seed. */
export const prng = mulberry32;

/** A seeded sample of at most `cap` mutants (Fisher-Yates on a copy), in source order. */
export function sample<T extends { line: number }>(items: readonly T[], cap: number, seed: number): T[] {
  return shuffle(items, seed).slice(0, cap).sort((x, y) => x.line - y.line);
}

export function shuffle<T>(items: readonly T[], seed: number): T[] {
  const a = items.slice();
  const rnd = prng(seed);
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [a[i], a[j]] = [a[j], a[i]];
  }
  return a;
}

/** A seeded sample of at most `cap` mutants spread over the operators (each operator's mutants
 *  shuffled, then taken round-robin), so the many integer constants do not crowd out the guards,
 *  boundaries and returns. */
export function sampleByOperator(items: readonly Mutant[], cap: number, seed: number): Mutant[] {
  const byOp = new Map<string, Mutant[]>();
  for (const m of items) byOp.set(m.operator, [...(byOp.get(m.operator) ?? []), m]);
  const lists = shuffle([...byOp.keys()].sort(), seed).map((op, k) => shuffle(byOp.get(op)!, seed + 1 + k));
  const out: Mutant[] = [];
  for (let round = 0; out.length < cap && lists.some((l) => round < l.length); round++) {
    for (const l of lists) if (round < l.length && out.length < cap) out.push(l[round]);
  }
  return out.sort((x, y) => x.line - y.line);
}
