// The rig's inference demo (issue 10 §5): the same shared-prefix chat traffic sent to three
// fleets of simulated vLLM servers (sim/inference/llm, in process), each routed by one policy:
//   request-aware  the real filter, service with a `request` block (body read, prefix index
//                  shared by the 2 worker VMs, size and KV-cache terms)
//   body-blind     the real filter, same load-aware choice without the body
//   least-request  Envoy's LEAST_REQUEST (power of two choices on active requests), in JS
// The two filter policies run the SHIPPED bootstraps in the embedded Envoy (host/src/proxy.ts, the
// same code as host/bin/proxy.ts): request-aware = envoy/envoy-inference.yaml (Wasm PluginConfig
// allow_on_headers_stop_iteration: true, a `request` block), body-blind = envoy/envoy.yaml; only
// the addresses differ (clusterAddresses: the fleet as inference_default, an in-process agent per
// fleet as switchyard_agent), and the pick reaches the instance through the files' own
// override_host cluster. Nothing here needs Envoy. Each server reports, per request, its time to
// first token and the prompt tokens its prefix cache served.
//
// The KV caches are small on purpose (each holds about a third of the prompt families' shared
// prefixes): a policy that spreads every family over every instance thrashes them; one that
// keeps a family on the instance that has it hits.
import pino from 'pino';
import * as path from 'node:path';
import { startAgent, type AgentHandle } from '../agent/src';
import http from 'node:http';
import { EnvoyProxy, ProxyWasmHost } from '../host/src';
import { startLlmServer, type LlmServerHandle } from '../sim/inference/llm/server';
import { mulberry32 } from '../sim/inference/prng';
import { randomText } from '../sim/inference/llm/workloads';

export const POLICIES = ['request-aware', 'body-blind', 'least-request'] as const;
export type Policy = (typeof POLICIES)[number];

const MODEL = 'llama-3-8b';
/** The load-aware authority of both bootstraps (their plugin configs' loadAware.services[0]). */
const AUTHORITY = 'inference.prod.svc.cluster.local';
const BOOTSTRAP: Record<'request-aware' | 'body-blind', string> = {
  'request-aware': path.join(__dirname, '..', 'envoy', 'envoy-inference.yaml'),
  'body-blind': path.join(__dirname, '..', 'envoy', 'envoy.yaml'),
};

export interface LlmDemoOptions {
  /** requests per second (each is sent to every policy's fleet) */
  rps?: number;
  instances?: number;
  /** prompt families (shared system prompts) */
  families?: number;
  /** tokens of each family's system prompt */
  prefixTokens?: number;
  /** KV-cache blocks (16 tokens) per instance */
  kvBlocks?: number;
  seed?: number;
  wasm?: string;
}

export interface PolicyStats {
  sent: number;
  ok: number;
  errors: number;
  promptTokens: number;
  cachedTokens: number;
  /** requests the filter placed nothing for (no snapshot yet): the bootstrap's fallback LEAST_REQUEST served them */
  unplaced: number;
  ttftMs: number[];
}

const emptyStats = (): PolicyStats => ({ sent: 0, ok: 0, errors: 0, promptTokens: 0, cachedTokens: 0, unplaced: 0, ttftMs: [] });

export interface LlmDemo {
  /** per policy, since the previous take() */
  take(): Record<Policy, PolicyStats>;
  /** per policy, since start (TTFT: the last 2000) */
  totals(): Record<Policy, PolicyStats>;
  fleets: Record<Policy, LlmServerHandle[]>;
  /** the request-aware proxy's Proxy-Wasm host (its filter's metrics) */
  host: ProxyWasmHost;
  proxies: Record<'request-aware' | 'body-blind', EnvoyProxy>;
  stop(): Promise<void>;
}

/** Envoy's LEAST_REQUEST with its default choice_count 2: the fewer active requests of two random instances. */
class LeastRequest {
  active: number[];
  constructor(n: number, private readonly rng: () => number) { this.active = new Array(n).fill(0); }
  pick(): number {
    const n = this.active.length;
    const a = Math.floor(this.rng() * n);
    let b = Math.floor(this.rng() * (n - 1));
    if (b >= a) b++;
    return this.active[b] < this.active[a] ? b : a;
  }
}

export async function startLlmDemo(o: LlmDemoOptions = {}): Promise<LlmDemo> {
  const n = o.instances ?? 4;
  const families = o.families ?? 9;
  const prefixTokens = o.prefixTokens ?? 1200;
  const kvBlocks = o.kvBlocks ?? Math.ceil((3 * prefixTokens) / 16) + 40;
  const rps = o.rps ?? 4;
  const rng = mulberry32(o.seed ?? 20261130);
  const cleanups: (() => Promise<unknown> | void)[] = [];
  const stopAll = async () => { for (const c of cleanups.reverse()) { try { await c(); } catch { /* keep stopping */ } } cleanups.length = 0; };
  try {
    const fleets = {} as Record<Policy, LlmServerHandle[]>;
    for (const p of POLICIES) {
      fleets[p] = await Promise.all(Array.from({ length: n }, (_, i) => startLlmServer({ port: 0, name: `${p}-${i + 1}`,
        engine: { models: [MODEL], numBlocks: kvBlocks } })));
      for (const s of fleets[p]) cleanups.push(() => s.stop());
    }
    // one agent per fleet: both bootstraps name their snapshot service "llm"
    const agentFor = async (fleet: LlmServerHandle[]): Promise<AgentHandle> => {
      const a = await startAgent({
        listen: { host: '127.0.0.1', port: 0 },
        publishIntervalMs: 100,
        link: { peers: [] },
        inference: { scrapeIntervalMs: 100, services: [{ name: 'llm', kind: 'vllm', instances: { static: fleet.map((s) => s.addr) } }] },
      } as any, { logger: pino({ level: 'silent' }), defaultMetrics: false });
      cleanups.push(() => a.stop());
      return a;
    };
    const ep = (addr: string) => { const i = addr.lastIndexOf(':'); return { address: addr.slice(0, i), port: Number(addr.slice(i + 1)) }; };
    const proxies = {} as Record<'request-aware' | 'body-blind', EnvoyProxy>;
    for (const p of ['request-aware', 'body-blind'] as const) {
      const agent = await agentFor(fleets[p]);
      const proxy = await EnvoyProxy.start({
        configPath: BOOTSTRAP[p], wasmPath: o.wasm ?? path.join(__dirname, '..', 'build/switchyard.wasm'),
        listenPort: 0, listenAddress: '127.0.0.1', adminPort: 0, workers: 2, logLevel: 'warn',
        clusterAddresses: { switchyard_agent: { address: '127.0.0.1', port: agent.port }, inference_default: fleets[p].map((s) => ep(s.addr)) },
      });
      cleanups.push(() => proxy.close());
      proxies[p] = proxy;
    }
    const host = proxies['request-aware'].host!;

    const systems = Array.from({ length: families }, (_, f) => `Family ${f}. ` + randomText(rng, prefixTokens));
    const lr = new LeastRequest(n, rng);
    let window = Object.fromEntries(POLICIES.map((p) => [p, emptyStats()])) as Record<Policy, PolicyStats>;
    const total = Object.fromEntries(POLICIES.map((p) => [p, emptyStats()])) as Record<Policy, PolicyStats>;
    let stopped = false;
    let inflight = 0;

    const account = (p: Policy, f: (s: PolicyStats) => void) => { f(window[p]); f(total[p]); if (total[p].ttftMs.length > 4000) total[p].ttftMs.splice(0, 2000); };
    const post = async (addr: string, body: string): Promise<{ status: number; body: string; json?: any }> => {
      const res = await fetch(`http://${addr}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body, signal: AbortSignal.timeout(20000) });
      const text = await res.text();
      return { status: res.status, body: text, json: res.status === 200 ? JSON.parse(text) : undefined };
    };
    const record = (p: Policy, r: { status?: number; json?: any }) => account(p, (s) => {
      if (r.status !== 200 || !r.json) { s.errors++; return; }
      s.ok++;
      s.promptTokens += r.json.usage?.prompt_tokens ?? 0;
      s.cachedTokens += r.json.usage?.prompt_tokens_details?.cached_tokens ?? 0;
      if (Number.isFinite(r.json.sim?.ttftMs)) s.ttftMs.push(r.json.sim.ttftMs);
    });

    /** POST through a shipped bootstrap's listener, as a client of that Envoy would. */
    const viaProxy = (port: number, body: string): Promise<{ status: number; json?: any; placed: boolean }> => new Promise((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/chat/completions', agent: false, timeout: 20000,
        headers: { host: AUTHORITY, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString();
          let json: any;
          if (res.statusCode === 200) { try { json = JSON.parse(text); } catch { /* counted as an error */ } }
          // the filter's debug header (debug: true in both bootstraps) names the pick
          const placed = String(res.headers['x-switchyard-debug'] ?? '').startsWith('instance=');
          resolve({ status: res.statusCode ?? 0, json, placed });
        });
      });
      req.on('timeout', () => req.destroy(new Error('timeout')));
      req.on('error', reject);
      req.end(body);
    });
    const viaFilter = async (p: 'request-aware' | 'body-blind', body: string): Promise<void> => {
      const r = await viaProxy(proxies[p].listenPort, body);
      if (!r.placed) account(p, (s) => s.unplaced++);
      record(p, r);
    };
    const viaLeastRequest = async (body: string): Promise<void> => {
      const i = lr.pick();
      lr.active[i]++;
      try { record('least-request', await post(fleets['least-request'][i].addr, body)); } finally { lr.active[i]--; }
    };

    const send = () => {
      const f = Math.floor(rng() * families);
      const body = JSON.stringify({ model: MODEL, max_tokens: 8, messages: [
        { role: 'system', content: systems[f] }, { role: 'user', content: randomText(rng, 40) }] });
      for (const p of POLICIES) {
        account(p, (s) => s.sent++);
        inflight++;
        const run = p === 'least-request' ? viaLeastRequest(body) : viaFilter(p, body);
        run.catch(() => account(p, (s) => s.errors++)).finally(() => { inflight--; });
      }
    };
    let timer: NodeJS.Timeout | undefined;
    const loop = () => {
      if (stopped) return;
      send();
      timer = setTimeout(loop, (-Math.log(1 - rng()) * 1000) / rps);
    };
    loop();

    return {
      fleets, host, proxies,
      take: () => { const w = window; window = Object.fromEntries(POLICIES.map((p) => [p, emptyStats()])) as Record<Policy, PolicyStats>; return w; },
      totals: () => total,
      stop: async () => {
        stopped = true;
        if (timer) clearTimeout(timer);
        const deadline = Date.now() + 5000;
        while (inflight > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
        await stopAll();
      },
    };
  } catch (e) {
    await stopAll();
    throw e;
  }
}

export const hitRate = (s: PolicyStats): number => (s.promptTokens > 0 ? s.cachedTokens / s.promptTokens : NaN);

/** What the display and the verdict need of a policy's stats. */
export interface PolicySummary { sent: number; ok: number; errors: number; hitRate: number; ttftP50: number; ttftP99: number }
export type LlmSummary = Record<Policy, PolicySummary>;

function quantile(xs: number[], q: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
}

export function summarize(w: Record<Policy, PolicyStats>): LlmSummary {
  return Object.fromEntries(POLICIES.map((p) => {
    const s = w[p];
    return [p, { sent: s.sent, ok: s.ok, errors: s.errors, hitRate: hitRate(s), ttftP50: quantile(s.ttftMs, 0.5), ttftP99: quantile(s.ttftMs, 0.99) }];
  })) as LlmSummary;
}

/** One display line: per policy, prefix hit rate (prompt tokens served from cache) and TTFT P50/P99. */
export function llmLine(w: LlmSummary): string {
  const fmt = (x: number) => (Number.isFinite(x) ? x.toFixed(0) : '-').padStart(4);
  return 'llm ' + POLICIES.map((p) => {
    const s = w[p];
    const h = s.hitRate;
    return `${p} ${String(s.ok).padStart(3)} rq hit ${Number.isFinite(h) ? `${Math.round(100 * h)}%`.padStart(4) : '   -'} ttft p50 ${fmt(s.ttftP50)} p99 ${fmt(s.ttftP99)} ms` +
      (s.errors ? ` err ${s.errors}` : '');
  }).join(' | ');
}

export interface LlmDemoProcess {
  /** the last report: the window since the one before, and the totals since start */
  latest(): { seq: number; window: LlmSummary; totals: LlmSummary } | undefined;
  stop(): Promise<void>;
}

/**
 * Runs the demo in its own process: its simulated servers, filter and agent would otherwise share
 * the rig's event loop with the leased-line injector and delay the agent's probes. Reports every
 * `reportMs` as one JSON line on stdout.
 */
export function spawnLlmDemo(reportMs = 2000, startTimeoutMs = 30000): Promise<LlmDemoProcess> {
  // eslint-disable-next-line @typescript-eslint/no-var-requires
  const { spawn } = require('node:child_process') as typeof import('node:child_process');
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(__dirname, 'llm.ts'), '--report-ms', String(reportMs)], { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  let last: { seq: number; window: LlmSummary; totals: LlmSummary } | undefined;
  let seq = 0;
  let err = '';
  child.stderr!.on('data', (b: Buffer) => { err = (err + b.toString()).slice(-2000); });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error(`llm demo did not start within ${startTimeoutMs} ms: ${err}`)); }, startTimeoutMs);
    let buf = '';
    child.stdout!.on('data', (b: Buffer) => {
      buf += b.toString();
      let i: number;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        let m: any;
        try { m = JSON.parse(line); } catch { continue; }
        if (m.type === 'ready') {
          clearTimeout(timer);
          resolve({
            latest: () => last,
            stop: async () => { if (child.exitCode === null) { child.kill('SIGTERM'); await Promise.race([exited, new Promise((r) => setTimeout(r, 8000))]); } },
          });
        } else if (m.type === 'report') last = { seq: ++seq, window: m.window, totals: m.totals };
      }
    });
    child.once('exit', (code) => { clearTimeout(timer); reject(new Error(`llm demo exited (${code}): ${err}`)); });
  });
}

if (require.main === module) {
  const a = process.argv.slice(2);
  const reportMs = a.includes('--report-ms') ? Number(a[a.indexOf('--report-ms') + 1]) : 2000;
  startLlmDemo().then((d) => {
    process.stdout.write(JSON.stringify({ type: 'ready' }) + '\n');
    const t = setInterval(() => process.stdout.write(JSON.stringify({ type: 'report', window: summarize(d.take()), totals: summarize(d.totals()) }) + '\n'), reportMs);
    const bye = () => { clearInterval(t); void d.stop().then(() => process.exit(0)); };
    process.on('SIGTERM', bye);
    process.on('SIGINT', bye);
  }, (e) => { process.stderr.write(`llm demo: ${(e as Error).stack ?? e}\n`); process.exit(1); });
}
