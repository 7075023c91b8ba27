import { test, before, after } from 'node:test';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import assert from 'node:assert/strict';
import { spawnAgent } from '../../agent/src/spawn';
import { startAgent, type AgentHandle } from '../../agent/src/agent';
import { decodeSnapshot, CONTENT_TYPE } from '../../agent/src/snapshot/codec';
import { startCloudService, type CloudService } from '../../sim/cloud-service';
import { request, sleep, waitForEvent } from './_helpers';

const silent = { log: { level: 'silent' as const } };
// a minimal file config (an empty file is refused: nothing to probe or scrape)
const CONFIG = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'swy-api-')), 'agent.yaml');
fs.writeFileSync(CONFIG, 'link:\n  peers:\n    - name: cloud-b\n      probe: { kind: tcp, address: "127.0.0.1:9" }\n      intervalMs: 1000\n');
let svc: CloudService;
let agent: AgentHandle;

before(async () => {
  svc = await startCloudService({ cloud: 'cloud-b' });
  agent = await startAgent(
    {
      ...silent,
      listen: { port: 0 },
      publishIntervalMs: 60000, // no periodic publication during these tests: only state changes
      link: { peers: [{ name: 'cloud-b', probe: { kind: 'http', url: `${svc.url}/healthz` }, intervalMs: 20, recoverAfter: 2 }] },
    },
    { defaultMetrics: false },
  );
  if (agent.status('cloud-b') !== 'healthy') await waitForEvent(agent.events, 'state', (e: any) => e.to === 'normal', 3000);
});
after(async () => {
  await agent.stop();
  await svc.close();
});

const seqOf = (r: { headers: Record<string, unknown> }) => Number(r.headers['x-switchyard-seq']);

test('GET /healthz, /status, /status?peer=', async () => {
  const h = await request(`${agent.url}/healthz`);
  assert.equal(h.status, 200);
  assert.equal(h.body.toString().trim(), 'ok');
  const s = await request(`${agent.url}/status`);
  assert.equal(s.status, 200);
  assert.match(String(s.headers['content-type']), /^text\/plain/);
  assert.equal(s.body.toString(), 'healthy');
  assert.equal((await request(`${agent.url}/status?peer=cloud-b`)).body.toString(), 'healthy');
  assert.equal((await request(`${agent.url}/status?peer=nope`)).status, 404);
});

test('unknown path 404, wrong method 405, bad parameters 400', async () => {
  assert.equal((await request(`${agent.url}/nope`)).status, 404);
  const m = await request(`${agent.url}/status`, { method: 'POST' });
  assert.equal(m.status, 405);
  assert.match(String(m.headers.allow), /GET/);
  assert.equal((await request(`${agent.url}/v1/snapshot`, { method: 'DELETE' })).status, 405);
  assert.equal((await request(`${agent.url}/v1/snapshot?waitMs=abc&after=1`)).status, 400);
  assert.equal((await request(`${agent.url}/v1/snapshot?after=-1`)).status, 400);
  assert.equal((await request(`${agent.url}/v1/snapshot?format=xml`)).status, 400);
});

test('GET /v1/snapshot: binary v1 with x-switchyard-seq; ?format=json is the same document', async () => {
  const b = await request(`${agent.url}/v1/snapshot`);
  assert.equal(b.status, 200);
  assert.equal(b.headers['content-type'], CONTENT_TYPE);
  const d = decodeSnapshot(b.body);
  assert.equal(seqOf(b), d.seq);
  assert.equal(d.peers[0].name, 'cloud-b');
  assert.equal(d.peers[0].state, 'normal');
  assert.ok(d.peers[0].lastRttMs > 0 && d.peers[0].lastRttMs < 50);
  assert.ok(Math.abs(d.generatedAtMs - Date.now()) < 70000);
  const bootMs = Math.floor(d.seq / 1000);
  assert.ok(Math.abs(bootMs - Date.now()) < 60000, 'seq starts at boot-ms x 1000');
  const j = await request(`${agent.url}/v1/snapshot?format=json`);
  assert.match(String(j.headers['content-type']), /json/);
  const doc = JSON.parse(j.body.toString());
  assert.equal(doc.seq, seqOf(j));
  assert.equal(doc.peers[0].name, 'cloud-b');
  assert.equal(doc.peers[0].state, 'normal');
});

test('long poll: answers immediately when seq != after (or no after)', async () => {
  const cur = seqOf(await request(`${agent.url}/v1/snapshot`));
  const r = await request(`${agent.url}/v1/snapshot?after=${cur - 1}&waitMs=5000`);
  assert.ok(r.ms < 500, `took ${r.ms} ms`);
  assert.equal(seqOf(r), cur);
  const r2 = await request(`${agent.url}/v1/snapshot?waitMs=5000`);
  assert.ok(r2.ms < 500);
});

test('long poll: times out after waitMs with the same snapshot', async () => {
  const cur = seqOf(await request(`${agent.url}/v1/snapshot`));
  const r = await request(`${agent.url}/v1/snapshot?after=${cur}&waitMs=300`);
  assert.equal(r.status, 200);
  assert.ok(r.ms >= 290 && r.ms < 1500, `took ${r.ms} ms`);
  assert.equal(seqOf(r), cur);
});

test('long poll: answers as soon as a state change publishes a new snapshot; waiters gauge', async () => {
  const cur = seqOf(await request(`${agent.url}/v1/snapshot`));
  const t0 = performance.now();
  const pending = request(`${agent.url}/v1/snapshot?after=${cur}&waitMs=10000`);
  await sleep(150);
  const metrics = (await request(`${agent.url}/metrics`)).body.toString();
  assert.match(metrics, /^switchyard_longpoll_waiters 1$/m);
  svc.setHealthStatus(503); // next probe (<= 20 ms) fails -> degraded -> immediate publication
  const tChange = performance.now();
  const r = await pending;
  const latency = performance.now() - tChange;
  svc.setHealthStatus(200);
  assert.ok(performance.now() - t0 >= 150);
  assert.ok(latency < 400, `answered ${latency} ms after the change`);
  const d = decodeSnapshot(r.body);
  assert.equal(d.seq, cur + 1);
  assert.equal(d.peers[0].state, 'degraded');
  assert.ok(Number.isNaN(d.peers[0].lastRttMs), 'failed sample -> NaN');
  await waitForEvent(agent.events, 'state', (e: any) => e.to === 'normal', 3000);
});

test('waitMs is clamped to 30000 (not rejected)', async () => {
  const r = await request(`${agent.url}/v1/snapshot?after=1&waitMs=99999999`);
  assert.equal(r.status, 200);
});

test('GET /metrics exposes the agent metrics', async () => {
  const r = await request(`${agent.url}/metrics`);
  assert.equal(r.status, 200);
  const t = r.body.toString();
  for (const name of [
    'switchyard_probe_rtt_seconds_bucket{le="0.05",peer="cloud-b",outcome="ok"}',
    'switchyard_probes_total{peer="cloud-b",outcome="ok"}',
    'switchyard_probe_samples_total{peer="cloud-b",result="ok"}',
    'switchyard_probe_samples_total{peer="cloud-b",result="http_error"}',
    'switchyard_peer_state{peer="cloud-b"} 0',
    'switchyard_peer_state_transitions_total{peer="cloud-b",to="degraded"}',
    'switchyard_peer_state_transitions_total{peer="cloud-b",to="normal"}',
    'switchyard_snapshot_seq ',
    'switchyard_snapshot_publishes_total{reason="state_change"}',
    'switchyard_longpoll_waiters ',
    'switchyard_probes_in_flight{peer="cloud-b"}',
  ]) assert.ok(t.includes(name), `missing ${name}`);
});

test('periodic publication: a fresh snapshot at least every publishIntervalMs', async () => {
  const a = await startAgent({ ...silent, listen: { port: 0 }, publishIntervalMs: 50, link: { peers: [] } }, { defaultMetrics: false });
  try {
    const first = decodeSnapshot((await request(`${a.url}/v1/snapshot`)).body);
    const r = await request(`${a.url}/v1/snapshot?after=${first.seq}&waitMs=2000`);
    assert.ok(r.ms < 300, `took ${r.ms}`);
    const second = decodeSnapshot(r.body);
    assert.equal(second.seq, first.seq + 1);
    assert.ok(second.generatedAtMs >= first.generatedAtMs + 40);
    assert.equal(a.status(), 'healthy', 'no peers -> healthy');
  } finally {
    await a.stop();
  }
});

test('stop() answers held long polls and closes the server', async () => {
  const a = await startAgent({ ...silent, listen: { port: 0 }, publishIntervalMs: 60000, link: { peers: [] } }, { defaultMetrics: false });
  const seq = a.snapshot().snapshot.seq;
  const pending = request(`${a.url}/v1/snapshot?after=${seq}&waitMs=30000`);
  await sleep(100);
  const t0 = performance.now();
  await a.stop();
  const r = await pending;
  assert.equal(r.status, 200);
  assert.ok(performance.now() - t0 < 1000);
  await assert.rejects(request(`${a.url}/healthz`));
});

test('CLI (via spawnAgent): serves, and SIGTERM answers waiters and exits 0', async () => {
  const a = await spawnAgent({
    configPath: CONFIG,
    env: { SWITCHYARD_LISTEN_PORT: '0', SWITCHYARD_LOG_LEVEL: 'info', SWITCHYARD_PUBLISH_INTERVAL_MS: '60000', SWITCHYARD_CONFIG: '' },
  });
  try {
    assert.equal((await request(`${a.url}/healthz`)).status, 200);
    const seq = seqOf(await request(`${a.url}/v1/snapshot`));
    const pending = request(`${a.url}/v1/snapshot?after=${seq}&waitMs=30000`);
    await sleep(100);
    const code = a.stop();
    const r = await pending;
    assert.equal(r.status, 200);
    assert.equal(await code, 0);
  } finally {
    a.child.kill('SIGKILL');
  }
});

test('CLI (via spawnAgent): port in use exits 1 with one line naming host:port', async () => {
  await assert.rejects(
    spawnAgent({ configPath: CONFIG, env: { SWITCHYARD_LISTEN_PORT: String(agent.port), SWITCHYARD_LISTEN_HOST: '127.0.0.1', SWITCHYARD_CONFIG: '' } }),
    (e: any) => {
      assert.equal(e.exitCode, 1);
      const stderr = String(e.message).replace(/^agent exited with code 1: /, '');
      assert.equal(stderr, `switchyard-agent: cannot listen on 127.0.0.1:${agent.port}: address already in use (EADDRINUSE)`);
      return true;
    },
  );
});

test('startAgent: port in use rejects with a ListenError naming host:port', async () => {
  await assert.rejects(startAgent({ ...silent, listen: { host: '127.0.0.1', port: agent.port } }, { defaultMetrics: false }), {
    name: 'ListenError',
    message: `cannot listen on 127.0.0.1:${agent.port}: address already in use (EADDRINUSE)`,
  });
});

/** a raw connection that sends half a request line and nothing more; resolves when the server closes it */
function partialHeaders(port: number): { socket: net.Socket; closed: Promise<{ ms: number; data: string }> } {
  const t0 = performance.now();
  const socket = net.connect(port, '127.0.0.1');
  let data = '';
  socket.on('data', (c) => (data += c.toString()));
  socket.on('error', () => {});
  socket.on('connect', () => socket.write('GET /healthz HTTP/1.1\r\nHost: a\r\nX-Slow: '));
  return { socket, closed: new Promise((r) => socket.once('close', () => r({ ms: performance.now() - t0, data }))) };
}

test('connection cap: at listen.maxConnections the oldest partial connection makes room for a new one; with every connection busy the new one is closed at once', async () => {
  // issue 24 #4: closing every new connection at the cap let held partial connections lock clients out
  const a = await startAgent({ ...silent, listen: { port: 0, maxConnections: 3, headersTimeoutMs: 60_000 }, publishIntervalMs: 60_000, link: { peers: [] } }, { defaultMetrics: false });
  try {
    const held = [partialHeaders(a.port), partialHeaders(a.port), partialHeaders(a.port)];
    await sleep(200);
    assert.equal((await request(`${a.url}/healthz`)).status, 200, 'a fresh client is served at the cap');
    const first = await Promise.race([held[0].closed, sleep(2000).then(() => undefined)]);
    assert.ok(first !== undefined, 'the oldest partial connection was closed for it');
    for (const h of held) h.socket.destroy();
    await sleep(100);
    // every connection busy (long polls the agent holds): nothing to shed, the new one is closed
    const seq = Number((await request(`${a.url}/v1/snapshot`)).headers['x-switchyard-seq']);
    await sleep(100);
    const polls = [0, 1, 2].map(() => request(`${a.url}/v1/snapshot?after=${seq}&waitMs=1500`).catch(() => undefined));
    await sleep(300);
    const extra = partialHeaders(a.port);
    const r = await Promise.race([extra.closed, sleep(1000).then(() => undefined)]);
    assert.ok(r !== undefined && r.ms < 1000, `the connection over the cap is closed at once when all are busy (${JSON.stringify(r)}, polls ${JSON.stringify((await Promise.all(polls)).map((x) => x?.status))})`);
    const done = await Promise.all(polls);
    assert.ok(done.every((x) => x?.status === 200), 'the long polls were not shed');
  } finally {
    await a.stop();
  }
});

test('header time: a connection that never completes its headers is closed after listen.headersTimeoutMs', async () => {
  const a = await startAgent({ ...silent, listen: { port: 0, headersTimeoutMs: 300 }, publishIntervalMs: 60000, link: { peers: [] } }, { defaultMetrics: false });
  try {
    const conns = Array.from({ length: 20 }, () => partialHeaders(a.port));
    const closed = await Promise.all(conns.map((c) => Promise.race([c.closed, sleep(5000).then(() => ({ ms: Infinity, data: '' }))])));
    for (const c of closed) {
      assert.ok(c.ms >= 250 && c.ms < 2000, `closed after ${c.ms} ms`);
      assert.match(c.data, /^HTTP\/1\.1 408 /);
    }
    // a well-behaved long poll on the same server outlives the header time
    const seq = Number((await request(`${a.url}/v1/snapshot`)).headers['x-switchyard-seq']);
    const t0 = performance.now();
    const r = await request(`${a.url}/v1/snapshot?after=${seq}&waitMs=800`);
    assert.equal(r.status, 200);
    assert.ok(performance.now() - t0 >= 750);
  } finally {
    await a.stop();
  }
});

test('defaults: 256 connections, 10 s header time', () => {
  assert.equal(agent.config.listen.maxConnections, 256);
  assert.equal(agent.config.listen.headersTimeoutMs, 10_000);
});
