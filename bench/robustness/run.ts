// Robustness benchmark (issue 21 §2-3): the Linkerd "Beyond Round Robin" replica, then the
// matrix of cells with the gate, the compiled filter deciding, every reference policy on the
// same sample paths. README: bench/robustness/README.md.
//
//   npx tsx bench/robustness/run.ts            # default: Linkerd case (3 seeds) + the covering matrix (3 seeds)
//   npx tsx bench/robustness/run.ts --quick    # harness check: 1 seed Linkerd, 2 small cells, 2 seeds, short paths
//   npx tsx bench/robustness/run.ts --full     # the whole cross product (960 cells: hours)
//   [--only linkerd|matrix] [--cells SUBSTR[,SUBSTR]] [--seeds N] [--seed S] [--wasm build/switchyard.wasm]
//   [--jobs N (default 2: cells in N child processes)]
//   [--prev COMMIT (default 80bf6a5) | --prev-wasm PATH] [--out build/bench]
//
// Writes build/bench/robustness.json (every figure per seed) and build/bench/robustness.md (the tables).
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { wasmBytes } from '../routing/switchyard';
import { POLICY_LABEL, prevBuild, PREV_COMMIT, ROOT } from './common';
import { LINKERD_NOTE, linkerdTable, linkerdTargets, runLinkerd } from './linkerd';
import { type Cell, type CellResult, defaultCells, fullCells, matrixTable, QUICK_TIMING, quickCells, runCell, TIMING } from './matrix';
import { cli, flag, int, list, oneOf, optNum, optStr, str } from '../cli';

const OPTS = cli('npx tsx bench/robustness/run.ts', 'Robustness benchmark: the Linkerd replica and the matrix with its gate.', {
  quick: flag('harness check: 1 seed Linkerd, 2 small cells, 2 seeds, short paths'),
  full: flag('the whole cross product (960 cells: hours)'),
  only: oneOf(['all', 'linkerd', 'matrix'], 'all', 'which part'),
  cells: list('', 'only the matrix cells whose id contains one of these'),
  seed: int(20261201, 'first seed (the others + 1000 k)'),
  seeds: optNum('seeds (default 3, quick 2)', 1),
  wasm: str('build/switchyard.wasm', 'filter module'),
  jobs: int(2, 'cells in this many child processes', 1),
  prev: str(PREV_COMMIT, 'the previous build: a commit the benchmark builds'),
  'prev-wasm': optStr('the previous build: an already built module'),
  out: str('build/bench', 'output directory'),
  'cell-indices': optStr('internal: the cells a child process runs'),
  'worker-out': optStr('internal: where a child process writes its results'),
});

function seedsOf(quick: boolean): number[] {
  const n = OPTS.seeds ?? (quick ? 2 : 3);
  if (!Number.isInteger(n)) throw new Error(`--seeds must be a positive integer, got ${n}`);
  return Array.from({ length: n }, (_, k) => OPTS.seed + 1000 * k);
}

async function main(): Promise<void> {
  const { quick, full, only } = OPTS;
  const wasm = path.resolve(ROOT, OPTS.wasm);
  const out = path.resolve(ROOT, OPTS.out);
  const prevCommit = OPTS.prev;
  const filters = OPTS.cells;
  const mode = quick ? 'quick' : full ? 'full' : 'default';
  const t0 = performance.now();
  const log = (s = ''): void => console.log(s);
  // --prev-wasm PATH: an already built module stands for the previous build (the harness test)
  const prevWasm = OPTS['prev-wasm'] !== undefined ? path.resolve(ROOT, OPTS['prev-wasm']) : prevBuild(prevCommit, log);
  // a module given for the previous build is named by its hash, not by the default commit
  const prevName = OPTS['prev-wasm'] !== undefined ? wasmBytes(prevWasm).sha256.slice(0, 12) : prevCommit;
  POLICY_LABEL.prev = `switchyard ${prevName}`;
  const seeds = seedsOf(quick);
  const md: string[] = [];
  log(`Switchyard robustness benchmark (issue 21), ${mode} mode, seeds ${seeds.join(', ')}`);
  const head = `filter ${path.relative(ROOT, wasm)} sha256 ${wasmBytes(wasm).sha256.slice(0, 12)}; previous build ${prevName} (${path.relative(ROOT, prevWasm)}, sha256 ${wasmBytes(prevWasm).sha256.slice(0, 12)}); the filters run their shipped defaults`;
  log(head);
  md.push(`${mode} mode, seeds ${seeds.join(', ')}, ${new Date().toISOString()}`, '', head, '');
  const doc: Record<string, unknown> = { meta: { mode, seeds, wasm: wasmBytes(wasm).sha256, prev: { commit: prevCommit, sha256: wasmBytes(prevWasm).sha256 }, date: new Date().toISOString() } };

  if (only !== 'matrix') {
    const t = performance.now();
    const lSeeds = quick ? seeds.slice(0, 1) : seeds;
    const rows = await runLinkerd({ seeds: lSeeds, wasm, prevWasm });
    log('');
    log(`== Linkerd "Beyond Round Robin" replica  [${((performance.now() - t) / 1000).toFixed(0)} s]`);
    log(LINKERD_NOTE);
    const tbl = linkerdTable(rows);
    log(tbl);
    const tg = [...linkerdTargets(rows, 'sy'), ...linkerdTargets(rows, 'prev')];
    log('targets (issue 21, done when):');
    for (const l of tg) log(l);
    md.push('## Linkerd "Beyond Round Robin" replica', '', LINKERD_NOTE, '', tbl, '', '```', ...tg, '```', '');
    doc.linkerd = rows;
  }

  if (only !== 'linkerd') {
    let cells = quick ? quickCells() : full ? fullCells() : defaultCells();
    if (filters.length) cells = cells.filter((c) => filters.some((f) => c.id.includes(f)));
    const timing = quick ? QUICK_TIMING : TIMING;
    const t = performance.now();
    const jobs = Math.max(1, Math.min(OPTS.jobs, cells.length));
    const res = jobs > 1 ? await inChildren(cells, jobs, prevWasm) : await runCells(cells, cells.map((_, i) => i), { seeds, timing, wasm, prevWasm });
    const pass = res.filter((r) => r.gate.pass).length;
    log('');
    log(`== Robustness matrix: ${cells.length} cells x ${seeds.length} seeds  [${((performance.now() - t) / 1000).toFixed(0)} s]`);
    const note = 'P99 of the time to success (ms; mean over seeds; an error counts as never, ∞: > 1 % errors), (errors per seed) where any policy had errors; shipped ±spread: the largest deviation of one seed from the mean; vs best: shipped / the better of LEAST_REQUEST and peak EWMA. Gate: shipped P99 and errors <= 1.05x that, and <= previous build + its spread.';
    log(note);
    const tbl = matrixTable(res);
    log(tbl);
    const summary = `gate: ${pass} PASS, ${res.length - pass} FAIL of ${res.length} cells`;
    log(summary);
    const failing = res.map((r, i) => ({ r, i })).filter(({ r }) => !r.gate.pass).map(({ r, i }) => `  #${i + 1} ${r.cell.id}: ${r.gate.reasons.join('; ')}`);
    for (const f of failing) log(f);
    md.push(`## Robustness matrix (${cells.length} cells, ${seeds.length} seeds)`, '', note, '', tbl, '', summary, '', ...failing.map((f) => `- ${f.trim()}`), '');
    doc.matrix = res;
  }
  const wall = `total wall time ${((performance.now() - t0) / 1000).toFixed(1)} s`;
  log(wall);
  mkdirSync(out, { recursive: true });
  writeFileSync(path.join(out, 'robustness.json'), JSON.stringify(doc, (_k, v) => (typeof v === 'number' && !Number.isFinite(v) ? String(v) : v), 2) + '\n');
  writeFileSync(path.join(out, 'robustness.md'), md.join('\n') + `\n${wall}\n`);
  log(`wrote ${path.relative(ROOT, path.join(out, 'robustness.json'))}, ${path.relative(ROOT, path.join(out, 'robustness.md'))}`);
}

interface CellOpts {
  seeds: number[];
  timing: typeof TIMING;
  wasm: string;
  prevWasm: string;
}

async function runCells(cells: Cell[], idx: number[], o: CellOpts): Promise<CellResult[]> {
  const res: CellResult[] = [];
  for (const i of idx) {
    const r = await runCell(cells[i], o);
    res.push(r);
    process.stderr.write(`  [${i + 1}/${cells.length}] ${cells[i].id} ${r.gate.pass ? 'PASS' : 'FAIL'} (${(r.wallMs / 1000).toFixed(1)} s)\n`);
  }
  return res;
}

/**
 * The cells split over `jobs` child processes (this script with --worker-out), the same flags;
 * results in the cells' order. Every cell's result is a function of its seeds alone, so the
 * split does not change a figure.
 */
async function inChildren(cells: Cell[], jobs: number, prevWasm: string): Promise<CellResult[]> {
  const dir = mkdtempSync(path.join(tmpdir(), 'robustness-jobs-'));
  try {
    const groups = Array.from({ length: jobs }, (_, j) => cells.map((_, i) => i).filter((i) => i % jobs === j));
    const passArgs = process.argv.slice(2).filter((_, i, a) => !['--jobs', '--out'].includes(a[i]) && !['--jobs', '--out'].includes(a[i - 1]));
    await Promise.all(groups.map((g, j) => new Promise<void>((resolve, reject) => {
      const child = spawn(process.execPath, ['--import', 'tsx', __filename, ...passArgs, '--only', 'matrix', '--prev-wasm', prevWasm, '--cell-indices', g.join(','), '--worker-out', path.join(dir, `${j}.json`)], { stdio: ['ignore', 'ignore', 'inherit'] });
      child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`worker ${j} exited with ${code}`))));
    })));
    const byIndex = new Map<number, CellResult>();
    groups.forEach((g, j) => {
      const rs = JSON.parse(readFileSync(path.join(dir, `${j}.json`), 'utf8'), (_k, v) => (v === 'NaN' ? NaN : v === 'Infinity' ? Infinity : v)) as CellResult[];
      g.forEach((i, k) => byIndex.set(i, rs[k]));
    });
    return cells.map((_, i) => byIndex.get(i)!);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const jsonNum = (_k: string, v: unknown): unknown => (typeof v === 'number' && !Number.isFinite(v) ? String(v) : v);

async function worker(): Promise<void> {
  const { quick, full } = OPTS;
  const seeds = seedsOf(quick);
  const filters = OPTS.cells;
  let cells = quick ? quickCells() : full ? fullCells() : defaultCells();
  if (filters.length) cells = cells.filter((c) => filters.some((f) => c.id.includes(f)));
  const idx = (OPTS['cell-indices'] ?? '').split(',').filter((x) => x).map(Number);
  const res = await runCells(cells, idx, {
    seeds, timing: quick ? QUICK_TIMING : TIMING, wasm: path.resolve(ROOT, OPTS.wasm), prevWasm: path.resolve(ROOT, OPTS['prev-wasm']!),
  });
  writeFileSync(OPTS['worker-out']!, JSON.stringify(res, jsonNum));
}

(OPTS['worker-out'] !== undefined ? worker() : main()).catch((e) => {
  console.error(e);
  process.exit(1);
});
