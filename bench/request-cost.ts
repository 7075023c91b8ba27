// Per-request cost of the filter in the embedded Proxy-Wasm host, measured side by side with a
// no-op Proxy-Wasm filter (same SDK, same runtime) in one run; rounds are interleaved and the
// added cost is the median of per-round paired differences, so machine noise hits both sides.
//
//   tsx bench/request-cost.ts [--rounds 30] [--batch 2000] [--quick] [--baseline build/prev/<sha>/switchyard.wasm]
//
// --baseline PATH: another build of the filter (e.g. the robustness bench's previous build) runs the
// load-aware 256 rows with in-band on and off in the same interleaved rounds, so the in-band
// increment of both builds is measured side by side under the same machine noise.
//
// --quick: 8 rounds, and only the synchronous per-request tables (no adoption or async sections).
// Every batch is timed in wall time and in process CPU time (the figure to quote on a shared
// machine); the request and response sides are also timed apart (time inside the filter's
// callbacks), and the link and load-aware requests run again with realistic header maps.
// Variants: no-op; Switchyard link status (matched authority / unmatched authority); with a rule
// decision in force (route, split by x-request-id) on the same authority;
// Switchyard load-aware choice with 16, 64 and 256 instances; and the seed's uncached design
// (one proxy_http_call to the agent per request) against a real agent on loopback.
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { ProxyWasmHost, type RequestOptions } from '../host/src';
import { encodeSnapshot, type InstanceRecord } from '../agent/src/snapshot/codec';
import type { RuleDecision } from '../agent/src/rules/engine';
import { startAgent } from '../agent/src';
import { cli, flag, int, optNum, optStr } from './cli';

const ROOT = path.resolve(__dirname, '..');
const opts = cli('npx tsx bench/request-cost.ts', 'Per-request cost of the filter against a no-op Proxy-Wasm filter, paired rounds.', {
  quick: flag('8 rounds, the synchronous per-request tables only'),
  rounds: optNum('interleaved rounds (default 30, quick 8)', 2),
  batch: int(2000, 'requests per batch', 1),
  baseline: optStr('another build: its load-aware 256 rows in the same rounds'),
});
const QUICK = opts.quick;
const ROUNDS = opts.rounds ?? (QUICK ? 8 : 30);
const BATCH = opts.batch;
const BASELINE = opts.baseline !== undefined ? path.resolve(opts.baseline) : undefined;

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
async function switchyardHost(n: number | null, picker = 'p2c', rules?: RuleDecision[], inband = true, wasm = path.join(ROOT, 'build/switchyard.wasm')): Promise<ProxyWasmHost> {
  const body = snapshotBody(n ?? 0, rules);
  const host = await ProxyWasmHost.create({
    wasm, pluginConfig: config(n !== null, picker, inband), workers: 1, mainThread: false, canary: false,
    clock: 'manual', startTimeMs: 1_000_000, clusters: { switchyard_agent: { handler: () => ({ status: 200, body }) } },
  });
  for (let i = 0; i < 10; i++) await host.advance(20); // poll, adopt, publish
  if ((host.metric('switchyard.snapshot.updates') ?? 0) < 1) throw new Error('snapshot not adopted');
  return host;
}

interface Variant { name: string; host: ProxyWasmHost; headers: Record<string, string>; check?: (h: ProxyWasmHost) => void; samples: number[]; cpu: number[]; opts?: RequestOptions }

/**
 * One batch: µs per request of wall time (into v.samples) and of this process's CPU time (into
 * v.cpu). On a quiet machine the two agree; on a shared one, time spent waiting for a core inflates
 * the wall figures and not the CPU ones, so both are reported.
 */
function timeBatch(v: Variant): void {
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  const o = v.opts;
  if (o) for (let i = 0; i < BATCH; i++) v.host.requestSync(v.headers, o);
  else for (let i = 0; i < BATCH; i++) v.host.requestSync(v.headers);
  const wall = Number(process.hrtime.bigint() - t0) / 1000 / BATCH; // µs per request
  const c = process.cpuUsage(c0);
  v.samples.push(wall);
  v.cpu.push((c.user + c.system) / BATCH);
}

const median = (xs: number[]): number => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
const q = (xs: number[], p: number): number => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(p * s.length))]; };

/**
 * The request and the response side apart (issue 9: "response-side work measured too"): every
 * callback into the worker VM is timed, the request side being on_context_create +
 * on_request_headers, the response side on_response_headers + on_log + on_done + on_delete
 * (in-band's end-of-stream work runs in on_done), each with the host calls it makes. The timing
 * wraps the VM's callback dispatch of every host alike, so its own overhead cancels in the paired
 * difference against the no-op filter (the first variant); the host's work outside callbacks
 * (header maps, the stream machine) is in neither side. Wall time: a batch in which the process
 * lost its core reads high, so the medians over rounds are what to quote.
 */
function phases(vs: Variant[]): void {
  const REQUEST = new Set(['proxy_on_context_create', 'proxy_on_request_headers']);
  const RESPONSE = new Set(['proxy_on_response_headers', 'proxy_on_log', 'proxy_on_done', 'proxy_on_delete']);
  const acc = { req: 0, resp: 0 };
  const restore: (() => void)[] = [];
  for (const h of new Set(vs.map((v) => v.host))) {
    const vm = h.workers[0];
    const call = vm.call;
    restore.push(() => { vm.call = call; });
    vm.call = function (this: typeof vm, ctx, name, ...args) {
      const t0 = process.hrtime.bigint();
      const r = call.call(this, ctx, name, ...args);
      const dt = Number(process.hrtime.bigint() - t0);
      if (REQUEST.has(name)) acc.req += dt; else if (RESPONSE.has(name)) acc.resp += dt;
      return r;
    };
  }
  const req = vs.map(() => [] as number[]);
  const resp = vs.map(() => [] as number[]);
  const rounds = Math.max(8, Math.floor(ROUNDS / 2));
  const perReq = new Float64Array(BATCH);
  const perResp = new Float64Array(BATCH);
  const mid = (a: Float64Array) => a.sort()[BATCH >> 1];
  for (let r = -1; r < rounds; r++) {
    vs.forEach((v, k) => {
      const o = v.opts ?? NO_OPTS;
      for (let i = 0; i < BATCH; i++) {
        acc.req = acc.resp = 0;
        v.host.requestSync(v.headers, o);
        perReq[i] = acc.req;
        perResp[i] = acc.resp;
      }
      // the median request of the batch: one that lost its core mid-callback does not move it
      if (r >= 0) { req[k].push(mid(perReq) / 1000); resp[k].push(mid(perResp) / 1000); }
    });
  }
  for (const f of restore) f();
  console.log(`\nRequest side and response side (time inside the filter's callbacks, median request of each batch, ${rounds} rounds × ${BATCH}); ` +
    'added vs the no-op filter with the same headers, median (p10..p90) µs');
  console.log('variant'.padEnd(42) + 'request side'.padStart(22) + 'response side'.padStart(24));
  const fmt = (d: number[]) => `${median(d).toFixed(2)} (${q(d, 0.1).toFixed(2)}..${q(d, 0.9).toFixed(2)})`;
  vs.forEach((v, k) => {
    if (k === 0 || v.name.startsWith('no-op')) return;
    const base = v.name.includes('realistic') ? vs.findIndex((x) => x.name === 'no-op filter, realistic headers') : 0;
    const dq = req[k].map((x, i) => x - req[base][i]);
    const dr = resp[k].map((x, i) => x - resp[base][i]);
    console.log(v.name.padEnd(42) + fmt(dq).padStart(22) + fmt(dr).padStart(24));
  });
}
const NO_OPTS: RequestOptions = {};

/** A request as a mesh sidecar sees it from an OpenAI-style client (14 headers). */
const realRq = (authority: string): Record<string, string> => ({
  ':method': 'POST', ':path': '/v1/chat/completions', ':authority': authority, ':scheme': 'https',
  'user-agent': 'OpenAI/Python 1.54.4', 'accept': 'application/json', 'accept-encoding': 'gzip, deflate',
  'content-type': 'application/json', 'content-length': '412', 'authorization': 'Bearer sk-proj-3f9c2a7b5e1d4c8a9f0b6e2d7c4a1f8e',
  'x-forwarded-proto': 'https', 'x-forwarded-for': '10.12.4.17', 'x-request-id': '5f0c2b9e-2a43-4c6b-9d1e-7b1f6e0f1a22',
  'traceparent': '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', 'x-cross-cloud-status': 'normal',
});
/** A streaming answer's headers (+ :status). */
const REAL_RESPONSE: Record<string, string> = {
  'content-type': 'text/event-stream; charset=utf-8', 'date': 'Mon, 30 Nov 2026 20:00:00 GMT', 'server': 'uvicorn',
  'x-request-id': '5f0c2b9e-2a43-4c6b-9d1e-7b1f6e0f1a22', 'cache-control': 'no-cache', 'x-envoy-upstream-service-time': '41',
};

async function main(): Promise<void> {
  const rq = (authority: string) => ({ ':method': 'GET', ':path': '/v1/x', ':authority': authority, ':scheme': 'http', 'user-agent': 'bench', 'x-cross-cloud-status': 'normal' });
  const noop = await ProxyWasmHost.create({ wasm: path.join(ROOT, 'build/bench-noop.wasm'), rootId: 'switchyard', workers: 1, mainThread: false, canary: false, clock: 'manual' });
  const link = await switchyardHost(null);
  const variants: Variant[] = [
    { name: 'no-op filter', host: noop, headers: rq('payment.example'), samples: [], cpu: [] },
    { name: 'switchyard link (matched authority)', host: link, headers: rq('payment.example'), samples: [], cpu: [] },
    { name: 'switchyard link (other authority)', host: link, headers: rq('other.example'), samples: [], cpu: [] },
  ];
  const RULES_ROUTE = variants.length;
  variants.push({ name: 'link + rule route (100 rules, 64 sets)', host: await switchyardHost(null, 'p2c', ruleDecisions({ kind: 'route', target: 'dc2' })),
    headers: rq('payment.example'), samples: [], cpu: [] });
  variants.push({ name: 'link + rule split by x-request-id', host: await switchyardHost(null, 'p2c', ruleDecisions({ kind: 'split', targets: [{ target: 'dc1', weight: 95 }, { target: 'dc1-canary', weight: 5 }] })),
    headers: { ...rq('payment.example'), 'x-request-id': '5f0c2b9e-2a43-4c6b-9d1e-7b1f6e0f1a22' }, samples: [], cpu: [] });
  const LA = variants.length;
  for (const n of [16, 64, 256]) {
    variants.push({ name: `switchyard load-aware, ${n} instances`, host: await switchyardHost(n), headers: rq('inference.example'), samples: [], cpu: [] });
  }
  variants.push({ name: 'load-aware, 256, full scan (picker band)', host: await switchyardHost(256, 'band'), headers: rq('inference.example'), samples: [], cpu: [] });
  // in-band learning (docs/inband.md) is on by default in every load-aware variant above; these
  // isolate it: the same 256 instances with it off, and with an ORCA TEXT report on every answer
  variants.push({ name: 'load-aware, 256, in-band off', host: await switchyardHost(256, 'p2c', undefined, false), headers: rq('inference.example'), samples: [], cpu: [] });
  variants.push({ name: 'load-aware, 256, in-band + ORCA answer', host: await switchyardHost(256), headers: rq('inference.example'), samples: [], cpu: [],
    opts: { response: { status: 200, headers: { 'endpoint-load-metrics': 'TEXT application_utilization=0.5,rps_fractional=12.5,eps=0,named_metrics.queue=2' } } } });
  // The same requests with header maps of a realistic size (what a mesh proxy sees on an LLM API call,
  // and a streaming answer's headers), each paired against the no-op filter with the same maps:
  // a cost that grows with the number of headers shows here and not in the rows above.
  const REAL = variants.length;
  const realOpts: RequestOptions = { response: { status: 200, headers: REAL_RESPONSE } };
  variants.push({ name: 'no-op filter, realistic headers', host: noop, headers: realRq('payment.example'), samples: [], cpu: [], opts: realOpts });
  variants.push({ name: 'link (matched), realistic headers', host: link, headers: realRq('payment.example'), samples: [], cpu: [], opts: realOpts });
  variants.push({ name: 'load-aware 256, realistic headers', host: variants[LA + 2].host, headers: realRq('inference.example'), samples: [], cpu: [], opts: realOpts });
  // --baseline: the other build's in-band on / off rows, in the same rounds
  const BASE = variants.length;
  if (BASELINE) {
    variants.push({ name: 'baseline: load-aware, 256', host: await switchyardHost(256, 'p2c', undefined, true, BASELINE), headers: rq('inference.example'), samples: [], cpu: [] });
    variants.push({ name: 'baseline: load-aware, 256, in-band off', host: await switchyardHost(256, 'p2c', undefined, false, BASELINE), headers: rq('inference.example'), samples: [], cpu: [] });
  }
  // sanity: the variants do what they claim
  const hdr = (v: Variant, name: string) => v.host.requestSync(v.headers).upstreamHeaders!.filter(([k]) => k === name).map(([, x]) => x).join();
  if (hdr(variants[1], 'x-cross-cloud-status') !== 'normal') throw new Error('link variant did not set the status');
  if (!/^10\.0\./.test(hdr(variants[LA], 'x-switchyard-endpoint'))) throw new Error('load-aware variant did not choose');
  if (hdr(variants[RULES_ROUTE], 'x-switchyard-route') !== 'dc2' || hdr(variants[RULES_ROUTE], 'x-cross-cloud-status') !== 'normal') throw new Error('rules variant did not route');
  if (!/^dc1/.test(hdr(variants[RULES_ROUTE + 1], 'x-switchyard-route'))) throw new Error('split variant did not split');

  for (const v of variants) timeBatch(v); // warm-up (JIT, GC steady state)
  for (const v of variants) { v.samples.length = 0; v.cpu.length = 0; }
  for (let r = 0; r < ROUNDS; r++) for (const v of variants) timeBatch(v);

  const [l1, l5, l15] = os.loadavg();
  console.log(`\nPer-request cost in the embedded host (full stream lifecycle, ${ROUNDS} interleaved rounds × ${BATCH} requests, one worker VM); ` +
    `load average ${l1.toFixed(2)} / ${l5.toFixed(2)} / ${l15.toFixed(2)}, ${os.cpus().length} cores`);
  for (const clock of ['wall', 'cpu'] as const) {
    const of = (v: Variant) => clock === 'wall' ? v.samples : v.cpu;
    const added = (v: Variant, ref: Variant = variants[0]) => { const r = of(ref); return of(v).map((s, i) => s - r[i]); };
    console.log(`\n${clock === 'wall' ? 'Wall time' : 'Process CPU time (user + system)'}`);
    console.log('variant'.padEnd(42) + 'median µs'.padStart(11) + '  added vs no-op: median (p10..p90) µs');
    for (const v of variants) {
      const diffs = added(v);
      console.log(v.name.padEnd(42) + median(of(v)).toFixed(2).padStart(11) +
        (v === variants[0] ? '' : `  ${median(diffs).toFixed(2).padStart(6)} (${q(diffs, 0.1).toFixed(2)}..${q(diffs, 0.9).toFixed(2)})`));
    }
    const linkAdded = median(added(variants[1]));
    const la256 = median(added(variants[LA + 2]));
    console.log(`targets (${clock}): link status <= 1 µs added at the median: ${linkAdded.toFixed(2)} µs -> ${linkAdded <= 1 ? 'MET' : 'NOT MET'}; ` +
      `load-aware at 256 instances <= 3 µs added: ${la256.toFixed(2)} µs -> ${la256 <= 3 ? 'MET' : 'NOT MET'}`);
    const off = variants[LA + 4];
    const inbandAdded = median(added(variants[LA + 2], off));
    const orcaAdded = median(added(variants[LA + 5], off));
    console.log(`in-band learning at 256 instances (request + response side, 3 clock reads), added vs in-band off: ${inbandAdded.toFixed(2)} µs ` +
      `(target <= 3 µs: ${inbandAdded <= 3 ? 'MET' : 'NOT MET'}); with an ORCA TEXT report parsed and stripped: ${orcaAdded.toFixed(2)} µs`);
    if (BASELINE) {
      const b = median(added(variants[BASE], variants[BASE + 1]));
      const both = added(variants[LA + 2], off).map((x, i) => x - added(variants[BASE], variants[BASE + 1])[i]);
      console.log(`baseline ${path.relative(ROOT, BASELINE)}: in-band added vs in-band off ${b.toFixed(2)} µs; this build minus the baseline, per round: ` +
        `median ${median(both).toFixed(2)} µs (${q(both, 0.1).toFixed(2)}..${q(both, 0.9).toFixed(2)})`);
      // the whole load-aware request (in-band on, the default), this build minus the baseline, paired per round:
      // a change outside the in-band work (e.g. a host call on the request path) shows here, not above
      const whole = added(variants[LA + 2], variants[BASE]);
      console.log(`load-aware 256, this build minus the baseline, per round: median ${median(whole).toFixed(2)} µs (${q(whole, 0.1).toFixed(2)}..${q(whole, 0.9).toFixed(2)})`);
    }
    const rl = median(added(variants[REAL + 1], variants[REAL]));
    const rla = median(added(variants[REAL + 2], variants[REAL]));
    console.log(`realistic headers (${Object.keys(realRq('x')).length} request, ${Object.keys(REAL_RESPONSE).length + 1} response), added vs the no-op filter with the same headers: ` +
      `link ${rl.toFixed(2)} µs, load-aware 256 ${rla.toFixed(2)} µs`);
    // issue 8: the rule decision's cost on top of the link-status path, paired per round
    const rulesAdded = added(variants[RULES_ROUTE], variants[1]);
    const splitAdded = added(variants[RULES_ROUTE + 1], variants[1]);
    console.log(`rules (issue 8): added over the link-status path, median (p10..p90): route ${median(rulesAdded).toFixed(2)} µs (${q(rulesAdded, 0.1).toFixed(2)}..${q(rulesAdded, 0.9).toFixed(2)}), ` +
      `split ${median(splitAdded).toFixed(2)} µs; target route <= 1 µs -> ${median(rulesAdded) <= 1 ? 'MET' : 'NOT MET'}`);
  }
  phases([variants[0], variants[1], variants[LA + 2], variants[LA + 4], variants[LA + 5], variants[REAL], variants[REAL + 1], variants[REAL + 2], ...(BASELINE ? [variants[BASE], variants[BASE + 1]] : [])]);
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
