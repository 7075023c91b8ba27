// Shared setup for integration tests: the real compiled filter in the embedded Proxy-Wasm host,
// the real agent (in-process, loopback), the leased-line delay injector and a cloud-B service.
import * as path from 'node:path';
import pino from 'pino';
import { ProxyWasmHost, type ClusterSpec, type Pair } from '../../host/src';
import { startAgent, type AgentHandle } from '../../agent/src';
import { startLeasedLine, type LeasedLine } from '../../sim/leased-line';
import { startCloudService, type CloudService } from '../../sim/cloud-service';

export const ROOT = path.resolve(__dirname, '../..');
export const WASM = path.join(ROOT, 'build/switchyard.wasm');
export const PAYMENT = 'payment-service.prod.svc.cluster.local';

export function pluginConfig(over: Record<string, unknown> = {}, link: Record<string, unknown> = {}): string {
  return JSON.stringify({
    agent: { cluster: 'switchyard_agent', pollMs: 20, longPollMs: 500, timeoutMs: 1500 },
    refreshMs: 10,
    leaseMs: 500,
    link: { stalenessMs: 1000, failMode: 'degraded', services: [{ authorities: [PAYMENT, '*.payments.example'], peer: 'cloud-b' }], ...link },
    ...over,
  });
}

export interface LinkBed {
  line: LeasedLine;
  cloudB: CloudService;
  agent: AgentHandle;
  stop(): Promise<void>;
}

/** cloud-B behind a leased line, probed by a real agent every 100 ms (degrade >= 50, recover < 40 ×10). */
export async function startLinkBed(rttMs = 5): Promise<LinkBed> {
  const cloudB = await startCloudService({ cloud: 'cloud-b', port: 0 });
  const line = await startLeasedLine({ targetPort: cloudB.port, rttMs });
  const agent = await startAgent({
    listen: { host: '127.0.0.1', port: 0 },
    publishIntervalMs: 100,
    link: { peers: [{ name: 'cloud-b', probe: { kind: 'http', url: `http://127.0.0.1:${line.port}/healthz` }, intervalMs: 100, timeoutMs: 1000,
      degradeThresholdMs: 50, degradeAfter: 1, recoverThresholdMs: 40, recoverAfter: 10, initialState: 'normal' }] },
  } as any, { logger: pino({ level: 'silent' }), defaultMetrics: false });
  return {
    line, cloudB, agent,
    stop: async () => { await agent.stop(); await line.close(); await cloudB.close(); },
  };
}

export async function startHost(config: string, agentPort: number | undefined, opts: { workers?: number; clusters?: Record<string, ClusterSpec> } = {}): Promise<ProxyWasmHost> {
  const clusters: Record<string, ClusterSpec> = { ...(opts.clusters ?? {}) };
  if (agentPort !== undefined) clusters.switchyard_agent = { address: '127.0.0.1', port: agentPort };
  return ProxyWasmHost.create({ wasm: WASM, pluginConfig: config, workers: opts.workers ?? 2, clusters, logLevel: 'info' });
}

export function header(pairs: Pair[] | undefined, name: string): string[] {
  return (pairs ?? []).filter(([k]) => k === name).map(([, v]) => v);
}

/** The link status the filter gives a request for `authority` (all values of the header). */
export async function statusFor(host: ProxyWasmHost, authority = PAYMENT, extra: Record<string, string> = {}, worker?: number): Promise<string[]> {
  const r = await host.request({ ':method': 'GET', ':path': '/', ':authority': authority, ':scheme': 'http', ...extra }, { worker });
  if (r.localReply) throw new Error(`unexpected local reply ${r.localReply.status} ${r.localReply.details}`);
  return header(r.upstreamHeaders, 'x-cross-cloud-status');
}

/** The status every worker VM gives (a single value when they agree, e.g. "normal"). */
export async function statusAll(host: ProxyWasmHost, authority = PAYMENT): Promise<string> {
  const all = new Set<string>();
  for (let w = 0; w < host.workers.length; w++) all.add((await statusFor(host, authority, {}, w)).join('|'));
  return [...all].sort().join(' / ');
}

/** A metric after the filter's next tick: request-path counters reach the host on the tick. */
export async function metricAfterTick(host: ProxyWasmHost, name: string): Promise<number> {
  await sleep(50);
  return host.metric(name) ?? 0;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls until `pred` holds; returns the elapsed ms. */
export async function until(pred: () => Promise<boolean> | boolean, timeoutMs: number, what: string, stepMs = 5): Promise<number> {
  const t0 = performance.now();
  for (;;) {
    if (await pred()) return performance.now() - t0;
    if (performance.now() - t0 > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(stepMs);
  }
}

/**
 * The real filter in the embedded host with two worker VMs on a manual clock, one request-aware
 * service `llm` at `authority`, fed `snapshot` by an in-process agent cluster (polled every
 * `refreshMs`); returns once both VMs have adopted it. For the exchanges between worker VMs
 * (in-flight counts, pending prefill, prefix index, adapter marks).
 */
export async function twoWorkerLlmHost(o: { authority: string; t0: number; refreshMs: number; stalenessMs: number; snapshot: Buffer; request?: Record<string, unknown> }): Promise<ProxyWasmHost> {
  const host = await ProxyWasmHost.create({
    wasm: WASM, workers: 2, mainThread: false, canary: false, clock: 'manual', startTimeMs: o.t0,
    allowOnHeadersStopIteration: true,
    pluginConfig: JSON.stringify({
      agent: { cluster: 'switchyard_agent', longPollMs: 0, pollMs: o.refreshMs }, refreshMs: o.refreshMs, leaseMs: 20 * o.refreshMs,
      link: { stalenessMs: o.stalenessMs, services: [] },
      loadAware: { services: [{ authorities: [o.authority], service: 'llm', stalenessMs: o.stalenessMs, debug: true,
        request: { allowOnHeadersStopIteration: true, ...o.request } }] },
    }),
    clusters: { switchyard_agent: { handler: () => ({ status: 200, body: o.snapshot }) } },
  });
  for (let i = 0; i < 8; i++) await host.advance(o.refreshMs);
  if ((host.metric('switchyard.snapshot.updates') ?? 0) < 2) throw new Error('both VMs should have adopted the snapshot');
  return host;
}

/** The agent config both LLM-simulator integration tests start: one vLLM service `llm` over `addrs`, serving llama-3-8b, scraped and published every 100 ms. */
export function llmAgentConfig(addrs: string[]): Record<string, unknown> {
  return {
    listen: { host: '127.0.0.1', port: 0 },
    publishIntervalMs: 100,
    link: { peers: [] },
    inference: { scrapeIntervalMs: 100, services: [{ name: 'llm', kind: 'vllm', instances: { static: addrs }, models: ['llama-3-8b'] }] },
  };
}
