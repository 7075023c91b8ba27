// The probers themselves (agent/src/link/probe.ts): HTTP keep-alive, TCP connect, timeout, abort.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as http from 'node:http';
import * as net from 'node:net';
import type { AddressInfo } from 'node:net';
import { createProber } from '../../agent/src/link/probe';

function listen<S extends net.Server>(server: S): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)));
}

function close(server: net.Server): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}

/** A port nothing listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const s = net.createServer();
  const port = await listen(s);
  await close(s);
  return port;
}

test('HTTP prober: steady-state probes reuse one keep-alive connection; 2xx ok, other status http_error', { timeout: 10_000 }, async () => {
  let connections = 0;
  let status = 204;
  const server = http.createServer((_req, res) => { res.statusCode = status; res.end(); });
  server.on('connection', () => connections++);
  const port = await listen(server);
  const prober = createProber({ kind: 'http', url: `http://127.0.0.1:${port}/health` }, 1000, 4);
  try {
    for (let i = 0; i < 5; i++) {
      const r = await prober.run(new AbortController().signal);
      assert.equal(r.outcome, 'ok');
      assert.equal(r.status, 204);
      assert.ok(r.rttMs > 0 && r.rttMs < 1000, `rtt ${r.rttMs}`);
    }
    assert.equal(connections, 1, 'five sequential probes, one TCP connection: the RTT is not a handshake');
    status = 503;
    const bad = await prober.run(new AbortController().signal);
    assert.equal(bad.outcome, 'http_error');
    assert.equal(bad.status, 503);
  } finally {
    prober.close();
    server.closeAllConnections();
    await close(server);
  }
});

test('TCP prober: a listening port is ok, a closed port is an error, an abort ends the probe', { timeout: 10_000 }, async () => {
  const server = net.createServer((sock) => sock.destroy());
  const port = await listen(server);
  const prober = createProber({ kind: 'tcp', address: `127.0.0.1:${port}` }, 1000, 4);
  try {
    const ok = await prober.run(new AbortController().signal);
    assert.equal(ok.outcome, 'ok');
    assert.ok(ok.rttMs > 0 && ok.rttMs < 1000, `rtt ${ok.rttMs}`);

    const refused = await createProber({ kind: 'tcp', address: `127.0.0.1:${await closedPort()}` }, 1000, 4).run(new AbortController().signal);
    assert.equal(refused.outcome, 'error');
    assert.equal(refused.error, 'ECONNREFUSED');

    const ac = new AbortController();
    ac.abort();
    assert.equal((await prober.run(ac.signal)).outcome, 'aborted', 'already aborted: no connect');
  } finally {
    prober.close();
    await close(server);
  }
});

test('HTTP prober: the configured Host header is sent; no answer within timeoutMs is a timeout; an abort in flight ends the probe; refused is an error', { timeout: 10_000 }, async () => {
  const hosts: Array<string | undefined> = [];
  let answer = true;
  const server = http.createServer((req, res) => {
    hosts.push(req.headers.host);
    if (answer) res.end('ok');
    // else: never answers
  });
  const port = await listen(server);
  const prober = createProber({ kind: 'http', url: `http://127.0.0.1:${port}/healthz`, host: 'peer.example' }, 200, 4);
  try {
    assert.equal((await prober.run(new AbortController().signal)).outcome, 'ok');
    assert.deepEqual(hosts, ['peer.example']);

    answer = false;
    const t0 = Date.now();
    const slow = await prober.run(new AbortController().signal);
    assert.equal(slow.outcome, 'timeout');
    assert.equal(slow.error, 'no answer within 200 ms');
    assert.ok(slow.rttMs >= 190 && Date.now() - t0 < 2000, `rtt ${slow.rttMs}`);

    const ac = new AbortController();
    const pending = prober.run(ac.signal);
    setTimeout(() => ac.abort(), 50);
    const aborted = await pending;
    assert.equal(aborted.outcome, 'aborted');
    assert.ok(aborted.rttMs >= 40 && aborted.rttMs < 190, `aborted after ${aborted.rttMs} ms, before the timeout`);

    const pre = new AbortController();
    pre.abort();
    assert.equal((await prober.run(pre.signal)).outcome, 'aborted');
  } finally {
    prober.close();
    server.closeAllConnections();
    await close(server);
  }
  const refused = createProber({ kind: 'http', url: `http://127.0.0.1:${await closedPort()}/` }, 1000, 4);
  const r = await refused.run(new AbortController().signal);
  refused.close();
  assert.deepEqual([r.outcome, r.error], ['error', 'ECONNREFUSED']);
});
