// envoy/envoy.yaml through the embedded Proxy-Wasm host (host/) with the real
// filter build: the bootstrap parses, the filter accepts the packaged plugin
// config, fails to the configured mode without an agent, a client cannot steer
// the ORIGINAL_DST cluster, and, with the real agent scraping simulated
// inference servers (the envoy/agent.yaml fleet on ephemeral ports), requests
// to the load-aware authority reach the instance the filter picked.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { type Obj, contractFacts, p, readJson, readYaml } from './helpers';

const C = contractFacts();
const INFERENCE = C.inferenceAuthority;

interface Seen {
  name: string;
  headers: http.IncomingHttpHeaders;
}

interface Proxy {
  listenPort: number;
  adminPort?: number;
  close(): Promise<void>;
}

function upstream(name: string, seen: Seen[]): Promise<http.Server> {
  const s = http.createServer((req, res) => {
    seen.push({ name, headers: req.headers });
    req.resume();
    res.end(name);
  });
  return new Promise((resolve) => s.listen(0, '127.0.0.1', () => resolve(s)));
}

const port = (s: http.Server): number => (s.address() as AddressInfo).port;

async function closedPort(): Promise<number> {
  const closed = http.createServer();
  await new Promise<void>((r) => closed.listen(0, '127.0.0.1', () => r()));
  const n = port(closed);
  await new Promise<void>((r) => closed.close(() => r()));
  return n;
}

function get(portNo: number, host: string, headers: Record<string, string> = {}, path = '/'):
  Promise<{ status: number; body: string; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: portNo, path, agent: false, headers: { host, ...headers } }, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
    });
    req.on('error', reject);
    req.end();
  });
}

async function startProxy(clusterAddresses: Record<string, unknown>): Promise<Proxy> {
  const wasm = p('build/switchyard.wasm');
  assert.ok(existsSync(wasm), 'build/switchyard.wasm missing: run npm run build:filter first');
  // Path computed at run time: host/ is another component; this test must not
  // break type-checking of the packaging tests when it is absent.
  const { EnvoyProxy } = (await import(p('host/src/index.ts'))) as {
    EnvoyProxy: { start(opts: Record<string, unknown>): Promise<Proxy> };
  };
  return EnvoyProxy.start({
    configPath: p('envoy/envoy.yaml'),
    wasmPath: wasm,
    listenPort: 0,
    listenAddress: '127.0.0.1',
    adminPort: 0,
    clusterAddresses,
    workers: 1,
    logLevel: 'error',
  });
}

const closeServer = (s: http.Server): Promise<void> => new Promise((r) => s.close(() => r()));

test('embedded host runs envoy/envoy.yaml with the real filter (no agent: fail modes)', async () => {
  const seen: Seen[] = [];
  const a = await upstream('cloud-a', seen);
  const b = await upstream('cloud-b', seen);
  const inf = await upstream('inference-default', seen);
  const trap = await upstream('trap', seen); // what a spoofed endpoint header would reach
  let proxy: Proxy | undefined;
  try {
    proxy = await startProxy({
      cloud_a: { address: '127.0.0.1', port: port(a) },
      cloud_b: { address: '127.0.0.1', port: port(b) },
      [C.inferenceDefaultCluster]: { address: '127.0.0.1', port: port(inf) },
      switchyard_agent: { address: '127.0.0.1', port: await closedPort() },
    });
    // Without a snapshot the filter must use link.failMode = degraded -> cloud_a only,
    // overwriting whatever the client claimed.
    for (let i = 0; i < 10; i++) {
      const r = await get(proxy.listenPort, C.demoAuthority, { [C.statusHeader]: 'normal' });
      assert.equal(r.status, 200);
      assert.equal(r.body, 'cloud-a');
    }
    assert.ok(seen.every((s) => s.headers[C.statusHeader] === 'degraded'), 'upstream sees the filter decision');
    // Authority forms the filter may not recognise reach the same virtual host (":*" domain);
    // whatever status they carry (none, or the client's), the fail-safe default route keeps them local.
    for (const host of [`${C.demoAuthority}:80:80`, `${C.demoAuthority}:a:b`]) {
      for (let i = 0; i < 10; i++) {
        const r = await get(proxy.listenPort, host, { [C.statusHeader]: 'normal' });
        assert.equal(r.status, 200);
        assert.equal(r.body, 'cloud-a', `Host: ${host}`);
      }
    }
    seen.length = 0;
    // Load-aware authority without a snapshot: no instance is eligible, allIneligible is
    // forward-degraded -> the filter removes the client's endpoint and marker, sets
    // x-degraded: true, and the route table sends it to inference_default. The spoofed
    // ORIGINAL_DST target is never contacted.
    seen.length = 0;
    const spoof = await get(proxy.listenPort, INFERENCE, {
      [C.endpointHeader]: `127.0.0.1:${port(trap)}`,
      [C.degradedHeader]: 'false',
    });
    assert.equal(spoof.status, 200);
    assert.equal(spoof.body, 'inference-default');
    assert.ok(!seen.some((s) => s.name === 'trap'), 'spoofed endpoint was not contacted');
    assert.equal(seen.length, 1);
    assert.equal(seen[0].headers[C.degradedHeader], 'true', 'the filter marked the request');
    assert.equal(seen[0].headers[C.endpointHeader], undefined, 'no endpoint header upstream');
    // debug: true in the rig config -> the reason is in the response.
    assert.match(String(spoof.headers[C.debugHeader]), /^none eligible: 0 instances$/);
    // Another authority: the client's endpoint header is stripped too (no ORIGINAL_DST anywhere).
    seen.length = 0;
    const other = await get(proxy.listenPort, C.demoAuthority, { [C.endpointHeader]: `127.0.0.1:${port(trap)}` });
    assert.equal(other.status, 200);
    assert.equal(seen[0].headers[C.endpointHeader], undefined);
  } finally {
    await proxy?.close();
    for (const s of [a, b, inf, trap]) await closeServer(s);
  }
});

interface SimHandle {
  addr: string;
  port: number;
  stop(): Promise<void>;
}

test('load-aware choice end to end: agent scrapes the fleet, the filter picks, ORIGINAL_DST delivers', async () => {
  // The fleet of envoy/agent.yaml on ephemeral ports: contract address -> simulator.
  const agentYaml = readYaml('envoy/agent.yaml');
  const { startInferenceServer } = (await import(p('sim/inference-server.ts'))) as {
    startInferenceServer(o: Record<string, unknown>): Promise<SimHandle>;
  };
  const { startAgent } = (await import(p('agent/src/index.ts'))) as {
    startAgent(cfg: unknown, o: Record<string, unknown>): Promise<{ port: number; stop(): Promise<void> }>;
  };
  const pino = ((await import('pino')) as unknown as { default: (o: Obj) => unknown }).default;
  const sims = new Map<string, SimHandle & { name: string }>();
  const speeds = [...C.fleet.speeds, 1];
  let n = 0;
  for (const i of C.fleet.instances) {
    const name = `sim-${i.peer || 'local'}-${n}`;
    const h = await startInferenceServer({ port: 0, kind: 'vllm', concurrency: 4, dist: { kind: 'fixed', meanMs: 5 }, speed: speeds[n], seed: n + 1, name });
    sims.set(i.addr, { ...h, name });
    n++;
  }
  const mapAddr = (a: string): string => sims.get(a)!.addr;
  const cfg = structuredClone(agentYaml);
  cfg.listen = { host: '127.0.0.1', port: 0 };
  cfg.log = { level: 'silent' };
  // The link to cloud-b stays degraded (probe to a closed port): the remote instance must be
  // skipped (reason link_degraded) and never chosen.
  cfg.link.peers[0].probe.url = `http://127.0.0.1:${await closedPort()}/healthz`;
  cfg.inference.scrapeIntervalMs = 100; // the rig's 500 ms, sped up for the test
  for (const s of cfg.inference.services) s.instances.static = s.instances.static.map(mapAddr);
  const remoteAddr = mapAddr(C.fleet.instances.find((i) => i.peer !== '')!.addr);
  const localAddrs = C.fleet.instances.filter((i) => i.peer === '').map((i) => mapAddr(i.addr));

  const seen: Seen[] = [];
  const a = await upstream('cloud-a', seen);
  let agent: { port: number; stop(): Promise<void> } | undefined;
  let proxy: Proxy | undefined;
  try {
    agent = await startAgent(cfg, { logger: pino({ level: 'silent' }), defaultMetrics: false });
    proxy = await startProxy({
      cloud_a: { address: '127.0.0.1', port: port(a) },
      cloud_b: { address: '127.0.0.1', port: port(a) },
      [C.inferenceDefaultCluster]: localAddrs.map((x) => ({ address: '127.0.0.1', port: Number(x.split(':')[1]) })),
      switchyard_agent: { address: '127.0.0.1', port: agent.port },
    });
    // Until the agent has two good scrapes per instance nothing is eligible (forward-degraded).
    const deadline = Date.now() + 15000;
    let r = await get(proxy.listenPort, INFERENCE);
    while (!String(r.headers[C.debugHeader] ?? '').startsWith('instance=') && Date.now() < deadline) {
      await new Promise((res) => setTimeout(res, 50));
      r = await get(proxy.listenPort, INFERENCE);
    }
    assert.match(String(r.headers[C.debugHeader]), /^instance=/, 'the filter started placing requests');
    const chosen = new Set<string>();
    for (let i = 0; i < 30; i++) {
      r = await get(proxy.listenPort, INFERENCE, { [C.endpointHeader]: remoteAddr });
      assert.equal(r.status, 200);
      const m = /^instance=(\S+) /.exec(String(r.headers[C.debugHeader]));
      assert.ok(m, `debug header: ${r.headers[C.debugHeader]}`);
      const addr = m[1];
      assert.ok(localAddrs.includes(addr), `picked ${addr}: a local instance (the remote one is behind a degraded link)`);
      // ORIGINAL_DST delivered to exactly the instance the filter named.
      const served = JSON.parse(r.body).instance;
      const sim = [...sims.values()].find((x) => x.addr === addr)!;
      assert.equal(served, sim.name, 'served by the picked instance');
      chosen.add(addr);
    }
    assert.ok(chosen.size >= 1);
    // Metrics under the names docs/operations.md and the dashboard use. Request-path
    // counters reach Envoy's stats on the filter's next tick (refreshMs): wait a few.
    await new Promise((res) => setTimeout(res, 200));
    const stats = (await get(proxy.adminPort!, 'admin', {}, '/stats/prometheus')).body;
    const value = (name: string): number => Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(stats)?.[1] ?? NaN);
    // one choice counter per service (Envoy never frees a stat; instances churn)
    const choiceMetric = `switchyard_lb_choice_${C.fleet.service.replace(/[^a-zA-Z0-9]/g, '_')}`;
    assert.ok(value(choiceMetric) >= chosen.size, `${choiceMetric} counted`);
    // (Until its second scrape the remote instance is skipped as unhealthy, then as link_degraded.)
    assert.ok(value('switchyard_lb_skip_link_degraded') > 0, 'remote instance skipped for the degraded link');
    assert.ok(value('switchyard_lb_all_ineligible') >= 1, 'the requests before the first scrapes were all-ineligible');
  } finally {
    await proxy?.close();
    await agent?.stop();
    for (const s of sims.values()) await s.stop();
    await closeServer(a);
  }
});

test('the end-to-end test uses the rig configs as shipped (no drift hidden by the test set-up)', () => {
  // The live test above rewrites only addresses, log level and the scrape interval of
  // envoy/agent.yaml; everything the filter decides with comes from the shipped files.
  const plugin = readJson('envoy/plugin-config.json');
  assert.equal(plugin.loadAware.services[0].debug, true, 'the live test reads the debug header');
  assert.equal(plugin.loadAware.services[0].allIneligible, 'forward-degraded');
  const agentYaml = readYaml('envoy/agent.yaml');
  assert.equal(agentYaml.link.peers[0].initialState, 'degraded', 'a link that never recovers stays degraded');
});
