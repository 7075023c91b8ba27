// Two real agents sharing flags and overrides through a real etcd started by the test: set
// through agent 1's admin API -> in force on agent 2 within 1 s; etcd killed -> both keep the
// last flags and say so; overrides still expire; etcd back -> both re-list and watch again.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { startAgent, type AgentHandle } from '../../agent/src/agent';
import { ETCDCTL_BIN, startEtcd } from './etcd-server';
import { request, sleep } from '../agent/_helpers';

const TOKEN = 'etcd-test-token-0123456789';

async function until(pred: () => boolean, ms: number, what: string): Promise<number> {
  const t0 = performance.now();
  while (!pred()) {
    if (performance.now() - t0 > ms) assert.fail(`timed out after ${ms} ms: ${what}`);
    await sleep(5);
  }
  return performance.now() - t0;
}

test('flags and overrides shared by two agents through a real etcd: propagation, outage, recovery, expiry', { timeout: 90_000 }, async (t) => {
  const etcd = await startEtcd();
  t.after(() => etcd.dispose());
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swy-rules-'));
  const tokenFile = path.join(dir, 'token');
  fs.writeFileSync(tokenFile, TOKEN + '\n', { mode: 0o600 });
  const prefix = `/switchyard-test-${process.pid}/`;
  const rules = {
    variables: [
      { name: 'maintenance_mode_on', kind: 'flag' },
      { name: 'canary_release_active', kind: 'flag' },
    ],
    sets: [
      {
        name: 'pay',
        authorities: ['pay.example'],
        rules: [
          { id: 'maint', condition: 'maintenance_mode_on', priority: 10, action: { kind: 'local-reply', status: 503, body: 'maintenance' } },
          { id: 'canary', condition: 'canary_release_active', priority: 5, action: { kind: 'split', targets: [{ target: 'stable', weight: 95 }, { target: 'canary', weight: 5 }] } },
          { id: 'default', condition: 'TRUE', action: { kind: 'route', target: 'stable' } },
        ],
      },
    ],
    admin: { port: 0, tokenFile },
    store: { kind: 'etcd', endpoints: [etcd.clientUrl], prefix, healthIntervalMs: 200, dialTimeoutMs: 500 },
  };
  const agents: AgentHandle[] = [];
  for (let i = 0; i < 2; i++) {
    const a = await startAgent({ listen: { port: 0 }, link: { peers: [] }, rules } as any, { logger: pino({ level: 'silent' }), defaultMetrics: false });
    agents.push(a);
  }
  t.after(async () => {
    for (const a of agents) await a.stop();
  });
  const [a1, a2] = agents.map((a) => a.rules!);
  const admin = (method: string, p: string, body: unknown) => {
    const text = JSON.stringify(body);
    return request(a1.adminUrl + p, { method, body: text, headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)), authorization: `Bearer ${TOKEN}` } });
  };
  const rule = (h: typeof a1) => h.decisions()[0].ruleId;
  const ctl = (...args: string[]) => execFileSync(ETCDCTL_BIN, ['--endpoints', etcd.clientUrl, ...args], { env: { ...process.env, ETCDCTL_API: '3' }, encoding: 'utf8' });
  assert.equal(rule(a1), 'default');
  assert.equal(a2.status().store.connected, true);

  // 1. flag through agent 1's admin API -> agent 2 within 1 s
  // timed from before the request: the admin call itself is part of the propagation
  let t0 = performance.now();
  let r = await admin('PUT', '/v1/flags/canary_release_active', { value: true, author: 'alice', reason: 'release 2.3 canary' });
  assert.equal(r.status, 200, r.body.toString());
  // the flag itself arrives at once; the rule it drives then waits the shipped hold (500 ms)
  await until(() => a2.status().variables.find((v) => v.name === 'canary_release_active')!.value, 1000, 'flag on agent 2');
  const flagMs = performance.now() - t0;
  await until(() => rule(a2) === 'canary', 1000, 'flag-driven rule on agent 2');
  // each agent runs its own hold timer from when its watch saw the flag: agent 1 may be a tick behind
  await until(() => rule(a1) === 'canary', 1000, 'flag-driven rule on agent 1');
  // 2. override with an expiry -> agent 2 within 1 s, bypassing the default hold/cooldown
  t0 = performance.now();
  r = await admin('PUT', '/v1/overrides/pay', { rule: 'maint', author: 'bob', reason: 'INC-9 freeze', ttlS: 4 });
  assert.equal(r.status, 200, r.body.toString());
  await until(() => rule(a2) === 'maint', 1000, 'override on agent 2');
  const overrideMs = performance.now() - t0;
  assert.ok(overrideMs < 1000, `override took ${overrideMs} ms`);
  assert.equal(a2.decisions()[0].override?.author, 'bob');
  t.diagnostic(`propagation to agent 2: flag ${flagMs.toFixed(1)} ms, override ${overrideMs.toFixed(1)} ms`);
  // the key layout is what docs/rules.md says
  assert.match(ctl('get', '--prefix', '--keys-only', prefix), new RegExp(`${prefix}flags/canary_release_active\\s+${prefix}overrides/pay`));

  // 3. etcd down: both say so, keep the last known flag and override
  await etcd.kill();
  await until(() => !a1.status().store.connected && !a2.status().store.connected, 5000, 'both report the store unreachable');
  for (const h of [a1, a2]) {
    const st = h.status();
    assert.match(st.store.note!, /etcd unreachable since .*: the last known flags and overrides stay in force/);
    assert.equal(st.flags.find((f) => f.name === 'canary_release_active')?.value, true);
    assert.equal(rule(h), 'maint');
  }
  const w = await admin('PUT', '/v1/flags/maintenance_mode_on', { value: true, author: 'alice', reason: 'x' });
  assert.equal(w.status, 503, 'a write while etcd is down fails loudly');

  // an agent (re)started during the outage has nothing to keep: it says so and runs on defaults
  const a3agent = await startAgent({ listen: { port: 0 }, link: { peers: [] }, rules: { ...rules, admin: { enabled: false } } } as any, { logger: pino({ level: 'silent' }), defaultMetrics: false });
  agents.push(a3agent);
  const a3 = a3agent.rules!;
  assert.equal(a3.status().store.connected, false);
  assert.equal(rule(a3), 'default');

  // 4. the override expires on both by their own timers, without etcd (nobody can delete it)
  await until(() => rule(a1) === 'canary' && rule(a2) === 'canary', 6000, 'override expired on both while etcd is down');

  // 5. etcd back: both reconnect, re-list, and watch again (a write with etcdctl reaches both)
  await etcd.restart();
  await until(() => a1.status().store.connected && a2.status().store.connected, 10_000, 'both reconnect');
  assert.equal(a1.status().store.note, undefined);
  // the late agent lists what it missed
  await until(() => a3.status().store.connected && a3.status().flags.some((f) => f.name === 'canary_release_active' && f.value), 10_000, 'late agent re-lists');
  ctl('put', `${prefix}flags/maintenance_mode_on`, JSON.stringify({ value: true, author: 'carol', reason: 'set with etcdctl', setAtMs: Date.now() }));
  await until(() => rule(a1) === 'maint' && rule(a2) === 'maint', 3000, 'etcdctl write seen by both after recovery');
  ctl('del', `${prefix}flags/maintenance_mode_on`);
  const flag = (h: typeof a1) => h.status().variables.find((v) => v.name === 'maintenance_mode_on')!;
  await until(() => !flag(a1).value && !flag(a2).value, 1000, 'etcdctl delete seen by both');
  assert.equal(flag(a2).reason, 'cleared (default false)');
  // the rule follows once the shipped cooldown (5 s since the last rule-driven switch) allows
  await until(() => rule(a1) === 'canary' && rule(a2) === 'canary', 7000, 'back to the canary rule');
  // a malformed hand-written record is refused and counted, never applied
  ctl('put', `${prefix}overrides/pay`, '{"rule":"maint","author":"x","reason":"no expiry","setAtMs":1}');
  await until(() => a2.status().store.rejected > 0, 3000, 'malformed record counted');
  assert.match(a2.status().store.lastRejected!, /overrides\/pay: expiresAtMs: required/);
  assert.equal(rule(a2), 'canary');
});
