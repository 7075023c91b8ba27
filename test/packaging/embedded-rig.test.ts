// envoy/envoy.yaml through the embedded Proxy-Wasm host (host/) with the real
// filter build: the bootstrap parses, the filter accepts the packaged plugin
// config, fails to the configured mode without an agent, and a client cannot
// steer the ORIGINAL_DST cluster. Skipped when build/switchyard.wasm or host/
// is not there yet.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { p } from './helpers';

interface Seen {
  name: string;
  headers: http.IncomingHttpHeaders;
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

function get(portNo: number, host: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: portNo, path: '/', headers: { host, ...headers } }, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

test('embedded host runs envoy/envoy.yaml with the real filter', async (t) => {
  const wasm = p('build/switchyard.wasm');
  assert.ok(existsSync(wasm), 'build/switchyard.wasm missing: run npm run build first');
  // Path computed at run time: host/ is another component; this test must not
  // break type-checking of the packaging tests when it is absent.
  const hostModule = p('host/src/index.ts');
  const { EnvoyProxy } = (await import(hostModule)) as {
    EnvoyProxy: { start(opts: Record<string, unknown>): Promise<{ listenPort: number; close(): Promise<void> }> };
  };
  const seen: Seen[] = [];
  const a = await upstream('cloud-a', seen);
  const b = await upstream('cloud-b', seen);
  const trap = await upstream('trap', seen); // what a spoofed endpoint header would reach
  // No agent: point the agent cluster at a closed port.
  const closed = http.createServer();
  await new Promise<void>((r) => closed.listen(0, '127.0.0.1', () => r()));
  const deadPort = port(closed);
  await new Promise<void>((r) => closed.close(() => r()));
  let proxy: { listenPort: number; close(): Promise<void> } | undefined;
  try {
    proxy = await EnvoyProxy.start({
      configPath: p('envoy/envoy.yaml'),
      wasmPath: wasm,
      listenPort: 0,
      listenAddress: '127.0.0.1',
      adminPort: 0,
      clusterAddresses: {
        cloud_a: { address: '127.0.0.1', port: port(a) },
        cloud_b: { address: '127.0.0.1', port: port(b) },
        switchyard_agent: { address: '127.0.0.1', port: deadPort },
      },
      workers: 1,
      logLevel: 'error',
    });
    // Without a snapshot the filter must use link.failMode = degraded -> cloud_a only,
    // overwriting whatever the client claimed.
    for (let i = 0; i < 10; i++) {
      const r = await get(proxy.listenPort, 'payment-service.prod.svc.cluster.local', { 'x-cross-cloud-status': 'normal' });
      assert.equal(r.status, 200);
      assert.equal(r.body, 'cloud-a');
    }
    assert.ok(seen.every((s) => s.headers['x-cross-cloud-status'] === 'degraded'), 'upstream sees the filter decision');
    // A client-sent endpoint header never reaches ORIGINAL_DST: the filter strips it,
    // the route requires it, so Envoy answers 404 instead of connecting to the trap.
    const spoof = await get(proxy.listenPort, 'inference.prod.svc.cluster.local', { 'x-switchyard-endpoint': `127.0.0.1:${port(trap)}` });
    assert.equal(spoof.status, 404);
    assert.ok(!seen.some((s) => s.name === 'trap'), 'spoofed endpoint was not contacted');
  } finally {
    await proxy?.close();
    for (const s of [a, b, trap]) await new Promise<void>((r) => s.close(() => r()));
  }
});
