// Cost of the data-plane request modules (filter/assembly/lib/request/*) per request: the body
// copy into wasm memory + OpenAI body extraction + prompt block hashing + prefix-index lookup
// and record, at 4 KiB and 64 KiB chat bodies; beside it, extraction alone and the lib/json.ts
// tree parser on the same body. Compiled with the filter's optimisation settings and called
// directly (no Envoy ABI), so this is the modules' own cost, not the filter's per-request total.
//
//   tsx bench/request-parse.ts [--quick]      (quick: fewer iterations, a smoke run)
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { cli, flag, nums, optNum } from './cli';

const ROOT = path.resolve(__dirname, '..');
const opts = cli('npx tsx bench/request-parse.ts', 'Cost of the data-plane request modules per request, called directly.', {
  quick: flag('fewer iterations, a smoke run'),
  iter: optNum('iterations per round (default 5000, quick 300)', 1),
  sizes: nums('4096,65536', 'chat body sizes, bytes'),
});
const quick = opts.quick;
const ITER = opts.iter ?? (quick ? 300 : 5000);
const ROUNDS = quick ? 5 : 15;

interface Exports {
  memory: WebAssembly.Memory;
  bodyBuffer(len: number): number;
  run(api: number, nowMs: bigint, slot: number): number;
  parseOnly(api: number): number;
  parseWithJsonTs(): number;
  parseHash(api: number): number;
  indexOnly(n: number, nowMs: bigint, slot: number): number;
  indexCount(): number;
}

function compile(): string {
  // run asc outside the repository root, whose asconfig.json would add the filter's entry
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swy-reqparse-'));
  const out = path.join(dir, 'request-parse.wasm');
  try {
    execFileSync(process.execPath, [path.join(ROOT, 'node_modules/assemblyscript/bin/asc.js'), path.join(ROOT, 'bench/filters/request-parse.ts'), '--outFile', out, '-O3', '--shrinkLevel', '1', '--runtime', 'incremental'], { cwd: dir, stdio: 'inherit' });
  } catch (e) {
    fs.rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  return out;
}

/** A chat body of about `bytes` bytes: a long shared system prompt (3/4) and a user turn. */
function chatBody(bytes: number, variant: number): Buffer {
  const word = ['route', 'token', 'cache', 'prefix', 'model', 'queue', 'block', 'reply'];
  const text = (n: number, salt: number): string => {
    let s = '';
    let i = salt;
    while (s.length < n) s += word[(i = (i * 1103515245 + 12345) >>> 0) % 8] + ' ';
    return s.slice(0, n);
  };
  const shell = JSON.stringify({ model: 'llama-3-8b', messages: [{ role: 'system', content: '' }, { role: 'user', content: '' }], max_tokens: 256, stream: true, temperature: 0.7 });
  const room = bytes - shell.length;
  const sys = text(Math.floor(room * 0.75), 1);
  const user = text(room - sys.length, 1000 + variant);
  return Buffer.from(JSON.stringify({ model: 'llama-3-8b', messages: [{ role: 'system', content: sys }, { role: 'user', content: user }], max_tokens: 256, stream: true, temperature: 0.7 }));
}

function median(xs: number[]): number {
  const s = xs.slice().sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

async function main(): Promise<void> {
  const wasm = compile();
  const bytes = fs.readFileSync(wasm);
  fs.rmSync(path.dirname(wasm), { recursive: true, force: true });
  const { instance } = await WebAssembly.instantiate(bytes, {
    env: { abort: () => { throw new Error('abort'); }, seed: () => 1 },
  });
  const x = instance.exports as unknown as Exports;
  const rows: string[] = [];
  const sizes = opts.sizes;
  for (const size of sizes) {
    const bodies = Array.from({ length: 16 }, (_, v) => chatBody(size, v));
    const copyIn = (b: Buffer): void => {
      const p = x.bodyBuffer(b.length);
      new Uint8Array(x.memory.buffer, p, b.length).set(b);
    };
    // sanity: parses, hashes, and the shared system prompt is found again
    copyIn(bodies[0]);
    const blocks = x.run(2, 1n, 0);
    if (!(blocks > 0)) throw new Error(`run failed: ${blocks}`);
    // best round's mean per call, in process CPU time: on a shared machine wall time also
    // counts the time this process waits for a core (the bench prints the load average)
    const measure = (fn: (i: number) => void): number => {
      const per: number[] = [];
      for (let r = 0; r < ROUNDS; r++) {
        const c0 = process.cpuUsage();
        for (let i = 0; i < ITER; i++) fn(i);
        const c = process.cpuUsage(c0);
        per.push((c.user + c.system) / ITER);
      }
      return Math.min(...per);
    };
    const copyOnly = measure((i) => copyIn(bodies[i & 15]));
    const full = measure((i) => {
      copyIn(bodies[i & 15]);
      if (x.run(2, BigInt(i + 2), i & 7) < 0) throw new Error('run failed');
    });
    const parse = measure((i) => {
      copyIn(bodies[i & 15]);
      if (x.parseOnly(2) < 0) throw new Error('parse failed');
    });
    const parseHash = measure((i) => {
      copyIn(bodies[i & 15]);
      if (x.parseHash(2) < 0) throw new Error('parse failed');
    });
    x.parseHash(2);
    const indexOnly = measure((i) => x.indexOnly(blocks, BigInt(i + 2), i & 7));
    const jsonTs = measure((i) => {
      copyIn(bodies[i & 15]);
      if (x.parseWithJsonTs() < 0) throw new Error('json.ts parse failed');
    });
    const mbps = (us: number): string => ((size / us) * 1e6 / 1e6).toFixed(0);
    rows.push(
      `${(size / 1024).toFixed(0).padStart(3)} KiB  blocks ${String(blocks).padStart(3)}  copy ${copyOnly.toFixed(2).padStart(7)} µs  ` +
        `copy+parse ${parse.toFixed(2).padStart(7)} µs  +hash ${parseHash.toFixed(2).padStart(7)} µs  index alone ${indexOnly.toFixed(2).padStart(6)} µs  copy+parse+hash+lookup+record ${full.toFixed(2).padStart(7)} µs (${mbps(full)} MB/s)  ` +
        `copy+json.ts tree ${jsonTs.toFixed(2).padStart(8)} µs`,
    );
  }
  const load = os.loadavg()[0].toFixed(1);
  process.stdout.write(`request-parse (${quick ? 'quick' : 'full'}: ${ROUNDS} rounds x ${ITER} calls, best round's mean CPU µs per call; load average ${load} on ${os.cpus().length} cores; targets ≤ 10 µs at 4 KiB, ≤ 130 µs at 64 KiB)\n${rows.join('\n')}\n`);
}

main().catch((e) => {
  process.stderr.write(`request-parse: ${(e as Error).stack}\n`);
  process.exit(1);
});
