// Mesh-wide in-flight end to end, inflight.exchange `all` (docs/mesh.md "Mesh-wide in-flight"): a real NATS server and a
// real etcd on random loopback ports, two vLLM simulators, two collector agents A and B (shipped
// defaults: scrape 1 s, inflight.*), each serving the real filter in the embedded host (shipped
// loadAware.meshReportMs). Requests held open in A's filter (in flight to instance X) reach B's
// filter's price of X through A's report, A's agent, NATS, B's agent and B's report's answer --
// within a few ticks, before the next scrape -- and A's sums expire at B's agent once A's agent
// is gone (a crash: no goodbye, the expiry of inflight.agentExpireMs).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { startAgent, type AgentHandle } from '../../agent/src';
import type { HttpStream, ProxyWasmHost } from '../../host/src';
import { header, pluginConfig, sleep, startHost, until } from '../integration/helpers';
import { AUTH, inflightAgentConfig, priceAt, releaseAndStop, riseWithinAScrape, SUBSET } from './inflight-rig';
import { startCountedInstance, startMeshEtcd, startNats, type CountedInstance, type NatsServer } from './servers';
import type { EtcdServer } from '../rules/etcd-server';

const HELD = 5;
let etcd: EtcdServer;
let nats: NatsServer;
let insts: CountedInstance[];
const agents: AgentHandle[] = [];
const hosts: ProxyWasmHost[] = [];
const held: HttpStream[] = [];
const log = pino({ level: 'silent' });
// the all-to-all exchange (every agent hears every other's sums); the shipped leader mode is
// test/mesh/inflight-leader.test.ts
const ALL_TO_ALL = { inflight: { exchange: 'all' } };

before(async () => {
  [etcd, nats] = await Promise.all([startMeshEtcd(), startNats()]);
  insts = await Promise.all([1, 2].map((s) => startCountedInstance(s)));
  // A 2.5 s scrape (shipped: 1 s) widens only the window the rise is observed in: the held
  // requests never reach the simulator, so the next scrape ends the observation. The exchange's
  // own path (20 ms ticks, 50 ms reports, NATS) takes ~100 ms; with every suite running in
  // parallel on two cores it once took longer than a 1 s window.
  for (let i = 0; i < 2; i++) {
    const cfg = inflightAgentConfig(insts, nats, etcd, 'collector', ALL_TO_ALL);
    (cfg.inference as Record<string, unknown>).scrapeIntervalMs = 2500;
    (cfg.mesh as Record<string, unknown>).fallbackAfterMs = 6000; // the config requires > 2 scrapes
    agents.push(await startAgent(cfg as never, { logger: log, defaultMetrics: false }));
  }
  for (const a of agents) {
    hosts.push(await startHost(pluginConfig({ loadAware: { services: [{ authorities: [AUTH], service: 'llm', debug: true, gatewaySubset: true }] } }, { services: [] }), a.port, { workers: 1 }));
  }
});

after(() => releaseAndStop({ held, hosts, agents, insts, nats, etcd }));

test('in-flight held in one agent\'s filter reaches the other agent\'s filter\'s price within ticks, and expires when that agent is gone', async (t) => {
  const [hA, hB] = hosts;
  const [aA, aB] = agents;
  const x = insts[0].addr;
  // both filters route to x (its first scrape is in both agents' snapshots: until then x is not
  // eligible and a request restricted to it is refused), and both report to their agents
  // (shipped loadAware.meshReportMs)
  await until(async () => {
    for (const h of hosts) {
      const r = await h.request({ ':method': 'POST', ':path': '/v1/completions', ':authority': AUTH, ':scheme': 'http', [SUBSET]: x });
      if (header(r.upstreamHeaders, 'x-switchyard-endpoint')[0] !== x) return false;
    }
    return agents.every((a) => (a.inflight?.proxyCount ?? 0) === 1);
  }, 20_000, 'both filters routing and reporting');
  const base = await priceAt(hB, x);
  assert.ok(base > 0, `B's price of an idle instance: ${base}`);
  const perRequest = base; // E[S]/c: the estimator's prior for an idle instance, one slot (E[S] = w at backlog 0)

  // right after B's agent published a new scrape of x (the window until the next one is 2.5 s here)
  // A reports 5 to agent A; A's sums go on NATS; B's agent adds them to the answer B's filter gets
  const { seen, ms, attempts } = await riseWithinAScrape({ from: hA, to: hB, a: aB, addr: x, n: HELD, held, target: base + (HELD - 0.5) * perRequest, what: `B's price of x to rise by ${HELD} requests (from ${base})` });
  t.diagnostic(`remote in-flight reached B's price ${ms.toFixed(0)} ms after the sends (window ${attempts}): w ${base} -> ${seen}`);
  // what travelled: A's agent holds its filter's report; B's agent holds A's sums from NATS
  assert.deepEqual(Object.fromEntries(aA.inflight!.localTotals()), { [x]: HELD });
  assert.equal(aB.inflight!.agentCount, 1, 'B\'s agent holds agent A\'s sums (one pool)');
  assert.equal(aA.inflight!.agentCount, 0, 'agent A ignores its own messages (B has nothing in flight)');
  const text = await (await fetch(`${aB.url}/metrics`)).text();
  assert.match(text, /switchyard_inflight_exchange_messages_total\{direction="received",result="ok"\} [1-9]/);

  // agent A crashes (no goodbye): B's agent drops A's sums after inflight.agentExpireMs (1 s)
  const t1 = performance.now();
  await aA.mesh!.crash();
  const gone = await until(() => aB.inflight!.agentCount === 0, 3000, 'A\'s sums expired at B\'s agent');
  t.diagnostic(`agent A's sums expired at B's agent ${(performance.now() - t1).toFixed(0)} ms after the crash (${gone.toFixed(0)} ms polled)`);
  assert.ok(performance.now() - t1 >= 600, 'not before agentExpireMs (1 s) less the keepalive period (1 s / 3)');
  // and B's filter prices x as without A's requests again (its answers no longer carry them)
  await until(async () => (await priceAt(hB, x)) <= base + 0.5 * perRequest, 3000, 'B\'s price of x back to its own view');
  await sleep(10);
});
