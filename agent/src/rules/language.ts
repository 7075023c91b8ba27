// Rule conditions: a hand-written tokenizer and recursive-descent parser for
//   expr   := or
//   or     := and ('OR' and)*
//   and    := unary ('AND' unary)*
//   unary  := 'NOT' unary | atom
//   atom   := 'TRUE' | 'FALSE' | IDENT | '(' or ')'
// compiled once into postfix bytecode (Int32Array) that evaluate() runs on a stack of booleans.
// Nothing is ever executed as code; identifiers are whole tokens resolved to slot numbers at
// compile time, so `dc1_api` can never match inside `dc1_api_healthy`.

export const KEYWORDS = ['TRUE', 'FALSE', 'NOT', 'AND', 'OR'] as const;
export const IDENT_RE = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
export const MAX_CONDITION_CHARS = 4096;
/** nesting bound: the parser recurses, a hostile condition must not exhaust the stack */
export const MAX_DEPTH = 64;

type TokKind = 'ident' | 'TRUE' | 'FALSE' | 'NOT' | 'AND' | 'OR' | '(' | ')' | 'end';
interface Token {
  kind: TokKind;
  text: string;
  /** 1-based column of the first character */
  pos: number;
}

/** A condition that does not parse or names an unknown variable. `pos` is 1-based. */
export class ConditionError extends Error {
  constructor(
    readonly pos: number,
    readonly detail: string,
  ) {
    super(`position ${pos}: ${detail}`);
    this.name = 'ConditionError';
  }
}

function tokenize(src: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  while (i < src.length) {
    const c = src[i];
    if (c === ' ' || c === '\t' || c === '\n' || c === '\r') {
      i++;
      continue;
    }
    if (c === '(' || c === ')') {
      out.push({ kind: c, text: c, pos: i + 1 });
      i++;
      continue;
    }
    if (/[A-Za-z_]/.test(c)) {
      let j = i + 1;
      while (j < src.length && /[A-Za-z0-9_]/.test(src[j])) j++;
      const text = src.slice(i, j);
      const kw = (KEYWORDS as readonly string[]).includes(text) ? (text as TokKind) : 'ident';
      if (kw === 'ident' && text.length > 64) throw new ConditionError(i + 1, `identifier longer than 64 characters`);
      out.push({ kind: kw, text, pos: i + 1 });
      i = j;
      continue;
    }
    const shown = c === '&' || c === '|' || c === '!' ? ` (use AND, OR, NOT)` : '';
    throw new ConditionError(i + 1, `unexpected character ${JSON.stringify(c)}${shown}; expected a variable, TRUE, FALSE, NOT or "("`);
  }
  out.push({ kind: 'end', text: '', pos: src.length + 1 });
  return out;
}

export type Ast =
  | { t: 'const'; v: boolean }
  | { t: 'var'; name: string; pos: number }
  | { t: 'not'; e: Ast }
  | { t: 'and' | 'or'; l: Ast; r: Ast };

/** Parse one condition; throws ConditionError with the 1-based position and what was expected. */
export function parseCondition(src: string): Ast {
  if (typeof src !== 'string') throw new ConditionError(1, 'must be a string');
  if (src.length > MAX_CONDITION_CHARS) throw new ConditionError(MAX_CONDITION_CHARS + 1, `longer than ${MAX_CONDITION_CHARS} characters`);
  const toks = tokenize(src);
  let k = 0;
  const peek = (): Token => toks[k];
  const describe = (t: Token): string => (t.kind === 'end' ? 'end of condition' : JSON.stringify(t.text));

  const parseOr = (depth: number): Ast => {
    let l = parseAnd(depth);
    while (peek().kind === 'OR') {
      k++;
      l = { t: 'or', l, r: parseAnd(depth) };
    }
    return l;
  };
  const parseAnd = (depth: number): Ast => {
    let l = parseUnary(depth);
    while (peek().kind === 'AND') {
      k++;
      l = { t: 'and', l, r: parseUnary(depth) };
    }
    return l;
  };
  const parseUnary = (depth: number): Ast => {
    if (depth > MAX_DEPTH) throw new ConditionError(peek().pos, `nested deeper than ${MAX_DEPTH}`);
    const t = peek();
    if (t.kind === 'NOT') {
      k++;
      return { t: 'not', e: parseUnary(depth + 1) };
    }
    return parseAtom(depth);
  };
  const parseAtom = (depth: number): Ast => {
    const t = peek();
    switch (t.kind) {
      case 'TRUE':
      case 'FALSE':
        k++;
        return { t: 'const', v: t.kind === 'TRUE' };
      case 'ident':
        k++;
        return { t: 'var', name: t.text, pos: t.pos };
      case '(': {
        k++;
        const e = parseOr(depth + 1);
        const close = peek();
        if (close.kind !== ')') throw new ConditionError(close.pos, `expected ")" or an operator (AND, OR), found ${describe(close)}`);
        k++;
        return e;
      }
      default:
        throw new ConditionError(t.pos, `expected a variable, TRUE, FALSE, NOT or "(", found ${describe(t)}`);
    }
  };

  const ast = parseOr(0);
  const rest = peek();
  if (rest.kind !== 'end') {
    const hint = rest.kind === ')' ? 'unbalanced ")"' : `found ${describe(rest)}`;
    throw new ConditionError(rest.pos, `expected AND, OR or end of condition, ${hint}`);
  }
  return ast;
}

// Bytecode: one Int32 per op. >= 0: push the value of variable slot n.
export const OP_FALSE = -1;
export const OP_TRUE = -2;
export const OP_NOT = -3;
export const OP_AND = -4;
export const OP_OR = -5;

export interface CompiledCondition {
  source: string;
  code: Int32Array;
  /** slots of the variables the condition reads, in first-appearance order, no duplicates */
  reads: number[];
  /** true for the literal TRUE (the default rule) */
  alwaysTrue: boolean;
}

/**
 * Parse and compile against a variable table (name -> slot). An unknown identifier throws
 * ConditionError at its position.
 */
export function compileCondition(src: string, slots: ReadonlyMap<string, number>): CompiledCondition {
  const ast = parseCondition(src);
  const code: number[] = [];
  const reads: number[] = [];
  const emit = (a: Ast): void => {
    switch (a.t) {
      case 'const':
        code.push(a.v ? OP_TRUE : OP_FALSE);
        return;
      case 'var': {
        const slot = slots.get(a.name);
        if (slot === undefined) throw new ConditionError(a.pos, `unknown variable "${a.name}"; expected one of the declared variables`);
        if (!reads.includes(slot)) reads.push(slot);
        code.push(slot);
        return;
      }
      case 'not':
        emit(a.e);
        code.push(OP_NOT);
        return;
      default:
        emit(a.l);
        emit(a.r);
        code.push(a.t === 'and' ? OP_AND : OP_OR);
    }
  };
  emit(ast);
  return { source: src, code: Int32Array.from(code), reads, alwaysTrue: ast.t === 'const' && ast.v };
}

/** Stack shared by every evaluation (single-threaded): conditions are bounded by MAX_CONDITION_CHARS. */
const stack = new Int32Array(MAX_CONDITION_CHARS + 1);

/** Run compiled bytecode over variable values indexed by slot. */
export function evaluate(code: Int32Array, values: ArrayLike<boolean | number>): boolean {
  let sp = 0;
  for (let i = 0; i < code.length; i++) {
    const op = code[i];
    if (op >= 0) stack[sp++] = values[op] ? 1 : 0;
    else if (op === OP_AND) {
      sp--;
      stack[sp - 1] &= stack[sp];
    } else if (op === OP_OR) {
      sp--;
      stack[sp - 1] |= stack[sp];
    } else if (op === OP_NOT) stack[sp - 1] ^= 1;
    else stack[sp++] = op === OP_TRUE ? 1 : 0;
  }
  return stack[0] === 1;
}
