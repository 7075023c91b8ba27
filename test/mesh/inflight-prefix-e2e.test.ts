// Prefix placements across proxies end to end (docs/mesh.md "Prefix placements"): a real NATS
// server and a real etcd on random loopback ports, two vLLM simulators, two collector agents A and
// B (shipped defaults: the leader exchange), each serving the real filter in the embedded host
// with a request-aware service. A prompt routed by A's filter reaches B's filter's prefix index
// through A's version-2 report, A's agent, NATS (A -> the pool leader -> every agent), B's agent and
// B's answer: B's first request of that prompt goes to the same instance as a prefix hit.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { startAgent, type AgentHandle } from '../../agent/src';
import { ProxyWasmHost, type RequestResult } from '../../host/src';
import { header, until, WASM } from '../integration/helpers';
import { inflightAgentConfig, releaseAndStop } from './inflight-rig';
import { startCountedInstance, startMeshEtcd, startNats, type CountedInstance, type NatsServer } from './servers';
import type { EtcdServer } from '../rules/etcd-server';

const AUTH = 'inference.example';
let etcd: EtcdServer;
let nats: NatsServer;
let insts: CountedInstance[];
const agents: AgentHandle[] = [];
const hosts: ProxyWasmHost[] = [];
const log = pino({ level: 'silent' });

before(async () => {
  [etcd, nats] = await Promise.all([startMeshEtcd(), startNats()]);
  insts = await Promise.all([1, 2].map((s) => startCountedInstance(s)));
  for (let i = 0; i < 2; i++) agents.push(await startAgent(inflightAgentConfig(insts, nats, etcd, 'collector') as never, { logger: log, defaultMetrics: false }));
  for (const a of agents) {
    hosts.push(await ProxyWasmHost.create({
      wasm: WASM, workers: 1, allowOnHeadersStopIteration: true, logLevel: 'warn',
      pluginConfig: JSON.stringify({
        agent: { cluster: 'switchyard_agent', pollMs: 20, longPollMs: 500, timeoutMs: 1500 }, refreshMs: 10, leaseMs: 500,
        link: { stalenessMs: 1000, failMode: 'degraded', services: [] },
        loadAware: { services: [{ authorities: [AUTH], service: 'llm', debug: true, request: { allowOnHeadersStopIteration: true } }] },
      }),
      clusters: { switchyard_agent: { address: '127.0.0.1', port: a.port } },
    }));
  }
});

after(() => releaseAndStop({ held: [], hosts, agents, insts, nats, etcd }));

const chat = (h: ProxyWasmHost, system: string, user: string): Promise<RequestResult> =>
  h.request({ ':method': 'POST', ':path': '/v1/chat/completions', ':authority': AUTH, ':scheme': 'http', 'content-type': 'application/json' },
    { body: JSON.stringify({ model: 'llama', messages: [{ role: 'system', content: system }, { role: 'user', content: user }], max_tokens: 16 }) });
const endpoint = (r: RequestResult): string | undefined => header(r.upstreamHeaders, 'x-switchyard-endpoint')[0];
const cached = (r: RequestResult): number => Number(/cached_blocks=(\d+)/.exec(header(r.responseHeaders, 'x-switchyard-debug')[0] ?? '')?.[1] ?? -1);

test('a prompt routed by one agent\'s filter is a prefix hit at the same instance in the other agent\'s filter, over NATS', async () => {
  const [hA, hB] = hosts;
  // both filters route request-aware (the snapshot with the LLM section adopted), both report
  await until(async () => {
    for (const h of hosts) if (endpoint(await chat(h, 'warm-up', 'q')) === undefined) return false;
    return agents.every((a) => (a.inflight?.proxyCount ?? 0) === 1);
  }, 20_000, 'both filters routing and reporting');
  for (let k = 0; k < 3; k++) {
    const system = `Family ${k}: you are a careful assistant for the Switchyard suite; cite the documents. `.repeat(40);
    const before = hB.metric('switchyard.mesh.prefix_learned') ?? 0;
    const first = await chat(hA, system, 'first question');
    assert.equal(cached(first), 0, `family ${k} is new to A`);
    const x = endpoint(first);
    assert.ok(x, 'A routed it');
    // B's filter learns the placement (no request of this family has reached B): both of its VMs
    // (the main-thread VM that reports, and the worker that routes, which adopts on its tick).
    // Only the placement's checkpoints and its last block cross (about 1 block in 8, round 9b:
    // docs/benchmarks/mesh-r9b.md), so at least the last block per VM, not one record per block.
    // A's worker VM places it, A's reporting VM forwards it, B's VMs apply it on different ticks:
    // wait for at least the last block per VM, then until no VM applies more for 300 ms
    let seen = -1;
    let since = 0;
    await until(() => {
      const n = hB.metric('switchyard.mesh.prefix_learned') ?? 0;
      if (n !== seen) { seen = n; since = performance.now(); }
      return n >= before + 2 && performance.now() - since >= 300;
    }, 5_000, `B learns family ${k}`);
    const second = await chat(hB, system, 'another question');
    assert.equal(endpoint(second), x, `family ${k}: B routed elsewhere (${header(second.responseHeaders, 'x-switchyard-debug')[0]})`);
    // credited up to the longest checkpoint inside the shared system prompt (~54 blocks): 38, 43
    // and 50 for these three (a checkpoint is 1 block in 8 by its hash; round 9 sent every block: >= 40)
    assert.ok(cached(second) >= 30, `family ${k}: B saw ${cached(second)} cached blocks`);
  }
});
