// Command-line flags of the benchmark and trace scripts: one parser for all of them (node:util
// parseArgs, strict), so a mistyped or unknown flag is refused with its name instead of the run
// silently measuring the defaults, a number that does not parse is refused with the flag named,
// and `--help` prints the flags a script takes with their defaults.
//
//   const o = cli('npx tsx bench/x.ts', 'What it measures.', {
//     seed: int(1, 'first seed'), quick: flag('short paths'), wasm: str('build/switchyard.wasm', 'filter'),
//   });
//   o.seed  // number
import { parseArgs } from 'node:util';

export class CliError extends Error {}

/** One flag: how parseArgs reads it, its default as shown in --help, and how its text becomes a value. */
export interface Opt<T> {
  readonly type: 'string' | 'boolean';
  readonly help: string;
  readonly shown: string;
  read(raw: string | boolean | undefined, name: string): T;
}

/** A boolean switch (`--quick`), false when absent. */
export function flag(help: string): Opt<boolean> {
  return { type: 'boolean', help, shown: '', read: (v) => v === true };
}

/** A string; `def` when absent. */
export function str(def: string, help: string): Opt<string> {
  return { type: 'string', help, shown: def === '' ? '' : `(default ${def})`, read: (v) => (typeof v === 'string' ? v : def) };
}

/** A string that may be absent (undefined: the script's own fallback, said in `help`). */
export function optStr(help: string): Opt<string | undefined> {
  return { type: 'string', help, shown: '', read: (v) => (typeof v === 'string' ? v : undefined) };
}

/** One of `values`. */
export function oneOf<K extends string>(values: readonly K[], def: K, help: string): Opt<K> {
  return {
    type: 'string', help, shown: `(${values.join('|')}; default ${def})`,
    read: (v, name) => {
      const s = typeof v === 'string' ? v : def;
      if (!(values as readonly string[]).includes(s)) throw new CliError(`--${name} must be one of ${values.join('|')}, got "${s}"`);
      return s as K;
    },
  };
}

function toNumber(s: string, name: string, integer: boolean, min: number): number {
  const n = Number(s);
  if (s.trim() === '' || !Number.isFinite(n)) throw new CliError(`--${name} must be a number, got "${s}"`);
  if (integer && !Number.isInteger(n)) throw new CliError(`--${name} must be an integer, got "${s}"`);
  if (n < min) throw new CliError(`--${name} must be >= ${min}, got "${s}"`);
  return n;
}

/** A finite number >= `min`; `def` when absent. */
export function num(def: number, help: string, min = -Infinity): Opt<number> {
  return { type: 'string', help, shown: `(default ${def})`, read: (v, name) => (typeof v === 'string' ? toNumber(v, name, false, min) : def) };
}

/** An integer >= `min`; `def` when absent. */
export function int(def: number, help: string, min = -Infinity): Opt<number> {
  return { type: 'string', help, shown: `(default ${def})`, read: (v, name) => (typeof v === 'string' ? toNumber(v, name, true, min) : def) };
}

/** A number that may be absent (undefined: the script's own fallback, said in `help`). */
export function optNum(help: string, min = -Infinity): Opt<number | undefined> {
  return { type: 'string', help, shown: '', read: (v, name) => (typeof v === 'string' ? toNumber(v, name, false, min) : undefined) };
}

/** A comma-separated list of strings (empty items dropped); `def` when absent. */
export function list(def: string, help: string): Opt<string[]> {
  return {
    type: 'string', help, shown: def === '' ? '' : `(default ${def})`,
    read: (v) => (typeof v === 'string' ? v : def).split(',').map((x) => x.trim()).filter((x) => x.length > 0),
  };
}

/** A comma-separated list of finite numbers; `def` when absent. */
export function nums(def: string, help: string): Opt<number[]> {
  return {
    type: 'string', help, shown: `(default ${def})`,
    read: (v, name) => (typeof v === 'string' ? v : def).split(',').filter((x) => x.trim().length > 0).map((x) => toNumber(x, name, false, -Infinity)),
  };
}

type Values<S> = { [K in keyof S]: S[K] extends Opt<infer T> ? T : never };

/** The usage text of `spec`. */
export function usage(command: string, about: string, spec: Record<string, Opt<unknown>>): string {
  const rows = Object.entries(spec).map(([k, o]) => [`  --${k}${o.type === 'string' ? ' VALUE' : ''}`, [o.help, o.shown].filter((x) => x).join(' ')]);
  const w = Math.max(...rows.map(([a]) => a.length), 10) + 2;
  return [`usage: ${command} [flags]`, about, '', ...rows.map(([a, b]) => a.padEnd(w) + b), `  --help`.padEnd(w) + 'this text'].join('\n');
}

/**
 * Parses `argv` against `spec`. Throws CliError on an unknown flag, a missing value, a positional
 * argument or a value its Opt refuses. `--help` returns undefined (the caller prints usage).
 */
export function parseFlags<S extends Record<string, Opt<unknown>>>(spec: S, argv: string[]): Values<S> | undefined {
  const options: Record<string, { type: 'string' | 'boolean' }> = { help: { type: 'boolean' } };
  for (const [k, o] of Object.entries(spec)) options[k] = { type: o.type };
  let values: Record<string, string | boolean | undefined>;
  try {
    values = parseArgs({ args: argv, options, strict: true, allowPositionals: false }).values as Record<string, string | boolean | undefined>;
  } catch (e) {
    throw new CliError((e as Error).message);
  }
  if (values.help === true) return undefined;
  const out: Record<string, unknown> = {};
  for (const [k, o] of Object.entries(spec)) out[k] = o.read(values[k], k);
  return out as Values<S>;
}

/**
 * The script's flags from process.argv: prints usage and exits 0 on --help; prints the error and
 * usage and exits 2 on a flag it does not take or a value it refuses.
 */
export function cli<S extends Record<string, Opt<unknown>>>(command: string, about: string, spec: S, argv = process.argv.slice(2)): Values<S> {
  try {
    const v = parseFlags(spec, argv);
    if (v) return v;
    console.log(usage(command, about, spec));
    process.exit(0);
  } catch (e) {
    if (!(e instanceof CliError)) throw e;
    console.error(`${command}: ${e.message}\n\n${usage(command, about, spec)}`);
    process.exit(2);
  }
}
