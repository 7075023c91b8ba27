// Large /metrics pages (issue 11 §9): the body is parsed as it arrives and aborted at the cap.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import { Registry } from 'prom-client';
import { InferenceCollector } from '../../agent/src/inference/collector';
import { ExpositionParser, parseExposition } from '../../agent/src/inference/exposition';
import { scrapeOnce } from '../../agent/src/inference/scraper';
import { mulberry32 } from '../../sim/inference/prng';

const FIXTURE = fs.readFileSync(path.join(__dirname, 'fixtures', 'vllm.txt'), 'utf8');
const FILLER = '# HELP filler_metric padding\n# TYPE filler_metric gauge\n' + Array.from({ length: 1000 }, (_, i) => `filler_metric{i="${i}",pad="${'x'.repeat(40)}"} ${i}\n`).join('');

/** a server whose page is the vLLM fixture followed by `extraBytes` of valid filler, streamed in 64 KiB writes */
async function bigPageServer(extraBytes: number): Promise<{ addr: string; written: () => number; close: () => Promise<void> }> {
  let written = 0;
  const srv = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
    res.write(FIXTURE);
    let left = extraBytes;
    const lines = FILLER.split('\n').slice(2).map((l) => l + '\n');
    let body = FILLER.slice(0, FILLER.indexOf('filler_metric{'));
    for (let k = 0; body.length < 65536; k++) body += lines[k % lines.length];
    const chunk = Buffer.from(body.replace(/^# HELP.*\n# TYPE.*\n/, ''));
    let first = true;
    const pump = (): void => {
      while (left > 0) {
        // whole lines only; the TYPE line once
        const c = first ? Buffer.concat([Buffer.from('# TYPE filler_metric gauge\n'), chunk]) : chunk;
        first = false;
        left -= c.length;
        written += c.length;
        if (!res.write(c)) {
          res.once('drain', pump);
          return;
        }
      }
      res.end();
    };
    res.on('close', () => (left = 0));
    pump();
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  return {
    addr: `127.0.0.1:${(srv.address() as AddressInfo).port}`,
    written: () => written,
    close: () =>
      new Promise<void>((r) => {
        srv.closeAllConnections();
        srv.close(() => r());
      }),
  };
}

test('ExpositionParser: any split of the body into chunks parses to the same exposition', () => {
  const whole = parseExposition(FIXTURE);
  const rng = mulberry32(3);
  for (let k = 0; k < 50; k++) {
    const p = new ExpositionParser();
    let i = 0;
    while (i < FIXTURE.length) {
      const n = 1 + Math.floor(rng() * 300);
      p.push(FIXTURE.slice(i, i + n));
      i += n;
    }
    const got = p.end();
    assert.equal(got.sampleCount, whole.sampleCount);
    assert.deepEqual([...got.samples.entries()], [...whole.samples.entries()]);
  }
  // a malformed line is reported with its line number across chunk borders
  const bad = FIXTURE.replace('vllm:num_requests_waiting{engine="0"', 'vllm:num_requests_waiting{engine="0');
  const goodLines = FIXTURE.split('\n');
  const line = bad.split('\n').findIndex((l, i) => l !== goodLines[i]) + 1;
  const p = new ExpositionParser();
  assert.throws(() => {
    for (let i = 0; i < bad.length; i += 7) p.push(bad.slice(i, i + 7));
    p.end();
  }, new RegExp(`line ${line}: `));
});

test('ExpositionParser: `keep` stores only the mapped series; a line without end is bounded', () => {
  const p = new ExpositionParser({ keep: (n) => n === 'vllm:num_requests_running' });
  p.push(FIXTURE);
  const e = p.end();
  assert.deepEqual([...e.samples.keys()], ['vllm:num_requests_running']);
  assert.ok(e.sampleCount > 50, 'every line still validated and counted');
  const q = new ExpositionParser();
  assert.throws(() => {
    for (let i = 0; i < 3; i++) q.push('a'.repeat(600_000));
  }, /line longer than 1048576 characters/);
});

test('scrape of a 50 MB page: aborted at the 8 MiB default cap, long before the page is sent; instance unhealthy with the reason', async () => {
  const srv = await bigPageServer(50 * 1024 * 1024);
  // a generous scrape timeout: this test is about the size cap, not about a loaded CI machine's speed
  const col = new InferenceCollector({ scrapeIntervalMs: 600_000, scrapeTimeoutMs: 20_000, services: [{ name: 'm', kind: 'vllm', instances: { static: [srv.addr] } }] }, { registry: new Registry() });
  const errors: string[] = [];
  col.on('scrapeError', (e: { message: string }) => errors.push(e.message));
  try {
    assert.equal(col.config.maxBodyBytes, 8 * 1024 * 1024, 'shipped default');
    await col.start();
    await col.scrapeAll();
    const r = col.snapshot()[0];
    assert.equal(r.healthy, false);
    assert.equal(r.reason, 'http_error');
    assert.match(errors[0], new RegExp(`inference instance m/${srv.addr.replace(/\./g, '\\.')}: body larger than 8388608 bytes \\(aborted after \\d+\\)`));
    const after = Number(/aborted after (\d+)/.exec(errors[0])![1]);
    assert.ok(after <= 8 * 1024 * 1024 + 65536 * 2, `read ${after} bytes`);
    await new Promise((res) => setTimeout(res, 200));
    assert.ok(srv.written() < 20 * 1024 * 1024, `the server got to write ${srv.written()} of 50 MiB before the agent hung up`);
  } finally {
    await col.stop();
    await srv.close();
  }
});

test('scrape of a 7 MB page under the cap: parsed chunk by chunk, only mapped series kept, the event loop keeps turning', async () => {
  const srv = await bigPageServer(7 * 1024 * 1024);
  try {
    // a 5 ms timer must keep firing while the page is read and parsed: no single parse step holds the loop
    let ticks = 0;
    let worstGapMs = 0;
    let last = performance.now();
    const timer = setInterval(() => {
      const now = performance.now();
      worstGapMs = Math.max(worstGapMs, now - last);
      last = now;
      ticks++;
    }, 5);
    const out = await scrapeOnce({ addr: srv.addr, path: '/metrics', scheme: 'http' }, { timeoutMs: 30_000, maxBodyBytes: 8 * 1024 * 1024, parse: { keep: (n) => n.startsWith('vllm:') } });
    clearInterval(timer);
    assert.ok(out.ok, out.ok ? '' : out.message);
    if (!out.ok) return;
    assert.ok(out.bytes > 7 * 1024 * 1024);
    assert.ok(![...out.exposition.samples.keys()].some((k) => k.startsWith('filler')), 'unmapped series not stored');
    assert.ok(out.exposition.sampleCount > 100_000);
    assert.ok(ticks >= 5, `${ticks} timer ticks during the scrape (${out.durationMs.toFixed(0)} ms)`);
    // generous: one 64 KiB chunk parses in a few ms; the whole page at once took hundreds
    assert.ok(worstGapMs < 150, `worst timer gap ${worstGapMs.toFixed(1)} ms`);
  } finally {
    await srv.close();
  }
});

test('scrape: a declared content-length over the cap is refused before reading the body', async () => {
  const srv = http.createServer((_q, res) => {
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': String(50 * 1024 * 1024) });
    res.write('# a page that would take long to send\n'); // and then nothing
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  try {
    const out = await scrapeOnce({ addr: `127.0.0.1:${(srv.address() as AddressInfo).port}`, path: '/metrics', scheme: 'http' }, { timeoutMs: 5000, maxBodyBytes: 8 * 1024 * 1024 });
    assert.equal(out.ok, false);
    if (out.ok) return;
    assert.equal(out.reason, 'http_error');
    assert.equal(out.message, 'body larger than 8388608 bytes (content-length 52428800, not read)');
    assert.ok(out.durationMs < 1000, `${out.durationMs} ms`);
  } finally {
    srv.closeAllConnections();
    await new Promise<void>((r) => srv.close(() => r()));
  }
});
