// Issue 24 #3 and #4: the agent's listeners under a flood of partial-header connections.
// #4: with the main listener's cap (256) taken by 300 partial-header connections, 3 of 20 fresh
// clients were served (Node's maxConnections closes every new connection at the cap). At the cap
// the oldest partial (else idle) connection is now closed for the new one (agent/src/api/guard.ts).
// #3: the rules admin listener had no cap, no header time and no request time (5,000 partial
// connections all held after 70 s) and "port in use" on it exited with a Node stack trace.
// Shipped defaults throughout (cap 256, header time 10 s on both listeners).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { startAgent, type AgentHandle } from '../../agent/src';
import { spawnAgent } from '../../agent/src/spawn';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Conn { socket: net.Socket; closedAt?: number }

function partial(port: number): Promise<Conn> {
  return new Promise((resolve) => {
    const c: Conn = { socket: net.connect(port, '127.0.0.1') };
    c.socket.on('error', () => {});
    c.socket.on('data', () => {}); // reads the 408 and the close
    c.socket.once('close', () => { c.closedAt = performance.now(); resolve(c); });
    c.socket.once('connect', () => { c.socket.write('GET /v1/rules HTTP/1.1\r\nHost: a\r\nX-Slow: '); resolve(c); });
  });
}

async function flood(port: number, n: number, held?: number[]): Promise<Conn[]> {
  const conns: Conn[] = [];
  for (let i = 0; i < n; i += 250) {
    conns.push(...(await Promise.all(Array.from({ length: Math.min(250, n - i) }, () => partial(port)))));
    held?.push(serverSockets(port));
    await sleep(30); // lets the agent drain its accept queue
  }
  return conns;
}

/** Sockets the agent (in this process) has accepted and not closed on `port`. */
function serverSockets(port: number): number {
  const handles = (process as unknown as { _getActiveHandles(): unknown[] })._getActiveHandles();
  return handles.filter((h) => h instanceof net.Socket && h.localPort === port && !h.destroyed).length;
}

function get(port: number, p: string): Promise<number> {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: p, agent: false }, (res) => { res.resume(); resolve(res.statusCode ?? 0); });
    req.on('error', () => resolve(0));
    req.setTimeout(3000, () => req.destroy(new Error('timeout')));
  });
}

const RULES = {
  variables: [{ name: 'maintenance', kind: 'flag' }],
  sets: [{ name: 'payments', authorities: ['payment.example'], rules: [{ id: 'default', condition: 'TRUE', priority: 0, action: { kind: 'route', target: 'dc1' } }] }],
  admin: { host: '127.0.0.1', port: 0 },
};

async function agentWithAdmin(): Promise<AgentHandle> {
  return startAgent({ log: { level: 'silent' }, listen: { host: '127.0.0.1', port: 0 }, publishIntervalMs: 60_000, link: { peers: [] }, rules: RULES } as never,
    { defaultMetrics: false });
}

test('issue 24 #4: with the main listener\'s cap taken by 300 partial-header connections, 20 fresh clients are all served', async () => {
  const agent = await startAgent({ log: { level: 'silent' }, listen: { host: '127.0.0.1', port: 0 }, publishIntervalMs: 60_000, link: { peers: [] } } as never,
    { defaultMetrics: false });
  let conns: Conn[] = [];
  try {
    conns = await flood(agent.port, 300);
    assert.ok(serverSockets(agent.port) <= 256, 'the cap holds');
    const codes: number[] = [];
    for (let i = 0; i < 20; i++) codes.push(await get(agent.port, '/healthz'));
    assert.deepEqual(codes, Array(20).fill(200), `fresh clients served: ${codes.join(' ')}`);
    // the flood only evicted itself: its oldest connections went first
    const closed = conns.map((c, i) => (c.closedAt !== undefined ? i : -1)).filter((i) => i >= 0);
    assert.ok(closed.length >= 300 - 256, `${closed.length} flood connections closed`);
  } finally {
    for (const c of conns) c.socket.destroy();
    await agent.stop();
  }
});

test('issue 24 #3/#4: the admin listener caps 5,000 partial-header connections, serves fresh clients meanwhile and closes the rest after the header time', async () => {
  const agent = await agentWithAdmin();
  let conns: Conn[] = [];
  try {
    const port = Number(new URL(agent.rules!.adminUrl!).port);
    const held: number[] = [];
    const t0 = performance.now();
    conns = await flood(port, 5000, held);
    const opened = performance.now();
    const peak = Math.max(...held);
    assert.ok(peak <= 256, `${peak} admin connections held at once (cap 256): ${held.join(' ')}`);
    const codes: number[] = [];
    for (let i = 0; i < 20; i++) codes.push(await get(port, '/v1/rules'));
    assert.deepEqual(codes, Array(20).fill(200), `fresh admin clients served: ${codes.join(' ')}`);
    // the shipped 10 s header time closes the held ones (before: all still held after 70 s)
    const deadline = opened + 10_000 + 5_000;
    while (conns.some((c) => c.closedAt === undefined) && performance.now() < deadline) await sleep(100);
    const left = conns.filter((c) => c.closedAt === undefined).length;
    assert.equal(left, 0, `${left} admin connections still open ${((performance.now() - t0) / 1000).toFixed(1)} s after the flood began (opened in ${((opened - t0) / 1000).toFixed(1)} s)`);
  } finally {
    for (const c of conns) c.socket.destroy();
    await agent.stop();
  }
});

test('issue 24 #3: admin port in use: the CLI exits 1 with one line naming host:port', async () => {
  const busy = net.createServer();
  await new Promise<void>((r) => busy.listen(0, '127.0.0.1', () => r()));
  const port = (busy.address() as net.AddressInfo).port;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swy-admin-busy-'));
  const file = path.join(dir, 'agent.yaml');
  fs.writeFileSync(file, JSON.stringify({ listen: { host: '127.0.0.1', port: 0 }, link: { peers: [{ name: 'cloud-b', probe: { kind: 'http', url: 'http://127.0.0.1:9/healthz' } }] }, rules: { ...RULES, admin: { host: '127.0.0.1', port } } }));
  try {
    await assert.rejects(spawnAgent({ configPath: file, env: { SWITCHYARD_CONFIG: '', SWITCHYARD_LISTEN_PORT: '', SWITCHYARD_LISTEN_HOST: '' } }), (e: Error & { exitCode?: number }) => {
      assert.equal(e.exitCode, 1, e.message);
      const stderr = String(e.message).replace(/^agent exited with code 1: /, '').trim();
      assert.equal(stderr, `switchyard-agent: cannot listen on 127.0.0.1:${port}: address already in use (EADDRINUSE)`);
      return true;
    });
  } finally {
    busy.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
