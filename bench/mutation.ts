// Mutation testing benchmark (NOT part of `npm test` or CI): how many single-point defects in the
// decision code do the tests catch? Prints the score per module and every surviving mutant.
//
//   npx tsx bench/mutation.ts                       # both sides, small seeded sample (~20 min)
//   npx tsx bench/mutation.ts --side as --per-module 6 --seed 7 --budget-min 10
//   npx tsx bench/mutation.ts --side ts --ts-lines 4 --only link
//   npx tsx bench/mutation.ts --report [--markdown]  # print the last results again (docs/mutation.md)
//   npx tsx bench/mutation.ts --side as --per-module 4 --seed 3 --add   # add a sample to the last results
//   npx tsx bench/mutation.ts --side as --survivors  # run the last results' survivors again (new tests)
//
// AssemblyScript (filter/assembly/lib/**, filter/assembly/plugin/**): mutants generated from source
// patterns (scripts/mutation/as-mutants.ts), run one at a time on a temp copy of the tree
// (scripts/mutation/as-runner.ts). TypeScript (agent/src/link, inference, snapshot): Stryker with
// the command runner, one run per unit of scripts/mutation/groups.mjs over a seeded sample of lines.
// Results: reports/mutation/as.json and reports/mutation/ts-<unit>.json.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { generateMutants, sampleByOperator, shuffle, codeMask } from '../scripts/mutation/as-mutants';
import { baseline, killActive, prepareCopy, runMutant, testsFor, type MutantResult } from '../scripts/mutation/as-runner';
import { equivalentIndex, keyOf, loadEquivalents, staleEquivalents } from '../scripts/mutation/as-equivalents';
import { cli, flag, int, list, num, oneOf } from './cli';

type Units = Record<string, { group: string; mutate: string[]; tests: string[] }>;

const ROOT = path.resolve(__dirname, '..');
const REPORTS = path.join(ROOT, 'reports/mutation');

const opts = cli('npx tsx bench/mutation.ts', 'Mutation testing of the decision code (not part of npm test or CI).', {
  side: oneOf(['all', 'as', 'ts'], 'all', 'AssemblyScript, TypeScript or both'),
  seed: int(1, 'sample seed', 0),
  'per-module': int(6, 'AssemblyScript mutants per module', 1),
  'ts-lines': int(4, 'TypeScript lines sampled per unit', 1),
  'budget-min': num(10, 'time budget, minutes', 0.001),
  only: list('', 'modules (or TS units) whose path (or name) contains any of these substrings'),
  full: flag('every mutant'),
  add: flag('add a sample to the last results'),
  survivors: flag("run the last results' survivors again"),
  report: flag('print the last results again'),
  markdown: flag('with --report: as markdown (docs/mutation.md)'),
});
const has = (name: 'full' | 'add' | 'survivors' | 'report' | 'markdown'): boolean => opts[name];

const side = opts.side;
const seed = opts.seed;
const perModule = has('full') ? Infinity : opts['per-module'];
const tsLines = has('full') ? Infinity : opts['ts-lines'];
const budgetMs = opts['budget-min'] * 60_000;
/** --only a,b: modules (or TS units) whose path (or name) contains any of the substrings (none: all) */
const only = opts.only;
const selected = (name: string): boolean => only.length === 0 || only.some((o) => name.includes(o));
if (!['all', 'as', 'ts'].includes(side)) throw new Error(`--side: expected all, as or ts (got '${side}')`);

function listTs(dir: string): string[] {
  return fs.readdirSync(path.join(ROOT, dir), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => path.relative(ROOT, path.join(e.parentPath, e.name)))
    .sort();
}

// ---------------------------------------------------------------- AssemblyScript
interface AsFile { runs?: { seed: number; perModule: number; only: string; at: string }[]; results: MutantResult[] }
const AS_FILE = path.join(REPORTS, 'as.json');
const readAs = (): AsFile => (fs.existsSync(AS_FILE) ? JSON.parse(fs.readFileSync(AS_FILE, 'utf8')) as AsFile : { results: [] });

/** The mutants of this run: a seeded sample per module, or (--survivors) the last results'
 *  survivors that are not listed equivalents and whose line is unchanged. */
function chooseAs(modules: string[]): ReturnType<typeof generateMutants> {
  if (!has('survivors')) {
    // --add samples among the mutants not measured yet, so another seed adds new ones
    const done = has('add') ? new Set(readAs().results.map((r) => r.id)) : new Set<string>();
    return modules.flatMap((f) => sampleByOperator(generateMutants(f, fs.readFileSync(path.join(ROOT, f), 'utf8')).filter((m) => !done.has(m.id)), perModule, seed));
  }
  const eq = equivalentIndex(loadEquivalents(ROOT));
  const want = readAs().results.filter((r) => r.outcome === 'survived' && modules.includes(r.file) && !eq.has(keyOf(r)));
  const live = new Map(modules.map((f) => [f, new Map(generateMutants(f, fs.readFileSync(path.join(ROOT, f), 'utf8')).map((m) => [m.id, m]))]));
  return want.flatMap((r) => {
    const m = live.get(r.file)?.get(r.id);
    if (!m || m.before !== r.before) { console.log(`AS: ${r.id} no longer generated (the line changed); dropped`); return []; }
    return [m];
  });
}

async function runAs(): Promise<void> {
  const modules = [...listTs('filter/assembly/lib'), ...listTs('filter/assembly/plugin')].filter(selected);
  const chosen = chooseAs(modules);
  // Results of modules not in this run (e.g. `--only plugin/` after a lib run) are kept; with
  // --add or --survivors those of the run's modules too, a mutant run again replacing its old result.
  // Saved after every mutant, so an interrupted run keeps what it measured.
  const last = readAs();
  const ran = new Set(modules);
  const merge = has('add') || has('survivors');
  const run = { seed, perModule: has('survivors') ? 0 : perModule, only: `${has('survivors') ? 'survivors ' : ''}${only.join(',')}`, at: new Date().toISOString() };
  const results: MutantResult[] = [];
  const save = (): void => {
    const now = new Set(results.map((r) => r.id));
    const kept = last.results.filter((r) => (merge ? !now.has(r.id) : !ran.has(r.file)));
    fs.mkdirSync(REPORTS, { recursive: true });
    fs.writeFileSync(AS_FILE, JSON.stringify({ runs: [...(last.runs ?? []), run], results: [...kept, ...results] }, null, 1));
  };
  const dir = prepareCopy(ROOT);
  const interrupted = (): void => { killActive(); fs.rmSync(dir, { recursive: true, force: true }); process.exit(130); };
  process.once('SIGINT', interrupted).once('SIGTERM', interrupted);
  const started = Date.now();
  try {
    const plans = chosen.map((m) => ({ m, tests: testsFor(dir, m) }));
    const specs = new Set(plans.flatMap((p) => p.tests.specs));
    const nodeTests = new Set(plans.flatMap((p) => p.tests.nodeTests));
    console.log(`AS: ${chosen.length} mutants over ${modules.length} modules (seed ${seed}); baseline of ${specs.size} specs, ${nodeTests.size} node tests in ${dir}`);
    const bad = await baseline(dir, specs, nodeTests);
    if (bad.length) throw new Error(`baseline fails without any mutant:\n${bad.join('\n')}`);
    for (const p of plans) {
      if (Date.now() - started > budgetMs) { console.log(`AS: budget reached, ${plans.length - results.length} mutants not run`); break; }
      if (!p.tests.specs.length && !p.tests.nodeTests.length) { console.log(`AS: no test mapped to ${p.m.file}`); continue; }
      const r = await runMutant(dir, p.m, p.tests);
      results.push(r);
      save();
      console.log(`  ${r.outcome.padEnd(13)} ${r.file}:${r.line} ${r.operator} (${(r.ms / 1000).toFixed(1)} s${r.by ? `, ${r.by}` : ''})`);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  save();
}

// ---------------------------------------------------------------- TypeScript (Stryker)
/** Lines that can carry a mutant: code, not comments, imports or blank lines. */
function codeLines(file: string): number[] {
  const lines = fs.readFileSync(path.join(ROOT, file), 'utf8').split('\n');
  const mask = codeMask(lines);
  const out: number[] = [];
  mask.forEach((c, i) => {
    const t = c.trim();
    if (t && !/^(import|export \{|export type|type |interface |\}|\{|\)|\]|readonly |\w+\??: [\w'|<>[\] ]+;$)/.test(t)) out.push(i + 1);
  });
  return out;
}

async function runTs(): Promise<void> {
  // shared with stryker.conf.mjs, hence plain ESM; loaded by URL so TypeScript need not type it
  const groups = pathToFileURL(path.join(ROOT, 'scripts/mutation/groups.mjs')).href;
  const { MUTATION_UNITS } = (await import(groups)) as { MUTATION_UNITS: Units };
  const started = Date.now();
  for (const [unit, def] of Object.entries(MUTATION_UNITS)) {
    if (!selected(`${unit} ${def.mutate.join(' ')}`)) continue;
    if (Date.now() - started > budgetMs) { console.log(`TS: budget reached, unit ${unit} not run`); continue; }
    const ranges = def.mutate.flatMap((f) => {
      const lines = codeLines(f);
      return shuffle(lines, seed).slice(0, Math.min(lines.length, tsLines)).sort((a, b) => a - b).map((l) => `${f}:${l}-${l}`);
    });
    fs.rmSync(path.join(REPORTS, `ts-${unit}.json`), { force: true });
    console.log(`TS: ${unit}: ${ranges.length} sampled lines (seed ${seed}), tests ${def.tests.join(' ')}`);
    const r = spawnSync('npx', ['stryker', 'run', 'stryker.conf.mjs', '--mutate', ranges.join(',')], {
      cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit'], env: { ...process.env, STRYKER_UNIT: unit },
    });
    if (r.status !== 0) console.log(`TS: stryker exited ${r.status} for ${unit}`);
  }
}

// ---------------------------------------------------------------- report
interface Survivor { text: string; equivalent?: string }
interface Row { module: string; killed: number; survived: number; timeout: number; compileError: number; equivalent: number; survivors: Survivor[]; disabled?: string[] }
const emptyRow = (module: string): Row => ({ module, killed: 0, survived: 0, timeout: 0, compileError: 0, equivalent: 0, survivors: [] });

/** Problems with the equivalents list found while reading the results (stale entries, listed
 *  mutants the tests kill after all). */
const listProblems: string[] = [];

function rowsFromAs(): Row[] {
  const { results } = readAs();
  const list = loadEquivalents(ROOT);
  const eq = equivalentIndex(list);
  for (const e of staleEquivalents(ROOT, list)) listProblems.push(`stale equivalent (mutant no longer generated): ${e.file} ${e.operator}: ${e.before}  =>  ${e.after || '(deleted)'}`);
  const rows = new Map<string, Row>();
  for (const r of results) {
    const row = rows.get(r.file) ?? emptyRow(r.file);
    const reason = eq.get(keyOf(r));
    const text = `${r.file}:${r.line} ${r.operator}: ${r.before.trim()}  =>  ${r.after.trim() || '(deleted)'}`;
    if (reason && (r.outcome === 'killed' || r.outcome === 'timeout')) listProblems.push(`listed as equivalent but ${r.outcome} (${r.by ?? ''}): ${text}`);
    if (r.outcome === 'killed') row.killed++;
    else if (r.outcome === 'timeout') row.timeout++;
    else if (r.outcome === 'compile-error') row.compileError++;
    else { row.survived++; if (reason) row.equivalent++; row.survivors.push({ text, equivalent: reason }); }
    rows.set(r.file, row);
  }
  return [...rows.values()];
}

interface StrykerReport { files: Record<string, { source: string; mutants: { mutatorName: string; replacement?: string; status: string; statusReason?: string; location: { start: { line: number; column: number }; end: { line: number; column: number } } }[] }> }

function rowsFromStryker(): Row[] {
  if (!fs.existsSync(REPORTS)) return [];
  const rows: Row[] = [];
  for (const name of fs.readdirSync(REPORTS).filter((n) => /^ts-.*\.json$/.test(n)).sort()) {
    const rep = JSON.parse(fs.readFileSync(path.join(REPORTS, name), 'utf8')) as StrykerReport;
    for (const [file, v] of Object.entries(rep.files)) {
      const row: Row = { ...emptyRow(file), disabled: [] };
      const lines = v.source.split('\n');
      for (const m of v.mutants) {
        // Ignored: an excluded mutator (StringLiteral, not counted) or a `// Stryker disable` comment
        // (an equivalent mutant, not counted in the score but listed with its reason)
        if (m.status === 'Ignored' && !/^Ignored because of excluded mutation/.test(m.statusReason ?? '')) {
          row.disabled?.push(`${file}:${m.location.start.line} ${m.mutatorName} — ${m.statusReason ?? ''}`);
        }
        if (m.status === 'Killed') row.killed++;
        else if (m.status === 'Timeout') row.timeout++;
        else if (m.status === 'CompileError' || m.status === 'RuntimeError') row.compileError++;
        else if (m.status === 'Survived' || m.status === 'NoCoverage') {
          row.survived++;
          const { start, end } = m.location;
          const orig = start.line === end.line ? lines[start.line - 1].slice(start.column - 1, end.column - 1) : lines[start.line - 1].slice(start.column - 1) + ' …';
          row.survivors.push({ text: `${file}:${start.line} ${m.mutatorName}: ${orig.trim()}  =>  ${(m.replacement ?? '').replace(/\s+/g, ' ')}` });
        }
      }
      if (row.killed + row.survived + row.timeout + row.compileError + (row.disabled?.length ?? 0) > 0) rows.push(row);
    }
  }
  return rows;
}

/** filter/assembly/lib, filter/assembly/plugin, agent/src/<dir> */
const areaOf = (module: string): string => module.split('/').slice(0, 3).join('/');

function sum(name: string, rows: Row[]): Row {
  const t = emptyRow(name);
  for (const r of rows) {
    t.killed += r.killed; t.timeout += r.timeout; t.survived += r.survived; t.compileError += r.compileError; t.equivalent += r.equivalent;
    t.survivors.push(...r.survivors);
  }
  return t;
}

/** killed + timeout over killed + timeout + survived; `excl`: listed equivalents left out */
function score(r: Row, excl: boolean): string {
  const n = r.killed + r.timeout + r.survived - (excl ? r.equivalent : 0);
  return n ? `${((100 * (r.killed + r.timeout)) / n).toFixed(0)} %` : '-';
}
const ofTotal = (r: Row, excl: boolean) => `${r.killed + r.timeout} of ${r.killed + r.timeout + r.survived - (excl ? r.equivalent : 0)}`;

/** TS: totals per area (agent/src/<area>), the mutants disabled as equivalent, and the disable comments in the source. */
function reportTsExtras(rows: Row[], markdown: boolean): void {
  const ts = rows.filter((r) => r.module.startsWith('agent/src/'));
  if (!ts.length) return;
  const areas = new Map<string, { k: number; n: number; disabled: number }>();
  for (const r of ts) {
    const area = r.module.split('/').slice(0, 3).join('/');
    const a = areas.get(area) ?? { k: 0, n: 0, disabled: 0 };
    a.k += r.killed + r.timeout;
    a.n += r.killed + r.timeout + r.survived;
    a.disabled += r.disabled?.length ?? 0;
    areas.set(area, a);
  }
  console.log(markdown ? '\n| TS area | score | killed of | disabled (equivalent) |\n|---|---:|---:|---:|' : '\nTS area                          score  killed of  disabled (equivalent)');
  for (const [area, a] of [...areas].sort()) {
    const pct = a.n ? `${((100 * a.k) / a.n).toFixed(0)} %` : '-';
    console.log(markdown ? `| ${area} | ${pct} | ${a.k} of ${a.n} | ${a.disabled} |` : `${area.padEnd(32)} ${pct.padStart(5)}  ${`${a.k} of ${a.n}`.padStart(9)}  ${a.disabled}`);
  }
  const disabled = ts.flatMap((r) => r.disabled ?? []);
  console.log(`\nTS mutants in this sample disabled by \`// Stryker disable\` comments (equivalent, not in the score): ${disabled.length}`);
  for (const d of disabled) console.log(markdown ? `- \`${d.replace(/`/g, "'")}\`` : `  ${d}`);
  const comments = ['agent/src/link', 'agent/src/inference', 'agent/src/snapshot'].flatMap((d) => listTs(d)).flatMap((f) =>
    fs.readFileSync(path.join(ROOT, f), 'utf8').split('\n').flatMap((l, i) => (/\/\/ Stryker disable/.test(l) ? [`${f}:${i + 2}`] : [])),
  );
  console.log(`Stryker disable comments in agent/src/{link,inference,snapshot}: ${comments.length} (${comments.join(', ')})`);
}

function report(): void {
  const rows = [...rowsFromAs(), ...rowsFromStryker()];
  const areas = [...new Set(rows.map((r) => areaOf(r.module)))].sort().map((a) => sum(a, rows.filter((r) => areaOf(r.module) === a)));
  const total = sum('total', rows);
  const survivorLine = (x: Survivor) => (x.equivalent ? `${x.text}  [equivalent: ${x.equivalent}]` : x.text);
  if (has('markdown')) {
    console.log('| area | score | killed | excluding listed equivalents |\n|---|---:|---:|---:|');
    for (const r of [...areas, total]) console.log(`| ${r.module} | ${score(r, false)} | ${ofTotal(r, false)} | ${score(r, true)} (${ofTotal(r, true)}) |`);
    console.log('\n| module | score | excl. equivalents | killed | timeout | survived | of which equivalent | compile error |\n|---|---:|---:|---:|---:|---:|---:|---:|');
    for (const r of rows) console.log(`| ${r.module} | ${score(r, false)} | ${score(r, true)} | ${r.killed} | ${r.timeout} | ${r.survived} | ${r.equivalent} | ${r.compileError} |`);
    console.log('');
    for (const x of total.survivors) console.log(`- \`${x.text.replace(/`/g, "'")}\`${x.equivalent ? ` — equivalent (listed): ${x.equivalent}` : ''}`);
  } else {
    console.log('\nmodule                                         score  excl.eq  killed  timeout  survived  equivalent  compile-error');
    const line = (r: Row) => `${r.module.padEnd(46)} ${score(r, false).padStart(5)}  ${score(r, true).padStart(7)}  ${String(r.killed).padStart(6)}  ${String(r.timeout).padStart(7)}  ${String(r.survived).padStart(8)}  ${String(r.equivalent).padStart(10)}  ${String(r.compileError).padStart(13)}`;
    for (const r of rows) console.log(line(r));
    console.log('');
    for (const r of [...areas, total]) console.log(`${line(r)}   (${ofTotal(r, false)} raw, ${ofTotal(r, true)} excluding listed equivalents)`);
    console.log(`\nsurvivors (${total.survived}, of which ${total.equivalent} listed equivalent):`);
    for (const x of total.survivors) console.log(`  ${survivorLine(x)}`);
  }
  if (listProblems.length) {
    console.log(`\n${EQUIV_NOTE}:`);
    for (const p of listProblems) console.log(`  ${p}`);
  }
  reportTsExtras(rows, has('markdown'));
}
const EQUIV_NOTE = 'scripts/mutation/equivalent-as.json needs attention';

async function main(): Promise<void> {
  if (!has('report')) {
    if (side === 'all' || side === 'as') await runAs();
    if (side === 'all' || side === 'ts') await runTs();
  }
  report();
}

main().catch((e) => { console.error(e instanceof Error ? e.message : e); process.exit(1); });
