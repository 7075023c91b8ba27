// What the mesh in-flight tests (inflight-mesh.test.ts: exchange `all`; inflight-leader.test.ts:
// the shipped `leader`) share: the agent config over the real etcd and NATS, a filter's price of
// one instance read from its debug header, an agent's scrape time of it, requests held open in a
// filter, and the teardown that releases them before stopping everything.
import assert from 'node:assert/strict';
import type { AgentHandle } from '../../agent/src';
import { HeaderMap, type HttpStream, type ProxyWasmHost } from '../../host/src';
import { header, until } from '../integration/helpers';
import type { CountedInstance, NatsServer } from './servers';
import type { EtcdServer } from '../rules/etcd-server';

export const AUTH = 'inference.example';
export const SUBSET = 'x-gateway-destination-endpoint-subset';

/** An agent of `mode` serving the two simulators' pool `llm`; a collector also joins the election. */
export function inflightAgentConfig(insts: CountedInstance[], nats: NatsServer, etcd: EtcdServer, mode: 'collector' | 'subscriber', extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    listen: { host: '127.0.0.1', port: 0 },
    link: { peers: [] },
    inference: { services: [{ name: 'llm', kind: 'vllm', fetchModels: false, models: ['llama'], instances: { static: insts.map((i) => i.addr) } }] },
    mesh: { mode, nats: { servers: [nats.url] }, ...(mode === 'collector' ? { etcd: { endpoints: [etcd.clientUrl] } } : {}) },
    ...extra,
  };
}

/** A filter's price of `addr` (the debug header's w_ms of a request restricted to it). */
export async function priceAt(h: ProxyWasmHost, addr: string): Promise<number> {
  const r = await h.request({ ':method': 'POST', ':path': '/v1/completions', ':authority': AUTH, ':scheme': 'http', [SUBSET]: addr });
  assert.equal(r.localReply, undefined);
  assert.equal(header(r.upstreamHeaders, 'x-switchyard-endpoint')[0], addr);
  const d = header(r.responseHeaders, 'x-switchyard-debug')[0] ?? '';
  const m = / w_ms=([0-9.]+) /.exec(d);
  assert.ok(m, `debug header: ${d}`);
  return Number(m[1]);
}

/** The scrape time of `addr` in an agent's current snapshot (NaN: not in it). */
export function scrapeAt(a: AgentHandle, addr: string): number {
  const s = a.snapshot().snapshot;
  const r = (s.instances ?? []).find((x) => x.addr === addr);
  return r ? Number(s.generatedAtMs) - r.dataAgeMs : NaN;
}

/**
 * Holds `n` requests restricted to `addr` in filter `from` right after `a` published a new scrape
 * of it, and polls `to`'s price of `addr` until it reaches `target` -- which must happen before `a`
 * holds the next scrape: the held requests never reach the simulator, so a new scrape rebases the
 * backlog and the rise could no longer be told from the exchange (the bound is the scrape
 * interval, not a wall-clock window that a loaded machine stretches). A window that closed first
 * (every suite in parallel on two cores once stretched the exchange past it) is retried with fresh
 * requests, the first ones answered, at most `attempts` times: an exchange that does not carry
 * the sums fails every attempt. Returns the price seen, the ms it took and the attempts used.
 */
export async function riseWithinAScrape(o: { from: ProxyWasmHost; to: ProxyWasmHost; a: AgentHandle; addr: string; n: number; held: HttpStream[]; target: number; what: string; attempts?: number }): Promise<{ seen: number; ms: number; attempts: number }> {
  const attempts = o.attempts ?? 3;
  const misses: string[] = [];
  for (let k = 1; k <= attempts; k++) {
    const s0 = scrapeAt(o.a, o.addr);
    await until(() => newScrape(o.a, o.addr, s0), 10_000, `a new scrape of ${o.addr}`);
    const s1 = scrapeAt(o.a, o.addr);
    const mine: HttpStream[] = [];
    hold(o.from, o.addr, o.n, mine, `${o.what}: a held request went to ${o.addr}`);
    const t0 = performance.now();
    for (;;) {
      const seen = await priceAt(o.to, o.addr);
      if (seen >= o.target) {
        o.held.push(...mine);
        return { seen, ms: performance.now() - t0, attempts: k };
      }
      if (newScrape(o.a, o.addr, s1)) { misses.push(`attempt ${k}: price ${seen} when the next scrape came`); break; }
      if (performance.now() - t0 > 10_000) throw new Error(`timed out waiting for ${o.what}`);
      await new Promise((r) => setTimeout(r, 5));
    }
    answer(mine);
    // the answered requests leave the other filter's price before the next attempt's window (else
    // that window would start from this one's rise)
    await until(async () => (await priceAt(o.to, o.addr)) < o.target, 5000, `${o.what}: the answered requests leaving the price`, 20);
  }
  assert.fail(`${o.what}: a new scrape of ${o.addr} came first in each of ${attempts} windows (${misses.join('; ')}; expected >= ${o.target})`);
}

/** Whether `a` holds a newer scrape of `addr` than the one taken at `scrape0`. A republication of
 * the same scrape dates it within a few ms (generatedAtMs − dataAgeMs, each rounded); scrapes are
 * a second apart. */
export function newScrape(a: AgentHandle, addr: string, scrape0: number): boolean {
  return Math.abs(scrapeAt(a, addr) - scrape0) > 100;
}

/** Opens `n` requests restricted to `addr` in filter `h` and keeps them in flight (into `held`). */
export function hold(h: ProxyWasmHost, addr: string, n: number, held: HttpStream[], what = 'a held request went to its instance'): void {
  for (let i = 0; i < n; i++) {
    const hdrs = new HeaderMap('request', [[':method', 'POST'], [':path', '/v1/completions'], [':authority', AUTH], [':scheme', 'http'], [SUBSET, addr]]);
    let chosen: string | undefined;
    const { stream } = h.startStream(hdrs, null, true, { headers() {}, data() {}, reset() {} }, { send: (_s, hh) => { chosen = hh.get('x-switchyard-endpoint'); } }, undefined, () => {});
    assert.equal(chosen, addr, what);
    held.push(stream);
  }
}

/** Answers each held request still open (200, empty). */
function answer(held: HttpStream[]): void {
  for (const s of held) if (!s.done) s.onUpstreamHeaders(new HeaderMap('response', [[':status', '200'], ['content-length', '0']]), true);
}

/** Answers every held request, then stops hosts, agents, simulators, NATS and etcd. */
export async function releaseAndStop(r: { held: HttpStream[]; hosts: ProxyWasmHost[]; agents: AgentHandle[]; insts?: CountedInstance[]; nats?: NatsServer; etcd?: EtcdServer }): Promise<void> {
  answer(r.held);
  for (const h of r.hosts) await h.close();
  for (const a of r.agents) await a.stop();
  for (const i of r.insts ?? []) await i.stop();
  await r.nats?.dispose();
  await r.etcd?.dispose();
}
