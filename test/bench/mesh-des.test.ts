// The mesh routing DES harness (bench/mesh/proxies.ts): checks the harness, not the figures.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { type MeshDesConfig, ratioTable, runCell } from '../../bench/mesh/proxies';
import { SwitchyardPolicy } from '../../bench/routing/switchyard';
import { DEFAULT_AGENT } from '../../bench/routing/agent-model';
import { MultiProxy } from '../../bench/routing/choose-model';
import { DEFAULT_FLEET, makeSamplePath, runPolicy } from '../../bench/routing/des';

const WASM = path.resolve(__dirname, '../../build/switchyard.wasm');
const CFG: MeshDesConfig = { ks: [1, 4], fleets: ['A'], rhos: [0.85], scrapesMs: [1000], measured: 600, warmupMs: 5000, seed: 3, wasm: WASM, policies: ['today', 'mesh'] };

test('mesh DES: the rows of a cell, their ratios to the all-seeing LEAST_REQUEST, and the table', { timeout: 120_000 }, async () => {
  const rows = await runCell(CFG, 'A', 0.85);
  assert.deepEqual(rows.map((r) => `${r.policy}|${r.k}|${r.scrapeMs ?? ''}`), [
    'least-request (all-seeing)|1|', 'least-request x1|1|', 'switchyard x1|1|1000', 'switchyard+mesh x1|1|1000',
    'least-request x4|4|', 'switchyard x4|4|1000', 'switchyard+mesh x4|4|1000',
  ]);
  const denom = rows[0].summary.p99Ms;
  for (const r of rows) {
    assert.equal(r.summary.n, CFG.measured);
    assert.ok(Math.abs(r.ratio - r.summary.p99Ms / denom) < 1e-12);
  }
  // one proxy's LEAST_REQUEST on its own counts IS the all-seeing one (same draws, exact counts)
  assert.equal(rows[1].summary.p99Ms, denom);
  // every request went through one of the K filters, split uniformly
  const sy4 = rows[5];
  const mesh4 = rows[6];
  assert.equal(sy4.perProxy!.length, 4);
  const total = sy4.perProxy!.reduce((a, b) => a + b, 0);
  for (const n of sy4.perProxy!) assert.ok(n > total / 4 * 0.85 && n < total / 4 * 1.15, `per proxy ${sy4.perProxy!.join(', ')}`);
  assert.equal(rows[2].perProxy!.length, 1);
  assert.equal(mesh4.perProxy!.length, 4);
  const table = ratioTable(rows, CFG);
  assert.match(table, /\| fleet \| K \| today ρ 0\.85, 1 s \| mesh in-flight ρ 0\.85, 1 s \| per-proxy LR, ρ 0\.85 \|/);
  assert.ok(table.includes(`| A | 4 | ${sy4.ratio.toFixed(2)} | ${mesh4.ratio.toFixed(2)} | ${rows[4].ratio.toFixed(2)} |`), table);
});

test('mesh DES: the K proxies are K hosts sharing one compiled module and one agent', { timeout: 60_000 }, async () => {
  const sp = makeSamplePath(DEFAULT_FLEET, { rho: 0.5, seed: 5, warmupMs: 2000, measured: 200, tail: 50 });
  const mp = new MultiProxy('switchyard x3', (i, shared) => new SwitchyardPolicy({ wasmPath: WASM, agent: DEFAULT_AGENT, seed: 5 + i, sharedAgent: shared }), 3, { spec: DEFAULT_AGENT, seed: 5 }, 5);
  await runPolicy(DEFAULT_FLEET, sp, mp);
  const ms = mp.members as SwitchyardPolicy[];
  assert.equal(ms.length, 3);
  assert.notEqual(ms[0].host, ms[1].host);
  assert.equal(ms[0].host.module, ms[1].host.module);
  assert.equal(ms[1].host.module, ms[2].host.module);
  assert.equal(ms[0].agent, ms[2].agent);
  for (const m of ms) {
    assert.ok(m.stats.filterRouted > 0);
    assert.ok(m.stats.snapshotUpdates > 0, 'every proxy adopted the shared agent\'s snapshots');
    // mesh in-flight as shipped: every proxy's writer reported to the one agent on its interval
    assert.ok(m.stats.meshReports > 0, 'every proxy reported its in-flight counts to the agent');
  }
  assert.equal(ms[0].agent.inflight().proxyCount, 3, 'the agent holds one report per proxy');
});
