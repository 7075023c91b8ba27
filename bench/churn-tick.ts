// Tick cost of a worker VM before, during and after address churn (issue 24 #2): per-address
// state was bounded in memory but not in time — after churn the per-tick loops (in-band sync and
// fusion, in-flight sweep/merge/encode) ran over every slot ever allocated.
//
//   tsx bench/churn-tick.ts [--snapshots 300] [--per 100] [--workers 1] [--wasm build/switchyard.wasm]
//
// The real filter in the embedded host with the shipped refreshMs (20 ms) and a load-aware
// service (in-band on, the default). A fleet of `--per` instances is served; then `--snapshots`
// snapshots of `--per` NEW addresses each, one every 100 ms; then the last fleet stays. The tick
// cost is the host time of one refresh interval (every VM's tick, the shared-data merges, the
// poll), median of 50, measured before the churn, at its end, and 15 s / 40 s after it (the grace
// before a gone address's slot is freed is 10 s).
import * as path from 'node:path';
import { readFileSync } from 'node:fs';
import { encodeSnapshot, type InstanceRecord } from '../agent/src/snapshot/codec';
import { ProxyWasmHost } from '../host/src';
import { cli, int, optStr } from './cli';

const ROOT = path.resolve(__dirname, '..');
const AUTH = 'inference.example';
const REFRESH_MS = 20; // the shipped default

const inst = (addr: string): InstanceRecord => ({ service: 'llm', addr, peer: '', healthy: true, reason: 'ok', rho: 0.3, esMs: 10, es2Ms2: 200,
  lambdaPerS: 10, queueDepth: 0, p50Ms: 10, p99Ms: 40, baselineP99Ms: 40, gpuUtil: 0.3, dataAgeMs: 0, slots: 1 });

export interface ChurnTick { beforeMs: number; duringMs: number; after15Ms: number; after40Ms: number; memBeforeMiB: number; memAfterMiB: number }

export async function churnTick(opts: { snapshots?: number; per?: number; workers?: number; wasm?: string } = {}): Promise<ChurnTick> {
  const snapshots = opts.snapshots ?? 300, per = opts.per ?? 100;
  let body: Buffer = Buffer.alloc(0);
  let seq = 1;
  const host = await ProxyWasmHost.create({
    wasm: readFileSync(opts.wasm ?? path.join(ROOT, 'build/switchyard.wasm')), workers: opts.workers ?? 1, mainThread: false, canary: false,
    clock: 'manual', startTimeMs: 1_000_000, logLevel: 'critical',
    pluginConfig: JSON.stringify({
      agent: { cluster: 'switchyard_agent', longPollMs: 0, pollMs: 50 }, refreshMs: REFRESH_MS,
      link: { services: [] },
      loadAware: { services: [{ authorities: [AUTH], service: 'llm', stalenessMs: 60_000 }] },
    }),
    clusters: { switchyard_agent: { handler: () => ({ status: 200, body }) } },
  });
  const serve = (round: number): void => {
    const now = host.clock.nowMs();
    const instances = Array.from({ length: per }, (_, i) => inst(`10.${(round >> 8) & 255}.${round & 255}.${i}:80`));
    body = encodeSnapshot({ seq: ++seq, generatedAtMs: now, peers: [], instances });
  };
  const fresh = (): void => { // the same fleet, newly dated (the agent republishes)
    body = encodeSnapshot({ seq: ++seq, generatedAtMs: host.clock.nowMs(), peers: [], instances: lastFleet });
  };
  let lastFleet: InstanceRecord[] = [];
  const tickCost = async (): Promise<number> => {
    const t: number[] = [];
    for (let i = 0; i < 50; i++) {
      if (i % 25 === 0) fresh();
      const t0 = performance.now();
      await host.advance(REFRESH_MS);
      t.push(performance.now() - t0);
      await host.request({ ':method': 'POST', ':path': '/', ':authority': AUTH });
    }
    t.sort((a, b) => a - b);
    return t[t.length >> 1];
  };
  const mem = (): number => Math.max(...host.workers.map((w) => w.memoryBytes())) / 1048576;
  try {
    serve(0);
    lastFleet = Array.from({ length: per }, (_, i) => inst(`10.0.0.${i}:80`));
    for (let i = 0; i < 20; i++) await host.advance(REFRESH_MS);
    const beforeMs = await tickCost();
    const memBeforeMiB = mem();
    for (let r = 1; r <= snapshots; r++) {
      serve(r);
      lastFleet = Array.from({ length: per }, (_, i) => inst(`10.${(r >> 8) & 255}.${r & 255}.${i}:80`));
      for (let k = 0; k < 100 / REFRESH_MS; k++) await host.advance(REFRESH_MS);
      if (r % 10 === 0) await host.request({ ':method': 'POST', ':path': '/', ':authority': AUTH });
    }
    const duringMs = await tickCost(); // 1 s of the stable fleet: still within the grace
    const until = async (s: number): Promise<void> => { while (host.clock.nowMs() < endAt + s * 1000) { fresh(); for (let k = 0; k < 25; k++) await host.advance(REFRESH_MS); } };
    const endAt = host.clock.nowMs();
    await until(14);
    const after15Ms = await tickCost();
    await until(39);
    const after40Ms = await tickCost();
    return { beforeMs, duringMs, after15Ms, after40Ms, memBeforeMiB, memAfterMiB: mem() };
  } finally {
    await host.close();
  }
}

if (require.main === module) {
  const { snapshots, per, workers, wasm } = cli('npx tsx bench/churn-tick.ts', 'Tick cost of a worker VM before, during and after address churn.', {
    snapshots: int(300, 'snapshots of new addresses, one every 100 ms', 0),
    per: int(100, 'instances per snapshot', 1),
    workers: int(1, 'worker VMs', 1),
    wasm: optStr('filter module (default build/switchyard.wasm)'),
  });
  churnTick({ snapshots, per, workers, wasm }).then((r) => {
    const f = (v: number): string => v.toFixed(3);
    console.log(`churn ${snapshots} x ${per} new addresses, ${workers} worker(s): tick ms (median of 50) before ${f(r.beforeMs)}, end of churn ${f(r.duringMs)}, ` +
      `+15 s ${f(r.after15Ms)}, +40 s ${f(r.after40Ms)}; VM memory ${r.memBeforeMiB.toFixed(0)} -> ${r.memAfterMiB.toFixed(0)} MiB`);
  });
}
