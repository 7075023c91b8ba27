// Rule decisions end to end (issue 8): real agent (probes of simulated cloud services, flags
// through its authenticated admin API, the RULES section of its snapshot) -> real filter in the
// embedded host (2 worker VMs) -> the routes of envoy/envoy.yaml as the host matches them.
// Every seed scenario, the 5 % canary split measured over 10,000 requests, maintenance as a
// local reply, client-sent route headers overwritten or stripped, and an override set through
// agent 1 reaching agent 2 and its filter through a real etcd.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { HeaderMap, loadEnvoyConfig, matchRoute, type ProxyWasmHost, type RequestResult } from '../../host/src';
import { startAgent, type AgentHandle } from '../../agent/src';
import { startCloudService, type CloudService } from '../../sim/cloud-service';
import { startEtcd } from '../rules/etcd-server';
import { PAYMENT, ROOT, header, pluginConfig, sleep, startHost, until } from './helpers';

const TOKEN = 'rules-integration-token-0123456789';
const ROUTES = loadEnvoyConfig(path.join(ROOT, 'envoy/envoy.yaml'));

function tokenFile(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swy-rules-it-'));
  const f = path.join(dir, 'admin-token');
  fs.writeFileSync(f, TOKEN + '\n', { mode: 0o600 });
  return f;
}

/** The seed's rule set (docs/rules.md example) with instant switching, for the test's pace. */
function rulesConfig(urls: { dc1Api: string; dc1Db: string; dc2Api: string }, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const probe = (url: string) => ({ kind: 'probe', probe: { kind: 'http', url: `${url}/healthz` }, intervalMs: 50, timeoutMs: 300, healthyAfter: 1, unhealthyAfter: 1 });
  return {
    variables: [
      { name: 'dc1_api_healthy', ...probe(urls.dc1Api) },
      { name: 'dc1_db_healthy', ...probe(urls.dc1Db) },
      { name: 'dc2_api_healthy', ...probe(urls.dc2Api) },
      { name: 'maintenance_mode_on', kind: 'flag' },
      { name: 'canary_release_active', kind: 'flag' },
    ],
    sets: [
      {
        name: 'payments',
        authorities: [PAYMENT],
        hysteresis: { evaluations: 0, holdMs: 0 },
        cooldownS: 0,
        evaluateIntervalMs: 100,
        rules: [
          { id: 'maintenance', condition: 'maintenance_mode_on', priority: 1000,
            action: { kind: 'local-reply', status: 503, headers: { 'retry-after': '120' }, body: 'down for maintenance' } },
          { id: 'dc1-canary', condition: 'dc1_api_healthy AND dc1_db_healthy AND canary_release_active', priority: 110,
            action: { kind: 'split', targets: [{ target: 'dc1', weight: 95 }, { target: 'dc1-canary', weight: 5 }] } },
          { id: 'dc1-primary', condition: 'dc1_api_healthy AND dc1_db_healthy', priority: 100, action: { kind: 'route', target: 'dc1' } },
          { id: 'dc2-failover', condition: '(NOT dc1_api_healthy OR NOT dc1_db_healthy) AND dc2_api_healthy', priority: 90, action: { kind: 'route', target: 'dc2' } },
          { id: 'default', condition: 'TRUE', priority: 0, action: { kind: 'route', target: 'dc1' } },
        ],
      },
    ],
    admin: { port: 0, tokenFile: tokenFile() },
    ...extra,
  };
}

async function admin(a: AgentHandle, method: string, p: string, body: unknown): Promise<void> {
  const r = await fetch(a.rules!.adminUrl + p, { method, body: JSON.stringify(body), headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` } });
  assert.equal(r.status, 200, `${method} ${p}: ${await r.text()}`);
}

const flag = (a: AgentHandle, name: string, value: boolean) =>
  admin(a, 'PUT', `/v1/flags/${name}`, { value, author: 'integration-test', reason: `${name} ${value}` });

/** Where envoy.yaml sends the request the filter forwarded: a cluster, a weighted split, or the filter's local reply. */
function destination(r: RequestResult): string {
  if (r.localReply) return `local-reply ${r.localReply.status}`;
  const m = matchRoute(ROUTES.virtualHosts, new HeaderMap('request', r.upstreamHeaders!));
  assert.ok(m, 'a route');
  return m.cluster ?? `split(${m.weighted!.map((w) => `${w.name}:${w.weight}`).join(',')})`;
}

const get = (host: ProxyWasmHost, worker: number, extra: Record<string, string> = {}, authority = PAYMENT) =>
  host.request({ ':method': 'GET', ':path': '/pay', ':authority': authority, ':scheme': 'http', ...extra }, { worker });

/** What each worker VM does with one request: destination, route header and the debug header's rule. */
async function perWorker(host: ProxyWasmHost, extra: Record<string, string> = {}): Promise<string[]> {
  const out: string[] = [];
  for (let w = 0; w < host.workers.length; w++) {
    const r = await get(host, w, extra);
    const debug = (r.localReply ? header(r.localReply.headers, 'x-switchyard-debug') : header(r.responseHeaders, 'x-switchyard-debug')).join('|');
    const route = header(r.upstreamHeaders, 'x-switchyard-route').join('|');
    out.push(`${destination(r)} route=${route || '-'} ${/rule set=\S+ rule=\S+ version=\d+/.exec(debug)?.[0] ?? 'no rule'}`);
  }
  return out;
}

/** The one outcome every worker VM gives (asserted: same decision at the same version once a snapshot has spread). */
async function everyWorker(host: ProxyWasmHost, extra: Record<string, string> = {}): Promise<string> {
  const seen = new Set(await perWorker(host, extra));
  assert.equal(seen.size, 1, `every worker VM applies the same decision at the same version: ${[...seen].join(' / ')}`);
  return [...seen][0];
}

/**
 * Until every VM applies `rule` (a VM picks a new snapshot up on its next tick, so for up to one
 * tick the VMs may differ), then asserts that they agree on the version too.
 */
async function waitFor(host: ProxyWasmHost, pred: (outcome: string) => boolean, what: string, extra: Record<string, string> = {}): Promise<string> {
  let last: string[] = [];
  await until(async () => (last = await perWorker(host, extra)).every(pred), 5000, `${what} (last: ${last.join(' / ')})`, 20);
  return everyWorker(host, extra);
}

/** A request id makes a split's outcome the same on every VM: the wait compares whole outcomes. */
const waitRule = (host: ProxyWasmHost, rule: string, what: string): Promise<string> =>
  waitFor(host, (o) => o.includes(` rule=${rule} `), what, { 'x-request-id': 'wait-for-the-rule' });

test('seed scenarios end to end: agent rules -> RULES section -> filter (2 VMs) -> envoy.yaml routes', { timeout: 120_000 }, async (t) => {
  const svc: CloudService[] = [];
  for (const cloud of ['dc1-api', 'dc1-db', 'dc2-api']) svc.push(await startCloudService({ cloud, port: 0 }));
  const [dc1Api, dc1Db, dc2Api] = svc;
  const agent = await startAgent({
    listen: { host: '127.0.0.1', port: 0 }, publishIntervalMs: 100, link: { peers: [] },
    rules: rulesConfig({ dc1Api: dc1Api.url, dc1Db: dc1Db.url, dc2Api: dc2Api.url }),
  } as any, { logger: pino({ level: 'silent' }), defaultMetrics: false });
  const host = await startHost(pluginConfig({ rules: { debug: true } }), agent.port, { workers: 2 });
  t.after(async () => {
    await host.close();
    await agent.stop();
    for (const s of svc) await s.close();
  });

  // 1. DC1 healthy -> DC1 (the route header written, envoy.yaml's payment_rule_dc1 -> cloud_a)
  const healthy = await waitRule(host, 'dc1-primary', 'dc1-primary in force');
  assert.match(healthy, /^cloud_a route=dc1 rule set=payments rule=dc1-primary version=\d+$/);

  // a client can never choose the outcome: its route header is replaced on the bound authority ...
  assert.equal(await everyWorker(host, { 'x-switchyard-route': 'dc2' }), healthy);
  const two = await get(host, 0, { 'x-switchyard-route': 'dc1-canary' });
  assert.deepEqual(header(two.upstreamHeaders, 'x-switchyard-route'), ['dc1']);
  // ... removed on any other authority (which then takes its default route) ...
  const other = await get(host, 1, { 'x-switchyard-route': 'dc2' }, 'other.example');
  assert.deepEqual(header(other.upstreamHeaders, 'x-switchyard-route'), []);
  // ... and an upstream's copy never reaches the client
  const echo = await host.request({ ':method': 'GET', ':path': '/', ':authority': PAYMENT, ':scheme': 'http' },
    { worker: 0, response: { status: 200, headers: { 'x-switchyard-route': 'dc2' } } });
  assert.deepEqual(header(echo.responseHeaders, 'x-switchyard-route'), []);

  // 2. DC1 API down, DC2 healthy -> DC2
  dc1Api.setHealthStatus(503);
  assert.match(await waitRule(host, 'dc2-failover', 'dc2-failover after dc1-api went down'), /^cloud_b route=dc2 rule set=payments rule=dc2-failover /);

  // 3. both down -> the default rule (seed: default to dc1)
  dc2Api.setHealthStatus(503);
  assert.match(await waitRule(host, 'default', 'default with dc1 and dc2 down'), /^cloud_a route=dc1 rule set=payments rule=default /);
  dc1Api.setHealthStatus(200);
  dc2Api.setHealthStatus(200);
  await waitRule(host, 'dc1-primary', 'dc1-primary after recovery');

  // 4. canary flag -> 95/5 split between dc1 and dc1-canary
  await flag(agent, 'canary_release_active', true);
  await waitRule(host, 'dc1-canary', 'dc1-canary after the flag');
  const N = 10_000;
  const counts: Record<string, number> = {};
  for (let i = 0; i < N; i++) {
    const d = destination(await get(host, i % 2));
    counts[d] = (counts[d] ?? 0) + 1;
  }
  // binomial(10000, 0.05): sd = 21.8; 4.5 sd either side (false alarm ~7e-6)
  const sd = Math.sqrt(N * 0.05 * 0.95);
  assert.deepEqual(Object.keys(counts).sort(), ['cloud_a', 'cloud_a_canary']);
  assert.ok(Math.abs(counts.cloud_a_canary - N * 0.05) <= 4.5 * sd, `canary share ${counts.cloud_a_canary}/${N} (expected 500 ± ${(4.5 * sd).toFixed(0)})`);
  // deterministic for x-request-id: the same id goes to the same target on every VM, every time
  const M = 2000;
  let canaryById = 0;
  for (let i = 0; i < M; i++) {
    const id = `req-${i}-${(i * 2654435761) >>> 0}`;
    const a = destination(await get(host, 0, { 'x-request-id': id }));
    const b = destination(await get(host, 1, { 'x-request-id': id }));
    assert.equal(a, b, `request id ${id}`);
    if (a === 'cloud_a_canary') canaryById++;
  }
  const sdId = Math.sqrt(M * 0.05 * 0.95);
  assert.ok(Math.abs(canaryById - M * 0.05) <= 4.5 * sdId, `canary share by request id ${canaryById}/${M}`);
  await flag(agent, 'canary_release_active', false);
  await waitRule(host, 'dc1-primary', 'dc1-primary after the canary');

  // 5. maintenance flag -> local reply with the configured status, headers and body, on every VM
  await flag(agent, 'maintenance_mode_on', true);
  assert.match(await waitRule(host, 'maintenance', 'maintenance'), /^local-reply 503 route=- rule set=payments rule=maintenance /);
  const m = await get(host, 1, { 'x-switchyard-route': 'dc1' });
  assert.equal(m.upstreamHeaders, undefined, 'never forwarded');
  assert.equal(m.localReply!.body, 'down for maintenance');
  assert.deepEqual(header(m.localReply!.headers, 'retry-after'), ['120']);
  await flag(agent, 'maintenance_mode_on', false);
  await waitRule(host, 'dc1-primary', 'dc1-primary after maintenance');

  // the per-(set, rule) counters reached the host
  await until(() => (host.metric('switchyard.rule.applied.payments.dc1_canary') ?? 0) >= N + 2 * M, 2000, 'rule counter flushed');
  assert.ok((host.metric('switchyard.rule.applied.payments.maintenance') ?? 0) >= 3);
  assert.ok((host.metric('switchyard.rule.applied.payments.dc2_failover') ?? 0) >= 2);

  // the agent's JSON status says which rule is in force, since when and why
  const st = (await (await fetch(`${agent.url}/status?format=json`)).json()) as { rules: { sets: { decision: { ruleId: string; sinceMs: number; because: { name: string; value: boolean }[] } }[] } };
  const dec = st.rules.sets[0].decision;
  assert.equal(dec.ruleId, 'dc1-primary');
  assert.ok(dec.sinceMs > 0);
  assert.deepEqual(dec.because.map((b) => b.name).sort(), ['dc1_api_healthy', 'dc1_db_healthy']);

  // a filter that does not declare the set's routeHeader refuses the decision (counted) and still strips its own headers
  const strict = await startHost(pluginConfig({ rules: { routeHeaders: ['x-other-route'] } }), agent.port, { workers: 1 });
  t.after(() => strict.close());
  await until(() => (strict.metric('switchyard.rule.refused') ?? 0) >= 1, 5000, 'refusal counted');
  const s1 = await strict.request({ ':method': 'GET', ':path': '/', ':authority': PAYMENT, ':scheme': 'http', 'x-switchyard-route': 'dc2', 'x-other-route': 'x' });
  assert.deepEqual(header(s1.upstreamHeaders, 'x-other-route'), []);
  assert.deepEqual(header(s1.upstreamHeaders, 'x-switchyard-route'), ['dc2'], 'an undeclared header is not the filter\'s (it routes nothing in this configuration)');

  // the agent gone: the snapshot goes stale and the decision is dropped -> header stripped, default route
  await agent.stop();
  await waitFor(host, (o) => o === 'cloud_a route=- no rule', 'stale snapshot: no rule applied');
  assert.equal(await everyWorker(host, { 'x-switchyard-route': 'dc2' }), 'cloud_a route=- no rule');
});

test('an override set through agent 1 reaches agent 2 and its filter through a real etcd', { timeout: 90_000 }, async (t) => {
  const etcd = await startEtcd();
  t.after(() => etcd.dispose());
  const svc: CloudService[] = [];
  for (const cloud of ['dc1-api', 'dc1-db', 'dc2-api']) svc.push(await startCloudService({ cloud, port: 0 }));
  t.after(async () => { for (const s of svc) await s.close(); });
  const store = { kind: 'etcd', endpoints: [etcd.clientUrl], prefix: `/switchyard-it-${process.pid}/`, healthIntervalMs: 200, dialTimeoutMs: 500 };
  const agents: AgentHandle[] = [];
  for (let i = 0; i < 2; i++) {
    agents.push(await startAgent({
      listen: { host: '127.0.0.1', port: 0 }, publishIntervalMs: 100, link: { peers: [] },
      rules: rulesConfig({ dc1Api: svc[0].url, dc1Db: svc[1].url, dc2Api: svc[2].url }, { store }),
    } as any, { logger: pino({ level: 'silent' }), defaultMetrics: false }));
  }
  const [a1, a2] = agents;
  const host2 = await startHost(pluginConfig({ rules: { debug: true } }), a2.port, { workers: 2 });
  t.after(async () => {
    await host2.close();
    for (const a of agents) await a.stop();
  });
  await waitRule(host2, 'dc1-primary', 'agent 2\'s filter starts on dc1-primary');

  const t0 = performance.now();
  await admin(a1, 'PUT', '/v1/overrides/payments', { rule: 'dc2-failover', author: 'alice', reason: 'INC-1 drain dc1', ttlS: 600 });
  const out = await waitRule(host2, 'dc2-failover', 'the override on agent 2\'s filter');
  const ms = performance.now() - t0;
  assert.match(out, /^cloud_b route=dc2 /);
  assert.ok(ms < 1000, `admin PUT on agent 1 -> agent 2's filter routes to dc2 in ${ms.toFixed(0)} ms (bound 1 s)`);
  console.log(`override propagation agent 1 -> etcd -> agent 2 -> its filter (2 VMs): ${ms.toFixed(0)} ms`);

  // the override wins over every rule, maintenance included, until it is cleared
  await flag(a1, 'maintenance_mode_on', true);
  await sleep(300);
  assert.match(await everyWorker(host2), / rule=dc2-failover /);
  await admin(a1, 'DELETE', '/v1/overrides/payments', { author: 'alice', reason: 'INC-1 resolved' });
  // the flag path too: maintenance set on agent 1 answers locally at agent 2's filter
  await waitRule(host2, 'maintenance', 'maintenance from agent 1 at agent 2\'s filter once the override is gone');
  await flag(a1, 'maintenance_mode_on', false);
  await waitRule(host2, 'dc1-primary', 'back to dc1-primary');
});
