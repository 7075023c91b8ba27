import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as net from 'node:net';
import { startLeasedLine, type LeasedLine } from '../../sim/leased-line';
import { median, request, sleep } from '../agent/_helpers';

let echo: net.Server;
let echoPort: number;
before(async () => {
  echo = net.createServer({ allowHalfOpen: true }, (s) => {
    s.on('data', (c) => s.write(c));
    s.on('end', () => s.end());
    s.on('error', () => {});
  });
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', () => r()));
  echoPort = (echo.address() as net.AddressInfo).port;
});
after(() => new Promise<void>((r) => echo.close(() => r())));

function connect(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect({ port, host: '127.0.0.1', noDelay: true }, () => resolve(s));
    s.once('error', reject);
  });
}

/** round trips of one byte through an open connection */
async function rtts(sock: net.Socket, n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await new Promise<void>((resolve) => {
      sock.once('data', () => resolve());
      sock.write(Buffer.from([i & 0xff]));
    });
    out.push(performance.now() - t0);
  }
  return out;
}

async function withLine<T>(opts: Partial<Parameters<typeof startLeasedLine>[0]>, fn: (l: LeasedLine) => Promise<T>): Promise<T> {
  const l = await startLeasedLine({ targetPort: echoPort, ...opts });
  try {
    return await fn(l);
  } finally {
    await l.close();
  }
}

test('adds the RTT it is told (and 0 adds ~nothing)', async () => {
  await withLine({ rttMs: 0 }, async (l) => {
    const s = await connect(l.port);
    // the lower bounds are exact (the line never delivers early); the upper ones leave a loaded CI
    // machine's timer lateness (tens of ms) while still telling 0, 40 and 120 apart
    const m0 = median(await rtts(s, 5));
    assert.ok(m0 < 20, `baseline ${m0}`);
    l.setDelay({ rttMs: 120 });
    const m = median(await rtts(s, 5));
    assert.ok(m >= 119 && m < 120 + 40, `rtt ${m} for 120`);
    l.setDelay({ rttMs: 40 });
    const m2 = median(await rtts(s, 5));
    assert.ok(m2 >= 39 && m2 < 40 + 40, `rtt ${m2} for 40`);
    s.destroy();
  });
});

test('control API: GET/PUT /delay (query and JSON body), /blackhole, validation', async () => {
  await withLine({ rttMs: 5, controlPort: 0 }, async (l) => {
    const base = l.controlUrl!;
    const g = await request(`${base}/delay`);
    assert.equal(g.status, 200);
    assert.deepEqual(JSON.parse(g.body.toString()), { rttMs: 5, jitterMs: 0, blackhole: 'off' });
    const p = await request(`${base}/delay?rttMs=200`, { method: 'PUT' });
    assert.equal(JSON.parse(p.body.toString()).rttMs, 200);
    assert.equal(l.getDelay().rttMs, 200);
    const b = await request(`${base}/delay`, { method: 'PUT', body: JSON.stringify({ rttMs: 60, jitterMs: 4 }) });
    assert.deepEqual(JSON.parse(b.body.toString()), { rttMs: 60, jitterMs: 4, blackhole: 'off' });
    const s = await connect(l.port);
    l.setDelay({ jitterMs: 0 });
    const m = median(await rtts(s, 3));
    assert.ok(m >= 59 && m < 60 + 25, `rtt ${m} after PUT 60`);
    s.destroy();
    assert.equal((await request(`${base}/delay?rttMs=-1`, { method: 'PUT' })).status, 400);
    assert.equal((await request(`${base}/delay?rttMs=abc`, { method: 'PUT' })).status, 400);
    assert.equal((await request(`${base}/delay`, { method: 'PUT', body: '{nope' })).status, 400);
    assert.equal((await request(`${base}/delay`, { method: 'DELETE' })).status, 405);
    assert.equal((await request(`${base}/nope`)).status, 404);
    const bh = await request(`${base}/blackhole?mode=drop`, { method: 'PUT' });
    assert.equal(JSON.parse(bh.body.toString()).blackhole, 'drop');
    assert.equal((await request(`${base}/blackhole?mode=maybe`, { method: 'PUT' })).status, 400);
    const st = JSON.parse((await request(`${base}/stats`)).body.toString());
    assert.ok(st.connectionsTotal >= 1);
  });
});

test('preserves byte order in both directions, even with jitter', async () => {
  await withLine({ rttMs: 20, jitterMs: 30 }, async (l) => {
    const s = await connect(l.port);
    const total = 200_000;
    const sent = Buffer.alloc(total);
    for (let i = 0; i < total; i++) sent[i] = (i * 7 + (i >> 8)) & 0xff;
    const got: Buffer[] = [];
    let n = 0;
    const done = new Promise<void>((resolve) =>
      s.on('data', (c: Buffer) => {
        got.push(c);
        n += c.length;
        if (n >= total) resolve();
      }),
    );
    // many small writes spread over time -> many separately delayed chunks
    for (let off = 0; off < total; ) {
      const len = 1 + ((off * 13) % 997);
      s.write(sent.subarray(off, off + len));
      off += len;
      if (off % 7 === 0) await new Promise((r) => setImmediate(r));
    }
    await done;
    assert.ok(Buffer.concat(got).equals(sent), 'echoed bytes identical and in order');
    s.destroy();
  });
});

test('half-close is delivered after the delay', async () => {
  await withLine({ rttMs: 60 }, async (l) => {
    const s = await connect(l.port);
    const t0 = performance.now();
    const ended = new Promise<number>((r) => s.on('end', () => r(performance.now() - t0)));
    const data: Buffer[] = [];
    s.on('data', (c) => data.push(c));
    s.end('bye');
    const ms = await ended;
    assert.equal(Buffer.concat(data).toString(), 'bye');
    assert.ok(ms >= 59, `end after ${ms}`);
  });
});

test('blackhole stall holds data, drop discards it; lifting the stall delivers in order', async () => {
  await withLine({ rttMs: 0 }, async (l) => {
    const s = await connect(l.port);
    const data: Buffer[] = [];
    s.on('data', (c) => data.push(c));
    l.setBlackhole('stall');
    s.write('one,');
    s.write('two');
    await sleep(150);
    assert.equal(Buffer.concat(data).length, 0, 'nothing while stalled');
    l.setBlackhole('off');
    await sleep(50);
    assert.equal(Buffer.concat(data).toString(), 'one,two');
    l.setBlackhole('drop');
    s.write('lost');
    await sleep(100);
    assert.equal(Buffer.concat(data).toString(), 'one,two');
    assert.ok(l.stats().bytesDropped >= 4);
    l.setBlackhole('off');
    s.write('!');
    await sleep(50);
    assert.equal(Buffer.concat(data).toString(), 'one,two!');
    s.destroy();
  });
});

test('upstream refused: the client connection is closed', { timeout: 10000 }, async () => {
  const free = await new Promise<number>((r) => {
    const srv = net.createServer().listen(0, '127.0.0.1', () => {
      const p = (srv.address() as net.AddressInfo).port;
      srv.close(() => r(p));
    });
  });
  const logs: string[] = [];
  const l = await startLeasedLine({ targetPort: free, rttMs: 10, log: (msg) => logs.push(msg) });
  try {
    const t0 = performance.now();
    const s = await connect(l.port);
    let bytes = 0;
    let ended = false;
    let error: Error | undefined;
    s.on('data', (c: Buffer) => (bytes += c.length));
    s.on('end', () => (ended = true));
    s.on('error', (e) => (error = e));
    // Bounded: a proxy that keeps the client open after the upstream failed fails here, not by
    // hanging the suite.
    const closed = await new Promise<boolean>((r) => {
      const t = setTimeout(() => r(false), 3000);
      s.on('close', () => {
        clearTimeout(t);
        r(true);
      });
    });
    const tookMs = performance.now() - t0;
    assert.ok(closed, 'the client connection was not closed within 3 s of the upstream refusing');
    assert.equal(bytes, 0, 'nothing was delivered to the client');
    assert.equal(error, undefined, 'closed with EOF, not reset');
    assert.ok(ended, 'the client saw EOF');
    // The EOF travels the line like data: it arrives after (about) the one-way delay, not at once.
    assert.ok(tookMs >= 4, `EOF after the one-way delay (took ${tookMs.toFixed(1)} ms)`);
    assert.ok(logs.includes('upstream error'), 'the refused upstream was logged');
    // Both sides released.
    const deadline = Date.now() + 2000;
    while (l.stats().connectionsActive !== 0 && Date.now() < deadline) await sleep(10);
    assert.deepEqual([l.stats().connectionsTotal, l.stats().connectionsActive], [1, 0]);
    s.destroy();
  } finally {
    await l.close();
  }
});

test('CLI: listens, control API changes the delay, exits 0 on SIGTERM', async () => {
  const { spawn } = await import('node:child_process');
  const path = await import('node:path');
  const ROOT = path.resolve(__dirname, '../..');
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', path.join(ROOT, 'sim/leased-line.ts'), '--listen', '0', '--target', `127.0.0.1:${echoPort}`, '--control', '127.0.0.1:0', '--rtt-ms', '30'],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const exited = new Promise<number | null>((r) => child.on('exit', (c) => r(c)));
  try {
    const up = await new Promise<any>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('no start line')), 15000);
      let buf = '';
      child.stdout!.on('data', (c: Buffer) => {
        buf += c.toString();
        for (const line of buf.split('\n')) {
          if (line.includes('"leased line up"')) {
            clearTimeout(t);
            resolve(JSON.parse(line));
          }
        }
      });
    });
    assert.equal(up.rttMs, 30);
    const port = Number(up.listen.split(':').pop());
    const s = await connect(port);
    const m = median(await rtts(s, 3));
    assert.ok(m >= 29 && m < 30 + 25, `rtt ${m}`);
    await request(`${up.control}/delay?rttMs=90`, { method: 'PUT' });
    const m2 = median(await rtts(s, 3));
    assert.ok(m2 >= 89 && m2 < 90 + 25, `rtt ${m2}`);
    s.destroy();
    child.kill('SIGTERM');
    assert.equal(await exited, 0);
  } finally {
    child.kill('SIGKILL');
  }
});
