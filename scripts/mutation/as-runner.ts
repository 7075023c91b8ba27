// Runs AssemblyScript mutants one at a time on a temporary COPY of the tree (the worktree is never
// modified): lib/** mutants against the as-pect specs that import the module (directly or through
// other modules), plugin/** mutants by rebuilding the filter and running the integration tests
// mapped to the glue file. Each mutant ends killed, survived, timeout (counted as killed) or
// compile-error (not counted).
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { applyMutant, type Mutant } from './as-mutants';

export type Outcome = 'killed' | 'survived' | 'timeout' | 'compile-error';
export interface MutantResult extends Mutant { outcome: Outcome; by?: string; ms: number }

/** Integration tests that exercise each plugin glue file (kept small: one mutant runs them all
 *  until one fails). */
const GLUE = 'test/integration/glue.test.ts';
export const PLUGIN_TESTS: Record<string, string[]> = {
  'loadaware.ts': [GLUE, 'test/integration/loadaware.test.ts'],
  'inband.ts': [GLUE, 'test/integration/loadaware.test.ts'],
  'body.ts': [GLUE, 'test/integration/request-aware.test.ts'],
  'request-plan.ts': [GLUE, 'test/integration/request-aware.test.ts'],
  'stream.ts': [GLUE, 'test/integration/loadaware.test.ts', 'test/integration/link.test.ts', 'test/integration/request-aware.test.ts'],
  'view.ts': [GLUE, 'test/integration/loadaware.test.ts', 'test/integration/link.test.ts', 'test/integration/rules.test.ts'],
  'root.ts': [GLUE, 'test/integration/snapshot-feed.test.ts', 'test/integration/loadaware.test.ts', 'test/integration/link.test.ts'],
  'metrics.ts': [GLUE, 'test/integration/snapshot-feed.test.ts', 'test/integration/loadaware.test.ts', 'test/integration/link.test.ts'],
};

const SKIP_COPY = new Set(['.git', 'node_modules', 'reports', '.stryker-tmp', '.rig']);

export function prepareCopy(root: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'switchyard-mutation-'));
  for (const ent of fs.readdirSync(root)) {
    if (SKIP_COPY.has(ent)) continue;
    fs.cpSync(path.join(root, ent), path.join(dir, ent), { recursive: true, dereference: false });
  }
  fs.symlinkSync(fs.realpathSync(path.join(root, 'node_modules')), path.join(dir, 'node_modules'));
  fs.writeFileSync(path.join(dir, '.mutation-asconfig.json'), JSON.stringify({
    extends: './asconfig.json',
    // -O0: the same program, built in ~5 s instead of ~25 s
    targets: { mutant: { outFile: 'build/switchyard.wasm', textFile: 'build/switchyard.wat', optimizeLevel: 0, shrinkLevel: 0, noAssert: false, debug: false } },
  }));
  return dir;
}

function importsOf(file: string): string[] {
  const src = fs.readFileSync(file, 'utf8');
  const out: string[] = [];
  for (const m of src.matchAll(/from\s+["'](\.{1,2}\/[^"']+)["']/g)) {
    const p = path.resolve(path.dirname(file), m[1]);
    for (const cand of [p + '.ts', path.join(p, 'index.ts'), p]) {
      if (fs.existsSync(cand) && fs.statSync(cand).isFile()) { out.push(cand); break; }
    }
  }
  return out;
}

/** as-pect specs whose import closure contains `module`: the module's own spec first, then
 *  direct importers, then the rest. */
export function specsFor(root: string, module: string): string[] {
  const dir = path.join(root, 'filter/__tests__');
  const target = path.resolve(root, module);
  const hits: { spec: string; depth: number }[] = [];
  for (const f of fs.readdirSync(dir).filter((x) => x.endsWith('.spec.ts'))) {
    const spec = path.join(dir, f);
    const seen = new Map<string, number>([[spec, 0]]);
    const queue = [spec];
    while (queue.length) {
      const cur = queue.shift()!;
      for (const dep of importsOf(cur)) {
        if (!seen.has(dep)) { seen.set(dep, seen.get(cur)! + 1); queue.push(dep); }
      }
    }
    if (seen.has(target)) hits.push({ spec: path.relative(root, spec), depth: seen.get(target)! });
  }
  const own = (h: { spec: string }) => (path.basename(h.spec, '.spec.ts') === path.basename(module, '.ts') ? 0 : 1);
  return hits.sort((a, b) => own(a) - own(b) || a.depth - b.depth || a.spec.localeCompare(b.spec)).map((h) => h.spec);
}

interface Run { code: number | null; out: string; timedOut: boolean }

/** Process group of the test run in progress (each run is detached into its own group). */
let activeGroup: number | undefined;

/** Kills the test run in progress, if any (for an interrupted benchmark). */
export function killActive(): void {
  if (activeGroup !== undefined) try { process.kill(-activeGroup, 'SIGKILL'); } catch { /* already gone */ }
}

function run(cmd: string, args: string[], cwd: string, timeoutMs: number): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd, detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, FORCE_COLOR: '0', NO_COLOR: '1' } });
    activeGroup = child.pid;
    let out = '';
    child.stdout.on('data', (d) => { if (out.length < 200_000) out += d; });
    child.stderr.on('data', (d) => { if (out.length < 200_000) out += d; });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try { process.kill(-child.pid!, 'SIGKILL'); } catch { /* already gone */ }
    }, timeoutMs);
    child.on('close', (code) => { clearTimeout(timer); activeGroup = undefined; resolve({ code, out, timedOut }); });
  });
}

const COMPILE_ERROR = /ERROR (TS|AS)\d+|FAILURE \d+ (parse|compile) error|error\(s\)/;

/** Runs as-pect on the given specs in one process (120 s, plus 30 s per further spec). */
async function runSpec(dir: string, specs: string[]): Promise<Run> {
  fs.writeFileSync(path.join(dir, '.mutation-asp.mjs'),
    `import base from "./as-pect.config.mjs";\nexport default { ...base, entries: ${JSON.stringify(specs)} };\n`);
  return run(path.join(dir, 'node_modules/.bin/asp'), ['--config', '.mutation-asp.mjs', '--no-logo', '--summary'], dir, 120_000 + 30_000 * (specs.length - 1));
}

async function buildFilter(dir: string): Promise<Run> {
  return run(path.join(dir, 'node_modules/.bin/asc'), ['filter/assembly/index.ts', '--config', '.mutation-asconfig.json', '--target', 'mutant'], dir, 180_000);
}

async function runNodeTest(dir: string, file: string): Promise<Run> {
  return run(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=1', file], dir, 180_000);
}

/** The unmutated tree must pass every test a mutant will be judged by, or results mean nothing. */
export async function baseline(dir: string, specs: Set<string>, nodeTests: Set<string>): Promise<string[]> {
  const failures: string[] = [];
  // all specs in one process; only when that fails, one by one to name the failing ones
  if (specs.size && (await runSpec(dir, [...specs])).code !== 0) {
    for (const s of specs) { const r = await runSpec(dir, [s]); if (r.code !== 0) failures.push(`${s}: ${r.out.slice(-2000)}`); }
  }
  if (nodeTests.size) {
    const b = await buildFilter(dir);
    if (b.code !== 0) failures.push(`build: ${b.out.slice(-2000)}`);
    for (const t of nodeTests) { const r = await runNodeTest(dir, t); if (r.code !== 0) failures.push(`${t}: ${r.out.slice(-2000)}`); }
  }
  return failures;
}

export function testsFor(root: string, m: Mutant): { specs: string[]; nodeTests: string[] } {
  if (m.file.includes('/plugin/')) return { specs: [], nodeTests: PLUGIN_TESTS[path.basename(m.file)] ?? [] };
  return { specs: specsFor(root, m.file), nodeTests: [] };
}

export async function runMutant(dir: string, m: Mutant, tests: { specs: string[]; nodeTests: string[] }): Promise<MutantResult> {
  const t0 = Date.now();
  const file = path.join(dir, m.file);
  const original = fs.readFileSync(file, 'utf8');
  fs.writeFileSync(file, applyMutant(original, m));
  const done = (outcome: Outcome, by?: string): MutantResult => ({ ...m, outcome, by, ms: Date.now() - t0 });
  try {
    // the module's own spec (or its nearest importer) first, which kills most mutants; then the
    // others in one as-pect process (one process start instead of one per spec)
    const batches = tests.specs.length > 1 ? [tests.specs.slice(0, 1), tests.specs.slice(1)] : tests.specs.length ? [tests.specs] : [];
    for (const batch of batches) {
      const r = await runSpec(dir, batch);
      const by = batch.length === 1 ? batch[0] : `${batch.length} specs`;
      if (r.timedOut) return done('timeout', by);
      if (r.code !== 0) return done(COMPILE_ERROR.test(r.out) && !/\[Result\]/.test(r.out) ? 'compile-error' : 'killed', by);
    }
    if (tests.nodeTests.length) {
      const b = await buildFilter(dir);
      if (b.timedOut || b.code !== 0) return done('compile-error', 'asc');
      for (const t of tests.nodeTests) {
        const r = await runNodeTest(dir, t);
        if (r.timedOut) return done('timeout', t);
        if (r.code !== 0) return done('killed', t);
      }
    }
    return done('survived');
  } finally {
    fs.writeFileSync(file, original);
  }
}
