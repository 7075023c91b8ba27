import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { startCloudService } from '../../sim/cloud-service';
import { request } from '../agent/_helpers';

test('GET /healthz -> 200 ok; other paths -> JSON with cloud, path, headers of interest; x-served-by', async () => {
  const svc = await startCloudService({ cloud: 'cloud-a' });
  try {
    const h = await request(`${svc.url}/healthz`);
    assert.equal(h.status, 200);
    assert.equal(h.body.toString().trim(), 'ok');
    const r = await request(`${svc.url}/pay/42?x=1`, { headers: { 'x-cross-cloud-status': 'degraded', 'x-degraded': 'true', 'x-unrelated': 'no', host: 'payment-service.prod.svc.cluster.local' } });
    assert.equal(r.status, 200);
    assert.equal(r.headers['x-served-by'], 'cloud-a');
    const j = JSON.parse(r.body.toString());
    assert.equal(j.cloud, 'cloud-a');
    assert.equal(j.path, '/pay/42?x=1');
    assert.equal(j.headers['x-cross-cloud-status'], 'degraded');
    assert.equal(j.headers['x-degraded'], 'true');
    assert.equal(j.headers.host, 'payment-service.prod.svc.cluster.local');
    assert.equal(j.headers['x-unrelated'], undefined);
    assert.equal(j.instance, `127.0.0.1:${svc.port}`);
  } finally {
    await svc.close();
  }
});

test('failure injection: /healthz status and response delay (API and control path)', async () => {
  const svc = await startCloudService({ cloud: 'cloud-b' });
  try {
    svc.setHealthStatus(503);
    assert.equal((await request(`${svc.url}/healthz`)).status, 503);
    const c = await request(`${svc.url}/__sim/health?status=200`, { method: 'PUT' });
    assert.equal(c.status, 200);
    assert.equal((await request(`${svc.url}/healthz`)).status, 200);
    assert.equal((await request(`${svc.url}/__sim/health?status=42`, { method: 'PUT' })).status, 400);
    await request(`${svc.url}/__sim/delay`, { method: 'PUT', body: '{"ms":80}' });
    const d = await request(`${svc.url}/x`);
    assert.ok(d.ms >= 79, `delay ${d.ms}`);
    const st = JSON.parse((await request(`${svc.url}/__sim/stats`)).body.toString());
    assert.equal(st.requests, 1);
  } finally {
    await svc.close();
  }
});

test('CLI starts and stops on SIGTERM', async () => {
  const ROOT = path.resolve(__dirname, '../..');
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'sim/cloud-service.ts'), '--name', 'cloud-z', '--port', '0'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<number | null>((r) => child.on('exit', (c) => r(c)));
  try {
    const url = await new Promise<string>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('no start line')), 15000);
      child.stdout!.on('data', (c: Buffer) => {
        const m = /"url":"([^"]+)"/.exec(c.toString());
        if (m) {
          clearTimeout(t);
          resolve(m[1]);
        }
      });
    });
    const r = await request(`${url}/anything`);
    assert.equal(r.headers['x-served-by'], 'cloud-z');
    child.kill('SIGTERM');
    assert.equal(await exited, 0);
  } finally {
    child.kill('SIGKILL');
  }
});
