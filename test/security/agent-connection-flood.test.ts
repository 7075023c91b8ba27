// Issue 11 #10 at the scale: 5,000 connections that send a partial request head and
// stall (5,000 such connections were held 78 s before the fix). With the shipped connection cap
// (256; the defaults are pinned in test/agent/http-api.test.ts) the agent holds at most the cap;
// the rest are closed at once, the held ones when the header time runs out, and then it answers.
// The header time is shortened to 2 s here to keep the test short (its 10 s default is pinned there).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as net from 'node:net';
import * as http from 'node:http';
import { startAgent } from '../../agent/src';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Conn { socket: net.Socket; closedAt?: number; data: string }

function partial(port: number): Promise<Conn> {
  return new Promise((resolve) => {
    const c: Conn = { socket: net.connect(port, '127.0.0.1'), data: '' };
    c.socket.on('data', (d) => (c.data += d.toString()));
    c.socket.on('error', () => {});
    c.socket.once('close', () => (c.closedAt = performance.now()));
    c.socket.once('connect', () => { c.socket.write('GET /v1/snapshot HTTP/1.1\r\nHost: a\r\nX-Slow: '); resolve(c); });
    c.socket.once('close', () => resolve(c));
  });
}

/** Sockets the agent has accepted and not closed (server side: local port = the agent's). */
function agentSockets(agentPort: number): number {
  const handles = (process as unknown as { _getActiveHandles(): unknown[] })._getActiveHandles();
  return handles.filter((h) => h instanceof net.Socket && h.localPort === agentPort && !h.destroyed).length;
}

function healthz(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/healthz', agent: false }, (res) => { res.resume(); resolve(res.statusCode ?? 0); });
    req.on('error', reject);
    req.setTimeout(2000, () => req.destroy(new Error('timeout')));
  });
}

test('issue 11 #10: 5,000 partial-header connections: at most the shipped cap (256) held, the rest closed at once, all gone after the header time', async () => {
  const headersTimeoutMs = 2000;
  const agent = await startAgent({ log: { level: 'silent' }, listen: { host: '127.0.0.1', port: 0, headersTimeoutMs }, publishIntervalMs: 60_000, link: { peers: [] } } as never,
    { defaultMetrics: false });
  const conns: Conn[] = [];
  try {
    const cap = (agent as unknown as { config: { listen: { maxConnections: number } } }).config.listen.maxConnections;
    assert.equal(cap, 256, 'the shipped default cap');
    const t0 = performance.now();
    // What the agent holds is counted on its side (its accepted sockets; the agent runs in this
    // process): a client socket can still look open while it waits in the kernel's accept queue.
    // Early connections time out while later batches connect, so the peak is what is bounded.
    const held: number[] = [];
    for (let i = 0; i < 5000; i += 250) {
      conns.push(...(await Promise.all(Array.from({ length: 250 }, () => partial(agent.port)))));
      held.push(agentSockets(agent.port));
      await sleep(30); // lets the agent drain its accept queue (a full queue drops SYNs: 1 s retries)
    }
    const opened = performance.now() - t0;
    const peak = Math.max(...held);
    assert.ok(peak <= cap, `${peak} connections held at once (cap ${cap}): ${held.join(' ')}`);
    assert.ok(peak >= cap / 2, `the cap is used, not everything refused (peak ${peak}): ${held.join(' ')}`);
    // the held ones go when their header time runs out (408), not 78 s later
    const deadline = performance.now() + headersTimeoutMs * 4 + 2000;
    while (conns.some((c) => c.closedAt === undefined) && performance.now() < deadline) await sleep(50);
    const left = conns.filter((c) => c.closedAt === undefined).length;
    assert.equal(left, 0, `${left} connections still open ${(performance.now() - t0).toFixed(0)} ms after the flood began (opened in ${opened.toFixed(0)} ms)`);
    const answered408 = conns.filter((c) => /^HTTP\/1\.1 408 /.test(c.data)).length;
    assert.ok(answered408 >= peak - 5, `the held connections were answered 408 (${answered408}, peak ${peak})`);
    assert.equal(await healthz(agent.port), 200, 'the agent answers once the flood is gone');
  } finally {
    for (const c of conns) c.socket.destroy();
    await agent.stop();
  }
});
