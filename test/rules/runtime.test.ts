// startRules with real timers: variables from each source (HTTP probe with N/M, link peer, pool
// threshold, flag), the switch log line and counter, and the authenticated, audited admin API.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as http from 'node:http';
import { EventEmitter } from 'node:events';
import { PassThrough, Writable } from 'node:stream';
import pino from 'pino';
import { Registry } from 'prom-client';
import { resolveConfig } from '../../agent/src/config';
import { startRules } from '../../agent/src/rules';
import { createAdminHandler } from '../../agent/src/admin/api';
import { authorized, isLoopback, loadToken } from '../../agent/src/admin/auth';
import type { InstanceRecord } from '../../agent/src/snapshot/codec';
import { request, sleep } from '../agent/_helpers';

const TOKEN = 'test-token-0123456789abcdef';

function capture() {
  const lines: any[] = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      for (const l of String(chunk).split('\n')) if (l.trim()) lines.push(JSON.parse(l));
      cb();
    },
  });
  return { lines, logger: pino({ level: 'info' }, stream) };
}

async function until(pred: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > end) assert.fail(`timed out after ${ms} ms: ${what}`);
    await sleep(10);
  }
}

class FakePeer extends EventEmitter {
  state: 'normal' | 'degraded' = 'normal';
  flip(to: 'normal' | 'degraded') {
    this.state = to;
    this.emit('state', { to });
  }
}

const rec = (service: string, healthy: boolean, rho: number): InstanceRecord => ({
  service, addr: '10.0.0.1:80', peer: '', healthy, reason: 0 as any, rho, esMs: 1, es2Ms2: 1, lambdaPerS: 1, queueDepth: 0, p50Ms: 1, p99Ms: 1, baselineP99Ms: 1, gpuUtil: NaN, dataAgeMs: 0,
});

test('variables from every source: probe N/M, peer, pool threshold, flag; visible in status and /metrics', async (t) => {
  let code = 200;
  const svc = http.createServer((_q, s) => s.writeHead(code).end());
  await new Promise<void>((r) => svc.listen(0, '127.0.0.1', r));
  t.after(() => svc.close());
  const port = (svc.address() as any).port;
  const peer = new FakePeer();
  let pool = [rec('llm', true, 0.5), rec('llm', true, 0.6), rec('other', true, 1)];
  const cfg = resolveConfig({
    link: { peers: [{ name: 'cloud-b', probe: { kind: 'http', url: 'http://127.0.0.1:9/' } }] },
    rules: {
      variables: [
        { name: 'api_healthy', kind: 'probe', probe: { kind: 'http', url: `http://127.0.0.1:${port}/healthz` }, intervalMs: 50, timeoutMs: 200, healthyAfter: 2, unhealthyAfter: 3 },
        { name: 'link_degraded', kind: 'peer', peer: 'cloud-b' },
        { name: 'llm_hot', kind: 'pool', service: 'llm', metric: 'meanRho', op: '>=', value: 0.9, intervalMs: 50 },
        { name: 'llm_short', kind: 'pool', service: 'llm', metric: 'healthyInstances', op: '<', value: 2, intervalMs: 50 },
        { name: 'maintenance_mode_on', kind: 'flag' },
      ],
      sets: [{ name: 's', authorities: ['a.example'], hysteresis: { holdMs: 0 }, cooldownS: 0, rules: [
        { id: 'local', condition: 'link_degraded OR llm_hot', priority: 2, action: { kind: 'link-status', status: 'degraded' } },
        { id: 'ok', condition: 'api_healthy', priority: 1, action: { kind: 'route', target: 'primary' } },
        { id: 'default', condition: 'TRUE', action: { kind: 'route', target: 'backup' } },
      ] }],
      admin: { enabled: false },
    },
  });
  const { lines, logger } = capture();
  const registry = new Registry();
  const h = await startRules({ config: cfg.rules!, logger, registry, peers: new Map([['cloud-b', peer]]), instances: () => pool });
  t.after(() => h.stop());
  const v = (n: string) => h.status().variables.find((x) => x.name === n)!;

  // the first probe decides at once (startRules waits for it)
  assert.equal(v('api_healthy').value, true);
  assert.match(v('api_healthy').reason, /^first probe ok/);
  assert.equal(v('api_healthy').source, `probe http://127.0.0.1:${port}/healthz`);
  assert.equal(h.decisions()[0].ruleId, 'ok');
  // unhealthy only after 3 consecutive failures
  code = 500;
  await until(() => !v('api_healthy').value, 2000, 'probe variable false');
  assert.match(v('api_healthy').reason, /^3 consecutive failed probes \(last http_error \(HTTP 500\)\)/);
  await until(() => h.decisions()[0].ruleId === 'default', 1000, 'default rule');
  code = 200;
  await until(() => v('api_healthy').value, 2000, 'probe variable true again');
  assert.match(v('api_healthy').reason, /^2 consecutive successful probes/);

  peer.flip('degraded');
  await until(() => h.decisions()[0].ruleId === 'local', 1000, 'peer variable');
  assert.deepEqual(h.decisions()[0].because, [{ name: 'link_degraded', value: true }, { name: 'llm_hot', value: false }]);
  peer.flip('normal');
  assert.equal(v('link_degraded').value, false);

  pool = [rec('llm', true, 0.95), rec('llm', true, 0.9), rec('llm', false, NaN)];
  h.instancesChanged();
  assert.equal(v('llm_hot').value, true);
  assert.match(v('llm_hot').reason, /llm meanRho = 0\.925 \(>= 0\.9 is true\)/);
  pool = [rec('llm', true, 0.2)];
  await until(() => v('llm_short').value, 1000, 'healthy instances < 2');
  assert.equal(v('llm_hot').value, false);

  const text = await registry.metrics();
  assert.match(text, /switchyard_rule_variable\{variable="llm_short",kind="pool"\} 1/);
  assert.match(text, /switchyard_rule_variable\{variable="link_degraded",kind="peer"\} 0/);
  assert.match(text, /switchyard_rule_switches_total\{set="s",to="local",cause="rules"\} 1/);
  assert.match(text, /switchyard_rule_active\{set="s",rule="ok"\} 1/);

  // every switch is one structured line: old, new, variables, time
  const sw = lines.filter((l) => l.event === 'rule_switch');
  const toLocal = sw.find((l) => l.to === 'local');
  assert.equal(toLocal.from, 'ok');
  assert.deepEqual(toLocal.variables, { link_degraded: true, llm_hot: false });
  assert.ok(!Number.isNaN(Date.parse(toLocal.at)));
  assert.equal(toLocal.set, 's');
});

async function adminRig(t: any, adminExtra: Record<string, unknown> = {}, env: NodeJS.ProcessEnv = { SWITCHYARD_ADMIN_TOKEN: TOKEN }, setExtra: Record<string, unknown> = {}) {
  const cfg = resolveConfig({
    rules: {
      variables: [{ name: 'maintenance_mode_on', kind: 'flag' }],
      sets: [{ name: 'pay', authorities: ['pay.example'], hysteresis: { holdMs: 0 }, cooldownS: 0, ...setExtra, rules: [
        { id: 'maint', condition: 'maintenance_mode_on', priority: 1, action: { kind: 'local-reply', status: 503, body: 'maintenance' } },
        { id: 'default', condition: 'TRUE', action: { kind: 'route', target: 'dc1' } },
      ] }],
      admin: { port: 0, ...adminExtra },
    },
  });
  const { lines, logger } = capture();
  const registry = new Registry();
  const h = await startRules({ config: cfg.rules!, logger, registry, env });
  t.after(() => h.stop());
  const call = (method: string, path: string, body?: unknown, token?: string) => {
    const text = body === undefined ? undefined : JSON.stringify(body);
    // content-length: Node's client sends no body on DELETE without it
    return request(h.adminUrl + path, { method, body: text, headers: { 'content-type': 'application/json', ...(text ? { 'content-length': String(Buffer.byteLength(text)) } : {}), ...(token ? { authorization: `Bearer ${token}` } : {}) } });
  };
  return { h, lines, registry, call };
}

test('admin API: loopback by default, writes need the token (401 without or wrong), every change audited', async (t) => {
  const { h, lines, registry, call } = await adminRig(t);
  assert.match(h.adminUrl!, /^http:\/\/127\.0\.0\.1:\d+$/);
  const body = { value: true, author: 'alice', reason: 'INC-7 maintenance window' };
  assert.equal((await call('PUT', '/v1/flags/maintenance_mode_on', body)).status, 401);
  assert.equal((await call('PUT', '/v1/flags/maintenance_mode_on', body, TOKEN + 'x')).status, 401);
  assert.equal((await call('PUT', '/v1/flags/maintenance_mode_on', body, TOKEN.slice(0, -1))).status, 401);
  assert.equal(h.decisions()[0].ruleId, 'default', 'refused writes change nothing');
  assert.equal(lines.filter((l) => l.audit && l.outcome === 'unauthorized').length, 3);

  const ok = await call('PUT', '/v1/flags/maintenance_mode_on', body, TOKEN);
  assert.equal(ok.status, 200, ok.body.toString());
  await until(() => h.decisions()[0].ruleId === 'maint', 1000, 'flag applied');
  const a = lines.find((l) => l.audit && l.what === 'set flag maintenance_mode_on');
  assert.equal(a.who, 'alice');
  assert.equal(a.old, null);
  assert.equal(a.new.value, true);
  assert.equal(a.reason, 'INC-7 maintenance window');
  assert.ok(!Number.isNaN(Date.parse(a.at)));

  // reads: no token on loopback
  const st = JSON.parse((await call('GET', '/v1/rules')).body.toString());
  assert.equal(st.flags[0].name, 'maintenance_mode_on');
  assert.equal(st.flags[0].author, 'alice');
  assert.equal(st.variables[0].reason, 'set to true by alice: INC-7 maintenance window');
  assert.equal(JSON.parse((await call('GET', '/v1/rules/decisions')).body.toString())[0].ruleId, 'maint');

  // overrides: expiry mandatory and bounded; unknown names refused
  const ov = { rule: 'default', author: 'bob', reason: 'drain' };
  assert.match((await call('PUT', '/v1/overrides/pay', ov, TOKEN)).body.toString(), /ttlS: required/);
  assert.match((await call('PUT', '/v1/overrides/pay', { ...ov, ttlS: 86401 }, TOKEN)).body.toString(), /ttlS: must be a number of seconds in \(0, 86400\]/);
  assert.equal((await call('PUT', '/v1/overrides/pay', { ...ov, rule: 'nope', ttlS: 60 }, TOKEN)).status, 400);
  assert.equal((await call('PUT', '/v1/overrides/nope', { ...ov, ttlS: 60 }, TOKEN)).status, 404);
  assert.equal((await call('PUT', '/v1/flags/undeclared', body, TOKEN)).status, 404);
  assert.equal((await call('PUT', '/v1/overrides/pay', { ...ov, author: '' , ttlS: 60 }, TOKEN)).status, 400);
  assert.equal((await call('PUT', '/v1/overrides/pay', 'x'.repeat(9000), TOKEN)).status, 413);
  const set = await call('PUT', '/v1/overrides/pay', { ...ov, ttlS: 0.3 }, TOKEN);
  assert.equal(set.status, 200, set.body.toString());
  await until(() => h.decisions()[0].ruleId === 'default' && h.decisions()[0].override?.author === 'bob', 1000, 'override in force');
  // expires by itself (timer), back to the flag-driven rule
  await until(() => h.decisions()[0].ruleId === 'maint', 2000, 'override expired');
  assert.equal(h.status().overrides[0].problem, 'expired');

  const del = await call('DELETE', '/v1/flags/maintenance_mode_on', { author: 'alice', reason: 'done' }, TOKEN);
  assert.equal(del.status, 200, del.body.toString());
  await until(() => h.decisions()[0].ruleId === 'default', 1000, 'flag cleared');
  const d = lines.find((l) => l.audit && l.what === 'clear flag maintenance_mode_on');
  assert.equal(d.old.value, true);
  assert.equal(d.new, null);
  assert.match(await registry.metrics(), /switchyard_admin_requests_total\{method="write",outcome="unauthorized"\} 3/);
});

test('admin API: without a configured token every write is refused (503) and says why', async (t) => {
  const { call, lines } = await adminRig(t, {}, {});
  const r = await call('PUT', '/v1/flags/maintenance_mode_on', { value: true, author: 'a', reason: 'b' }, 'anything-at-all-123');
  assert.equal(r.status, 503);
  assert.match(r.body.toString(), /no admin token \(\$SWITCHYARD_ADMIN_TOKEN is empty\)/);
  assert.ok(lines.some((l) => l.event === 'admin_no_token'));
});

test('admin auth: constant-time bearer check, token file, loopback detection, non-loopback reads need the token', async () => {
  assert.equal(authorized(`Bearer ${TOKEN}`, TOKEN), true);
  assert.equal(authorized(`bearer ${TOKEN}`, TOKEN), false);
  assert.equal(authorized(`Bearer ${TOKEN} `, TOKEN), false);
  assert.equal(authorized(undefined, TOKEN), false);
  assert.equal(authorized(`Bearer ${TOKEN}`, undefined), false);
  assert.throws(() => loadToken({ tokenEnv: 'T' }, { T: 'short' }), /shorter than 16/);
  assert.throws(() => loadToken({ tokenFile: '/nonexistent/token', tokenEnv: 'T' }, {}), /rules\.admin\.tokenFile: cannot read/);
  for (const a of ['127.0.0.1', '127.8.9.1', '::1', '::ffff:127.0.0.1']) assert.equal(isLoopback(a), true, a);
  for (const a of ['10.0.0.1', '::ffff:10.0.0.1', '0.0.0.0', undefined]) assert.equal(isLoopback(a), false, String(a));

  // the handler with a request from a non-loopback address
  const handler = createAdminHandler(
    { status: () => ({ ok: 1 }), decisions: () => [], now: Date.now, maxOverrideS: 10, isFlag: () => true, ruleIds: () => new Set(), flags: () => new Map(), overrides: () => new Map(), putFlag: async () => {}, deleteFlag: async () => true, putOverride: async () => {}, deleteOverride: async () => true },
    { token: TOKEN, logger: pino({ level: 'silent' }), requests: { inc() {} } as any },
  );
  const fake = (auth?: string) => {
    const req: any = new PassThrough();
    req.method = 'GET';
    req.url = '/v1/rules';
    req.headers = auth ? { authorization: auth } : {};
    req.socket = { remoteAddress: '10.1.2.3' };
    let status = 0;
    const res: any = { headersSent: false, destroyed: false, writeHead: (c: number) => (status = c), end: () => {}, setHeader: () => {} };
    handler(req, res);
    return status;
  };
  assert.equal(fake(), 401);
  assert.equal(fake(`Bearer ${TOKEN}`), 200);
});

test('one flag change is one evaluation: H = 2 needs a second one', async (t) => {
  const { h, call } = await adminRig(t, {}, { SWITCHYARD_ADMIN_TOKEN: TOKEN }, { hysteresis: { evaluations: 2, holdMs: 0 }, evaluateIntervalMs: 600000 });
  const before = h.status().sets[0].evaluations;
  const r = await call('PUT', '/v1/flags/maintenance_mode_on', { value: true, author: 'a', reason: 'b' }, TOKEN);
  assert.equal(r.status, 200);
  await until(() => h.status().sets[0].pending !== undefined, 300, 'candidate');
  const st = h.status().sets[0];
  assert.equal(st.pending!.evaluations, 1);
  assert.equal(st.evaluations, before + 1);
  assert.equal(h.decisions()[0].ruleId, 'default');
  await sleep(50);
  assert.equal(h.decisions()[0].ruleId, 'default', 'still one evaluation');
  h.evaluate();
  assert.equal(h.decisions()[0].ruleId, 'maint');
});

test('shipped defaults of the rules section: loopback admin on 8010, token from $SWITCHYARD_ADMIN_TOKEN, memory store', () => {
  const c = resolveConfig({ rules: {} }).rules!;
  assert.deepEqual(c, {
    variables: [],
    sets: [],
    admin: { enabled: true, host: '127.0.0.1', port: 8010, tokenEnv: 'SWITCHYARD_ADMIN_TOKEN', maxOverrideS: 86400 },
    store: { kind: 'memory' },
  });
  assert.deepEqual(resolveConfig({ rules: { store: { kind: 'etcd', endpoints: ['http://127.0.0.1:2379'] } } }).rules!.store, {
    kind: 'etcd', endpoints: ['http://127.0.0.1:2379'], prefix: '/switchyard/v1/', dialTimeoutMs: 1000, healthIntervalMs: 500, maxEntries: 1000,
  });
});

test('agent integration: startAgent starts the rules, exposes the handle and metrics, and publishes a snapshot at every switch', async (t) => {
  const { startAgent } = await import('../../agent/src/agent');
  const fs = await import('node:fs');
  const os = await import('node:os');
  const path = await import('node:path');
  const tokenFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'swy-rules-')), 'token');
  fs.writeFileSync(tokenFile, TOKEN);
  const { logger } = capture();
  const agent = await startAgent(
    {
      listen: { port: 0 },
      publishIntervalMs: 60000,
      link: { peers: [] },
      rules: {
        variables: [{ name: 'maintenance_mode_on', kind: 'flag' }],
        sets: [{ name: 'pay', authorities: ['pay.example'], hysteresis: { holdMs: 0 }, cooldownS: 0, rules: [
          { id: 'maint', condition: 'maintenance_mode_on', priority: 1, action: { kind: 'local-reply', status: 503, body: 'm' } },
          { id: 'default', condition: 'TRUE', action: { kind: 'route', target: 'dc1' } },
        ] }],
        admin: { port: 0, tokenFile },
      },
    } as any,
    { logger, defaultMetrics: false },
  );
  t.after(() => agent.stop());
  const rules = agent.rules!;
  assert.equal(rules.decisions()[0].ruleId, 'default');
  assert.match(await agent.metrics.registry.metrics(), /switchyard_rule_active\{set="pay",rule="default"\} 1/);
  const before = agent.snapshot().snapshot.seq;
  // the periodic publication is a minute away: a publication now can only come from the switch
  const published = new Promise<number>((r) => agent.events.once('publish', (p) => r(p.snapshot.seq)));
  const body = JSON.stringify({ value: true, author: 'alice', reason: 'test' });
  const res = await request(`${rules.adminUrl}/v1/flags/maintenance_mode_on`, { method: 'PUT', body, headers: { authorization: `Bearer ${TOKEN}`, 'content-length': String(body.length) } });
  assert.equal(res.status, 200, res.body.toString());
  assert.ok((await published) > before);
  assert.equal(rules.decisions()[0].ruleId, 'maint');
});

test('the first decision waits for every probe variable\'s first result (a slow probe included)', async (t) => {
  const fast = http.createServer((_q, s) => s.writeHead(200).end());
  const slow = http.createServer((_q, s) => setTimeout(() => s.writeHead(200).end(), 150));
  for (const s of [fast, slow]) await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  t.after(() => {
    fast.close();
    slow.close();
  });
  const url = (s: http.Server) => `http://127.0.0.1:${(s.address() as any).port}/`;
  const cfg = resolveConfig({
    rules: {
      variables: [
        { name: 'a_up', kind: 'probe', probe: { kind: 'http', url: url(fast) }, timeoutMs: 1000 },
        { name: 'b_up', kind: 'probe', probe: { kind: 'http', url: url(slow) }, timeoutMs: 1000 },
      ],
      // shipped hold (500 ms) and cooldown: a decision made before b_up's answer would be stuck on "default"
      sets: [{ name: 's', authorities: ['x'], rules: [
        { id: 'both', condition: 'a_up AND b_up', priority: 1, action: { kind: 'route', target: 'both' } },
        { id: 'default', condition: 'TRUE', action: { kind: 'route', target: 'none' } },
      ] }],
      admin: { enabled: false },
    },
  });
  const { logger, lines } = capture();
  const h = await startRules({ config: cfg.rules!, logger, registry: new Registry() });
  t.after(() => h.stop());
  assert.equal(h.decisions()[0].ruleId, 'both');
  assert.deepEqual(lines.filter((l) => l.event === 'rule_switch').map((l) => `${l.from}->${l.to}:${l.cause}`), ['null->both:initial']);
});
