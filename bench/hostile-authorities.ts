// Wasm memory of one worker VM under a stream of distinct hostile `:authority` values
// (issue 11 #2): the authority cache is bounded in bytes and long authorities are never cached.
//
//   tsx bench/hostile-authorities.ts [--requests 1000000] [--bytes 300] [--large 2000]
//   tsx bench/hostile-authorities.ts --wildcard   (issue 24 #1: cost of a 60 / 120 KB Host, labels vs none)
//
// `--requests` distinct authorities of `--bytes` bytes (just under the cache's cut-off: the
// worst case for the cache), then `--large` distinct 60 KB authorities.
import * as path from 'node:path';
import { ProxyWasmHost } from '../host/src';
import { cli, flag, int } from './cli';

const ROOT = path.resolve(__dirname, '..');

export async function hostileAuthorities(requests: number, bytes: number, large: number): Promise<{ startMiB: number; afterSmallMiB: number; afterLargeMiB: number }> {
  const config = JSON.stringify({ agent: { cluster: 'switchyard_agent' },
    link: { services: [{ authorities: ['payment.example', '*.payments.example'], peer: 'cloud-b' }] }, loadAware: { services: [] } });
  const host = await ProxyWasmHost.create({ wasm: path.join(ROOT, 'build/switchyard.wasm'), pluginConfig: config, workers: 1,
    mainThread: false, canary: false, clock: 'manual', clusters: { switchyard_agent: { handler: () => ({ status: 503 }) } } });
  try {
    const vm = host.workers[0];
    const mib = () => vm.memoryBytes() / 1048576;
    const startMiB = mib();
    const pad = 'a'.repeat(Math.max(1, bytes - 30));
    for (let i = 0; i < requests; i++) host.requestSync({ ':method': 'GET', ':path': '/', ':authority': `${i}.${pad}.payments.example` });
    const afterSmallMiB = mib();
    const big = 'b'.repeat(60_000);
    for (let i = 0; i < large; i++) host.requestSync({ ':method': 'GET', ':path': '/', ':authority': `${i}.${big}.payments.example:80:80` });
    return { startMiB, afterSmallMiB, afterLargeMiB: mib() };
  } finally {
    await host.close();
  }
}

/**
 * Per-request cost of one worker VM for a long `:authority` (issue 24 #1), best of `rounds`
 * batches of `perRound` requests: `shape` 'labels' is `a.a.a…` (one-letter labels, the worst
 * case of a per-label suffix scan), 'flat' the same length without dots. A wildcard authority is
 * configured, as in the contract's example. Microseconds per request.
 */
export async function wildcardCost(bytes: number, shape: 'labels' | 'flat', perRound = 20, rounds = 5): Promise<number> {
  const config = JSON.stringify({ agent: { cluster: 'switchyard_agent' },
    link: { services: [{ authorities: ['payment.example', '*.payments.example'], peer: 'cloud-b' }] }, loadAware: { services: [] } });
  const host = await ProxyWasmHost.create({ wasm: path.join(ROOT, 'build/switchyard.wasm'), pluginConfig: config, workers: 1,
    mainThread: false, canary: false, clock: 'manual', clusters: { switchyard_agent: { handler: () => ({ status: 503 }) } } });
  try {
    // Two authorities taken in turn: the filter does not re-match an authority equal to the last one.
    const body = shape === 'labels' ? '.a'.repeat(Math.floor(bytes / 2) - 1) : 'a'.repeat(bytes - 1);
    const reqs = ['x', 'y'].map((first) => ({ ':method': 'GET', ':path': '/', ':authority': first + body }));
    for (let i = 0; i < 4; i++) host.requestSync(reqs[i & 1]); // warm up
    let best = Infinity;
    for (let r = 0; r < rounds; r++) {
      const t0 = performance.now();
      for (let i = 0; i < perRound; i++) host.requestSync(reqs[i & 1]);
      best = Math.min(best, (performance.now() - t0) / perRound);
    }
    return best * 1000;
  } finally {
    await host.close();
  }
}

const opts = require.main === module ? cli('npx tsx bench/hostile-authorities.ts', 'Wasm memory of one worker VM under distinct hostile :authority values.', {
  requests: int(1_000_000, 'distinct authorities just under the cache cut-off', 0),
  bytes: int(300, 'bytes per authority', 1),
  large: int(2000, 'distinct 60 KB authorities after them', 0),
  wildcard: flag('instead: the cost of a 60 / 120 KB Host, labels vs none'),
}) : undefined;
if (opts?.wildcard) {
  (async () => {
    for (const bytes of [60_000, 120_000]) {
      const labels = await wildcardCost(bytes, 'labels');
      const flat = await wildcardCost(bytes, 'flat');
      console.log(`${bytes / 1000} KB authority: ${Math.floor(bytes / 2)} one-letter labels ${labels.toFixed(0)} µs/request, no dots ${flat.toFixed(0)} µs/request`);
    }
  })();
} else if (opts) {
  const { requests, bytes, large } = opts;
  const t0 = performance.now();
  hostileAuthorities(requests, bytes, large).then((r) => {
    console.log(`wasm memory of one VM: ${r.startMiB.toFixed(1)} MiB at start, ${r.afterSmallMiB.toFixed(1)} MiB after ${requests} distinct ${bytes}-byte authorities, ` +
      `${r.afterLargeMiB.toFixed(1)} MiB after ${large} more distinct 60 KB authorities (${((performance.now() - t0) / 1000).toFixed(0)} s)`);
  });
}
