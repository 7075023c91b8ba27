// Shared helpers for the host tests: compile the WAT fixtures with wabt.
import { readFileSync } from 'node:fs';
import path from 'node:path';

const FIXTURES = path.join(__dirname, '..', 'fixtures', 'host');
const cache = new Map<string, Buffer>();
// eslint-disable-next-line @typescript-eslint/no-require-imports
const wabtInit = require('wabt') as () => Promise<{
  parseWat(name: string, text: string, features?: Record<string, boolean>): {
    resolveNames(): void; validate(): void; toBinary(o: object): { buffer: Uint8Array }; destroy(): void;
  };
}>;
let wabtP: ReturnType<typeof wabtInit> | undefined;

export const fixturePath = (name: string) => path.join(FIXTURES, name);

/** Compiles test/fixtures/host/<name>.wat to wasm bytes. */
export async function wat(name: string): Promise<Buffer> {
  const hit = cache.get(name);
  if (hit) return hit;
  wabtP ??= wabtInit();
  const wabt = await wabtP;
  const file = fixturePath(`${name}.wat`);
  const m = wabt.parseWat(file, readFileSync(file, 'utf8'), { mutable_globals: true, sign_extension: true });
  m.resolveNames();
  m.validate();
  const bytes = Buffer.from(m.toBinary({}).buffer);
  m.destroy();
  cache.set(name, bytes);
  return bytes;
}

/** Parses serialized header pairs (independent of the host's implementation). */
export function decodePairs(b: Buffer): [string, string][] {
  const n = b.readUInt32LE(0);
  const sizes: number[] = [];
  for (let i = 0; i < n; i++) sizes.push(b.readUInt32LE(4 + 8 * i), b.readUInt32LE(8 + 8 * i));
  let p = 4 + 8 * n;
  const out: [string, string][] = [];
  for (let i = 0; i < n; i++) {
    const k = b.toString('latin1', p, p + sizes[2 * i]);
    p += sizes[2 * i];
    if (b[p++] !== 0) throw new Error('missing NUL after key');
    const v = b.toString('latin1', p, p + sizes[2 * i + 1]);
    p += sizes[2 * i + 1];
    if (b[p++] !== 0) throw new Error('missing NUL after value');
    out.push([k, v]);
  }
  if (p !== b.length) throw new Error(`trailing bytes: ${b.length - p}`);
  return out;
}
