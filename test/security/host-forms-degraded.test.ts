// Issue 11 #1 end to end: envoy/envoy.yaml as shipped in the embedded host's HTTP mode, the real
// filter and the real agent probing the other cloud. While the link is normal the split crosses
// (so the test can see a crossing); once the agent has degraded it, no Host form a client can
// send — port tricks, case, trailing dot, Istio short names, a spoofed "normal" — crosses.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { EnvoyProxy } from '../../host/src';
import { startAgent } from '../../agent/src';
import { contractFacts, p } from '../packaging/helpers';

const C = contractFacts();

interface Seen { name: string; status: string | undefined }

function server(handler: http.RequestListener): Promise<http.Server> {
  const s = http.createServer(handler);
  return new Promise((resolve) => s.listen(0, '127.0.0.1', () => resolve(s)));
}
const port = (s: http.Server): number => (s.address() as AddressInfo).port;
const close = (s: http.Server): Promise<void> => new Promise((r) => { s.closeAllConnections(); s.close(() => r()); });

function get(portNo: number, host: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: portNo, path: '/', agent: false, headers: { host, ...headers } }, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

test('issue 11 #1: with the link degraded by the real agent, no Host form crosses envoy/envoy.yaml\'s degraded line', async () => {
  const seen: Seen[] = [];
  const upstream = (name: string) => server((req, res) => { seen.push({ name, status: req.headers[C.statusHeader] as string | undefined }); req.resume(); res.end(name); });
  const a = await upstream('cloud-a');
  const b = await upstream('cloud-b');
  let healthy = true; // what the probed health endpoint of cloud B answers
  const probe = await server((_req, res) => { res.statusCode = healthy ? 200 : 503; res.end(); });
  const agent = await startAgent({
    listen: { host: '127.0.0.1', port: 0 }, publishIntervalMs: 100,
    link: { peers: [{ name: C.peer, probe: { kind: 'http', url: `http://127.0.0.1:${port(probe)}/healthz` }, intervalMs: 50, timeoutMs: 1000,
      degradeThresholdMs: 500, degradeAfter: 1, recoverThresholdMs: 400, recoverAfter: 2, initialState: 'normal' }] },
  } as never, { logger: pino({ level: 'silent' }), defaultMetrics: false });
  let proxy: { listenPort: number; close(): Promise<void> } | undefined;
  try {
    proxy = await EnvoyProxy.start({
      configPath: p('envoy/envoy.yaml'), wasmPath: p('build/switchyard.wasm'), listenPort: 0, listenAddress: '127.0.0.1', adminPort: 0, workers: 2,
      logLevel: 'error',
      clusterAddresses: { cloud_a: { address: '127.0.0.1', port: port(a) }, cloud_b: { address: '127.0.0.1', port: port(b) },
        [C.agentCluster]: { address: '127.0.0.1', port: agent.port }, [C.inferenceDefaultCluster]: { address: '127.0.0.1', port: port(a) } },
    } as never);
    const listen = proxy.listenPort;
    const until = async (pred: () => Promise<boolean>, what: string) => {
      const t0 = Date.now();
      while (!(await pred())) {
        if (Date.now() - t0 > 10_000) throw new Error(`timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    };
    // Link normal: the filter writes "normal" and the 50/50 split reaches cloud B.
    await until(async () => { await get(listen, C.demoAuthority); return seen.at(-1)?.status === 'normal'; }, 'the filter to write normal');
    seen.length = 0;
    for (let i = 0; i < 30; i++) await get(listen, C.demoAuthority);
    assert.ok(seen.some((s) => s.name === 'cloud-b'), 'with the link normal the split crosses (the rig can cross)');

    // The probe fails: the agent degrades the link, the filter writes "degraded" on every worker.
    healthy = false;
    let streak = 0;
    await until(async () => { await get(listen, C.demoAuthority); streak = seen.at(-1)?.status === 'degraded' ? streak + 1 : 0; return streak >= 6; }, 'the filter to write degraded');
    seen.length = 0;
    const svc = C.demoAuthority.split('.')[0];
    const ns = C.demoAuthority.split('.')[1];
    const forms = [C.demoAuthority, `${C.demoAuthority}:80`, `${C.demoAuthority}:80:80`, `${C.demoAuthority}:a:b`, `${C.demoAuthority}:`,
      C.demoAuthority.toUpperCase(), `${C.demoAuthority}.`, `${C.demoAuthority}.:80`, `${C.demoAuthority.toUpperCase()}:8080:1`,
      `${svc}.${ns}`, `${svc}.${ns}:80`, `${svc}.${ns}.svc`, `${svc}.${ns}.svc.cluster`, svc, `${svc}:80`];
    const outcomes = new Map<string, Set<string>>();
    for (const host of forms) {
      for (let i = 0; i < 8; i++) {
        for (const spoof of [{}, { [C.statusHeader]: 'normal' }, { [C.statusHeader]: 'Normal' }]) {
          const before = seen.length;
          const r = await get(listen, host, spoof);
          assert.notEqual(r.body, 'cloud-b', `Host: ${host} ${JSON.stringify(spoof)} crossed the degraded line`);
          const got = seen.length > before ? `${seen.at(-1)!.name} status=${seen.at(-1)!.status}` : `${r.status}`;
          if (!outcomes.has(host)) outcomes.set(host, new Set());
          outcomes.get(host)!.add(got);
        }
      }
    }
    assert.ok(!seen.some((s) => s.name === 'cloud-b'));
    assert.ok(seen.every((s) => s.status !== 'normal'), 'no request upstream carried "normal"');
    // Every form either reaches cloud A with the filter's "degraded" or no virtual host at all
    // (404: Envoy's `host:*` needs at least one character after the colon; the short names are
    // not in envoy.yaml's domains) — never cloud A without the status, never cloud B.
    for (const host of forms) {
      const got = [...outcomes.get(host)!];
      assert.equal(got.length, 1, `${host}: ${got}`);
      assert.ok(got[0] === 'cloud-a status=degraded' || got[0] === '404', `${host}: ${got}`);
    }
    const routed = forms.filter((h) => outcomes.get(h)!.has('cloud-a status=degraded'));
    for (const host of [C.demoAuthority, `${C.demoAuthority}:80`, `${C.demoAuthority}:80:80`, `${C.demoAuthority}:a:b`, C.demoAuthority.toUpperCase()]) {
      assert.ok(routed.includes(host), `${host} reaches the service (${[...outcomes.get(host)!]})`);
    }
  } finally {
    await proxy?.close();
    await agent.stop();
    for (const s of [a, b, probe]) await close(s);
  }
});
