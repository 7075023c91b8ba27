// The rig's operator flags (issue 8 §6): `npm run flag -- maintenance_mode_on on` against a
// running rig (ephemeral ports, embedded proxy, the shipped envoy/agent.yaml rules) turns the
// payment service into the maintenance local reply and back, with the generated token.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';
import { startRig, TOKEN_FILE, PAYMENT_AUTHORITY } from '../../rig/rig';
import { ROOT, until } from './helpers';

function flagCli(args: string[], env: Record<string, string>): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', 'tsx', path.join(ROOT, 'rig/flag.ts'), ...args], { cwd: ROOT, env: { ...process.env, ...env } },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, out: stdout + stderr }));
  });
}

/** fetch cannot set Host: a plain http request to the proxy for the payment authority */
function payment(proxyUrl: string): Promise<{ status: number; body: string; servedBy: string | null }> {
  const u = new URL(proxyUrl);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, path: '/v1/demo', headers: { host: PAYMENT_AUTHORITY }, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, servedBy: (res.headers['x-served-by'] as string | undefined) ?? null }));
    });
    req.on('error', reject);
    req.end();
  });
}

test('rig: the flag command flips maintenance through the admin API with the generated token', { timeout: 90_000 }, async (t) => {
  const rig = await startRig({ ephemeral: true, proxy: 'embedded' });
  t.after(() => rig.stop());
  // the token: generated into .rig/, owner-only, handed to the agent
  const st = fs.statSync(TOKEN_FILE);
  assert.equal(st.mode & 0o077, 0, '.rig/admin-token is not readable by others');
  assert.equal(fs.readFileSync(TOKEN_FILE, 'utf8').trim(), rig.rulesAdminToken);
  await until(async () => (await payment(rig.proxyUrl)).status === 200, 10_000, 'payment traffic flows');

  const env = { SWITCHYARD_ADMIN_URL: rig.rulesAdminUrl };
  const wrong = await flagCli(['maintenance_mode_on', 'on'], { ...env, SWITCHYARD_ADMIN_TOKEN: 'not-the-token-0123456789' });
  assert.equal(wrong.code, 1, wrong.out);
  assert.match(wrong.out, /^401/);

  const on = await flagCli(['maintenance_mode_on', 'on', '--reason', 'rig test'], env);
  assert.equal(on.code, 0, on.out);
  let last = { status: 0, body: '', servedBy: null as string | null };
  await until(async () => (last = await payment(rig.proxyUrl)).status === 503, 10_000, 'maintenance local reply');
  assert.equal(last.body, 'payment service: down for maintenance\n');
  assert.equal(last.servedBy, null, 'answered by the filter, not forwarded');
  const status = (await (await fetch(`${rig.agentUrl}/status?format=json`)).json()) as { rules: { sets: { decision: { ruleId: string } }[] } };
  assert.equal(status.rules.sets[0].decision.ruleId, 'maintenance');

  const off = await flagCli(['maintenance_mode_on', 'off'], env);
  assert.equal(off.code, 0, off.out);
  await until(async () => (await payment(rig.proxyUrl)).status === 200, 10_000, 'back to forwarding after the cooldown');

  const usage = await flagCli(['maintenance_mode_on'], env);
  assert.equal(usage.code, 2);
  assert.match(usage.out, /usage: npm run flag/);
});
