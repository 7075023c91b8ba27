// Per-request cost of the filter in the embedded Proxy-Wasm host, measured side by side with a
// no-op Proxy-Wasm filter (same SDK, same runtime) in one run; rounds are interleaved and the
// added cost is the median of per-round paired differences, so machine noise hits both sides.
//
//   tsx bench/request-cost.ts [--rounds 30] [--batch 2000] [--quick]
//
// --quick: 8 rounds, and only the synchronous per-request table (no adoption or async sections).
// Variants: no-op; Switchyard link status (matched authority / unmatched authority); with a rule
// decision in force (route, split by x-request-id) on the same authority;
// Switchyard load-aware choice with 16, 64 and 256 instances; and the seed's uncached design
// (one proxy_http_call to the agent per request) against a real agent on loopback.
import * as path from 'node:path';
import pino from 'pino';
import { ProxyWasmHost, type RequestOptions } from '../host/src';
import { encodeSnapshot, type InstanceRecord } from '../agent/src/snapshot/codec';
import type { RuleDecision } from '../agent/src/rules/engine';
import { startAgent } from '../agent/src';

const ROOT = path.resolve(__dirname, '..');
const arg = (name: string, def: number): number => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : def;
};
const QUICK = process.argv.includes('--quick');
const ROUNDS = arg('--rounds', QUICK ? 8 : 30);
const BATCH = arg('--batch', 2000);

function instances(n: number): InstanceRecord[] {
  const out: InstanceRecord[] = [];
  for (let i = 0; i < n; i++) {
    const rho = 0.2 + 0.6 * ((i * 37) % 100) / 100;
    out.push({ service: 'llm', addr: `10.0.${i >> 8}.${i & 255}:8000`, peer: i % 8 === 7 ? 'cloud-b' : '', healthy: true, reason: 'ok',
      rho, esMs: 80, es2Ms2: 80 * 80 * 2.7, lambdaPerS: 10, queueDepth: i % 5, p50Ms: 60, p99Ms: 300, baselineP99Ms: 250,
      gpuUtil: rho, dataAgeMs: 100, slots: 4 });
  }
  return out;
}

/**
 * The decisions of a rules configuration whose set for payment.example has 100 rules (the agent
 * evaluates them; the filter receives the one in force, so the request path's work does not
 * depend on the rule count) plus 63 more sets on other authorities, the RULES section's maximum:
 * the authority matcher is as full as it gets.
 */
function ruleDecisions(action: RuleDecision['action']): RuleDecision[] {
  const because = Array.from({ length: 3 }, (_, i) => ({ name: `v${i}`, value: true }));
  const out: RuleDecision[] = [{ set: 'payments', authorities: ['payment.example'], routeHeader: 'x-switchyard-route', version: 1, ruleId: 'rule-42-of-100', action, sinceMs: 1_000_000, because }];
  for (let i = 1; i < 64; i++) out.push({ ...out[0], set: `set-${i}`, authorities: [`svc-${i}.example`, `*.w${i}.example`], ruleId: 'default', action: { kind: 'route', target: 'dc1' } });
  return out;
}

function snapshotBody(n: number, rules?: RuleDecision[]): Buffer {
  return encodeSnapshot({ seq: 1, generatedAtMs: 1_000_000, peers: [{ name: 'cloud-b', state: 'normal', lastRttMs: 10, avgRttMs: 10, recoverStreak: 10, lastSampleAtMs: 1_000_000 }],
    instances: n > 0 ? instances(n) : undefined, rules });
}

function config(loadAware: boolean, picker = 'p2c', inband = true): string {
  return JSON.stringify({
    agent: { cluster: 'switchyard_agent', longPollMs: 0, pollMs: 10 },
    link: { services: [{ authorities: ['payment.example'], peer: 'cloud-b' }] },
    ...(loadAware ? { loadAware: { services: [{ authorities: ['inference.example'], service: 'llm', stalenessMs: 600000, picker, inband: { enabled: inband } }] } } : {}),
  });
}

/** picker 'band' scans every instance on every request: the cost p2c has when it must scan (a drawn candidate saturated). */
async function switchyardHost(n: number | null, picker = 'p2c', rules?: RuleDecision[], inband = true): Promise<ProxyWasmHost> {
  const body = snapshotBody(n ?? 0, rules);
  const host = await ProxyWasmHost.create({
    wasm: path.join(ROOT, 'build/switchyard.wasm'), pluginConfig: config(n !== null, picker, inband), workers: 1, mainThread: false, canary: false,
    clock: 'manual', startTimeMs: 1_000_000, clusters: { switchyard_agent: { handler: () => ({ status: 200, body }) } },
  });
  for (let i = 0; i < 10; i++) await host.advance(20); // poll, adopt, publish
  if ((host.metric('switchyard.snapshot.updates') ?? 0) < 1) throw new Error('snapshot not adopted');
  return host;
}

interface Variant { name: string; host: ProxyWasmHost; headers: Record<string, string>; check?: (h: ProxyWasmHost) => void; samples: number[]; opts?: RequestOptions }

function timeBatch(v: Variant): number {
  const t0 = process.hrtime.bigint();
  const o = v.opts;
  if (o) for (let i = 0; i < BATCH; i++) v.host.requestSync(v.headers, o);
  else for (let i = 0; i < BATCH; i++) v.host.requestSync(v.headers);
  return Number(process.hrtime.bigint() - t0) / 1000 / BATCH; // µs per request
}

const median = (xs: number[]): number => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
const q = (xs: number[], p: number): number => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(p * s.length))]; };

async function main(): Promise<void> {
  const rq = (authority: string) => ({ ':method': 'GET', ':path': '/v1/x', ':authority': authority, ':scheme': 'http', 'user-agent': 'bench', 'x-cross-cloud-status': 'normal' });
  const noop = await ProxyWasmHost.create({ wasm: path.join(ROOT, 'build/bench-noop.wasm'), rootId: 'switchyard', workers: 1, mainThread: false, canary: false, clock: 'manual' });
  const link = await switchyardHost(null);
  const variants: Variant[] = [
    { name: 'no-op filter', host: noop, headers: rq('payment.example'), samples: [] },
    { name: 'switchyard link (matched authority)', host: link, headers: rq('payment.example'), samples: [] },
    { name: 'switchyard link (other authority)', host: link, headers: rq('other.example'), samples: [] },
  ];
  const RULES_ROUTE = variants.length;
  variants.push({ name: 'link + rule route (100 rules, 64 sets)', host: await switchyardHost(null, 'p2c', ruleDecisions({ kind: 'route', target: 'dc2' })),
    headers: rq('payment.example'), samples: [] });
  variants.push({ name: 'link + rule split by x-request-id', host: await switchyardHost(null, 'p2c', ruleDecisions({ kind: 'split', targets: [{ target: 'dc1', weight: 95 }, { target: 'dc1-canary', weight: 5 }] })),
    headers: { ...rq('payment.example'), 'x-request-id': '5f0c2b9e-2a43-4c6b-9d1e-7b1f6e0f1a22' }, samples: [] });
  const LA = variants.length;
  for (const n of [16, 64, 256]) {
    variants.push({ name: `switchyard load-aware, ${n} instances`, host: await switchyardHost(n), headers: rq('inference.example'), samples: [] });
  }
  variants.push({ name: 'load-aware, 256, full scan (picker band)', host: await switchyardHost(256, 'band'), headers: rq('inference.example'), samples: [] });
  // in-band learning (docs/inband.md) is on by default in every load-aware variant above; these
  // isolate it: the same 256 instances with it off, and with an ORCA TEXT report on every answer
  variants.push({ name: 'load-aware, 256, in-band off', host: await switchyardHost(256, 'p2c', undefined, false), headers: rq('inference.example'), samples: [] });
  variants.push({ name: 'load-aware, 256, in-band + ORCA answer', host: await switchyardHost(256), headers: rq('inference.example'), samples: [],
    opts: { response: { status: 200, headers: { 'endpoint-load-metrics': 'TEXT application_utilization=0.5,rps_fractional=12.5,eps=0,named_metrics.queue=2' } } } });
  // sanity: the variants do what they claim
  const hdr = (v: Variant, name: string) => v.host.requestSync(v.headers).upstreamHeaders!.filter(([k]) => k === name).map(([, x]) => x).join();
  if (hdr(variants[1], 'x-cross-cloud-status') !== 'normal') throw new Error('link variant did not set the status');
  if (!/^10\.0\./.test(hdr(variants[LA], 'x-switchyard-endpoint'))) throw new Error('load-aware variant did not choose');
  if (hdr(variants[RULES_ROUTE], 'x-switchyard-route') !== 'dc2' || hdr(variants[RULES_ROUTE], 'x-cross-cloud-status') !== 'normal') throw new Error('rules variant did not route');
  if (!/^dc1/.test(hdr(variants[RULES_ROUTE + 1], 'x-switchyard-route'))) throw new Error('split variant did not split');

  for (const v of variants) timeBatch(v); // warm-up (JIT, GC steady state)
  for (let r = 0; r < ROUNDS; r++) for (const v of variants) v.samples.push(timeBatch(v));

  const base = variants[0].samples;
  console.log(`\nPer-request cost in the embedded host (full stream lifecycle, ${ROUNDS} interleaved rounds × ${BATCH} requests, one worker VM)`);
  console.log('variant'.padEnd(42) + 'median µs'.padStart(11) + '  added vs no-op: median (p10..p90) µs');
  for (const v of variants) {
    const diffs = v.samples.map((s, i) => s - base[i]);
    console.log(v.name.padEnd(42) + median(v.samples).toFixed(2).padStart(11) +
      (v === variants[0] ? '' : `  ${median(diffs).toFixed(2).padStart(6)} (${q(diffs, 0.1).toFixed(2)}..${q(diffs, 0.9).toFixed(2)})`));
  }
  const linkAdded = median(variants[1].samples.map((s, i) => s - base[i]));
  const la256 = median(variants[LA + 2].samples.map((s, i) => s - base[i]));
  console.log(`targets: link status <= 1 µs added at the median: ${linkAdded.toFixed(2)} µs -> ${linkAdded <= 1 ? 'MET' : 'NOT MET'}; ` +
    `load-aware at 256 instances <= 3 µs added: ${la256.toFixed(2)} µs -> ${la256 <= 3 ? 'MET' : 'NOT MET'}`);
  const off = variants[LA + 4].samples;
  const inbandAdded = median(variants[LA + 2].samples.map((s, i) => s - off[i]));
  const orcaAdded = median(variants[LA + 5].samples.map((s, i) => s - off[i]));
  console.log(`in-band learning at 256 instances (request + response side, 3 clock reads), added vs in-band off: ${inbandAdded.toFixed(2)} µs ` +
    `(target <= 3 µs: ${inbandAdded <= 3 ? 'MET' : 'NOT MET'}); with an ORCA TEXT report parsed and stripped: ${orcaAdded.toFixed(2)} µs`);
  // issue 8: the rule decision's cost on top of the link-status path, paired per round
  const linkSamples = variants[1].samples;
  const rulesAdded = variants[RULES_ROUTE].samples.map((s, i) => s - linkSamples[i]);
  const splitAdded = variants[RULES_ROUTE + 1].samples.map((s, i) => s - linkSamples[i]);
  console.log(`rules (issue 8): added over the link-status path, median (p10..p90): route ${median(rulesAdded).toFixed(2)} µs (${q(rulesAdded, 0.1).toFixed(2)}..${q(rulesAdded, 0.9).toFixed(2)}), ` +
    `split ${median(splitAdded).toFixed(2)} µs; target route <= 1 µs -> ${median(rulesAdded) <= 1 ? 'MET' : 'NOT MET'}`);
  if (QUICK) {
    for (const v of new Set(variants.map((x) => x.host))) await v.close();
    return;
  }

  // Snapshot adoption in the filter (decode + plan rebuild + publish to shared data), per version:
  // a host whose agent answers a new version at every poll against one that repeats the same
  // version (recognised by its seq without decoding), same number of polls.
  console.log('\nSnapshot adoption in the filter (decode + plan rebuild + shared-data publish), per new version');
  for (const n of [16, 64, 256]) {
    const bodies = Array.from({ length: 401 }, (_, i) => encodeSnapshot({ seq: 10 + i, generatedAtMs: 1_000_000,
      peers: [{ name: 'cloud-b', state: 'normal', lastRttMs: 10, avgRttMs: 10, recoverStreak: 10, lastSampleAtMs: 1_000_000 }], instances: instances(n) }));
    const mk = async (fresh: boolean) => {
      let k = 0;
      const h = await ProxyWasmHost.create({ wasm: path.join(ROOT, 'build/switchyard.wasm'), pluginConfig: config(true), workers: 1, mainThread: false, canary: false,
        clock: 'manual', startTimeMs: 1_000_000, clusters: { switchyard_agent: { handler: () => ({ status: 200, body: bodies[fresh ? Math.min(k++, 400) : 0] }) } } });
      for (let i = 0; i < 5; i++) await h.advance(20);
      return h;
    };
    const fresh = await mk(true);
    const same = await mk(false);
    const times: number[] = [[], []].map(() => 0);
    for (let round = 0; round < 4; round++) {
      for (const [j, h] of [[0, fresh], [1, same]] as const) {
        const t0 = process.hrtime.bigint();
        for (let i = 0; i < 50; i++) await h.advance(20);
        times[j] += Number(process.hrtime.bigint() - t0) / 1000;
      }
    }
    const adopted = (fresh.metric('switchyard.snapshot.updates') ?? 0) - (same.metric('switchyard.snapshot.updates') ?? 0);
    console.log(`  ${String(n).padStart(3)} instances (${bodies[0].length} bytes): ${((times[0] - times[1]) / Math.max(1, adopted)).toFixed(1)} µs per adopted version (${adopted} versions)`);
    await fresh.close();
    await same.close();
  }

  // The seed's design without its cache: one http call to the agent per request, asynchronous,
  // against a real agent on loopback. Compared with the same asynchronous path for the others.
  const agent = await startAgent({ listen: { host: '127.0.0.1', port: 0 }, link: { peers: [{ name: 'cloud-b', probe: { kind: 'tcp', address: '127.0.0.1:9' },
    intervalMs: 1000, timeoutMs: 500, degradeThresholdMs: 50, degradeAfter: 1, recoverThresholdMs: 40, recoverAfter: 10 }] } } as any,
  { logger: pino({ level: 'silent' }), defaultMetrics: false });
  const uncached = await ProxyWasmHost.create({ wasm: path.join(ROOT, 'build/bench-uncached.wasm'), rootId: 'switchyard', workers: 1, mainThread: false, canary: false,
    clusters: { switchyard_agent: { address: '127.0.0.1', port: agent.port } } });
  const asyncVariants: [string, ProxyWasmHost, Record<string, string>][] = [
    ['no-op filter', noop, rq('payment.example')],
    ['switchyard link (matched authority)', link, rq('payment.example')],
    ['seed design, uncached (http call per request)', uncached, rq('payment.example')],
  ];
  const first = await uncached.request(rq('payment.example'));
  if (first.upstreamHeaders?.find(([k]) => k === 'x-cross-cloud-status') === undefined) throw new Error('uncached filter did not set the status');
  const asyncSamples = asyncVariants.map(() => [] as number[]);
  const N = 200;
  for (let r = 0; r < 10; r++) {
    for (let k = 0; k < asyncVariants.length; k++) {
      const [, h, headers] = asyncVariants[k];
      const t0 = process.hrtime.bigint();
      for (let i = 0; i < N; i++) await h.request(headers);
      asyncSamples[k].push(Number(process.hrtime.bigint() - t0) / 1000 / N);
    }
  }
  console.log(`\nSame, through the asynchronous request path (10 rounds × ${N} sequential requests); the uncached design waits for the agent`);
  for (let k = 0; k < asyncVariants.length; k++) {
    const diffs = asyncSamples[k].map((s, i) => s - asyncSamples[0][i]);
    console.log(asyncVariants[k][0].padEnd(48) + `${median(asyncSamples[k]).toFixed(1).padStart(8)} µs` + (k === 0 ? '' : `   added ${median(diffs).toFixed(1).padStart(7)} µs`));
  }
  const ratio = median(asyncSamples[2].map((s, i) => s - asyncSamples[0][i])) / Math.max(0.01, median(asyncSamples[1].map((s, i) => s - asyncSamples[0][i])));
  console.log(`uncached / switchyard added cost: ${ratio.toFixed(0)}x`);

  await uncached.close();
  await agent.stop();
  for (const v of new Set(variants.map((x) => x.host))) await v.close();
}

main().catch((e) => { console.error(e); process.exit(1); });
