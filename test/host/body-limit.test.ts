// Envoy's buffer limit vs the filter's request.maxBodyBytes with the SHIPPED defaults
// (envoy/envoy-inference.yaml, the filter's default maxBodyBytes): a body over maxBodyBytes that
// arrives in several chunks must get the filter's decision (request.onInvalid, default fallback:
// the body-blind choice, the body forwarded whole), not Envoy's 413 request_payload_too_large.
// The embedded host models Envoy here (host/src/stream.ts): while a filter buffers
// (StopIterationAndBuffer), each new chunk joins the buffered body before the filter sees it and
// a body past per_connection_buffer_limit_bytes is answered 413 (FilterManager
// requestDataTooLarge). With maxBodyBytes equal to the limit (both 1 MiB, the old default) that
// 413 came first.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { readFileSync } from 'node:fs';
import { EnvoyProxy } from '../../host/src';

const ROOT = path.resolve(__dirname, '../..');

async function send(maxBodyBytes?: number): Promise<{ status: number; body: string; backend?: string; received: number; hits: number; invalid: number | undefined; proxy: EnvoyProxy }> {
  let received = 0;
  let upstreamHits = 0;
  const upstream = http.createServer((req, res) => {
    upstreamHits++;
    req.on('data', (c: Buffer) => { received += c.length; });
    req.on('end', () => { res.writeHead(200, { 'x-backend': 'up' }); res.end('ok'); });
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  const port = (upstream.address() as AddressInfo).port;
  let configText = readFileSync(path.join(ROOT, 'envoy/envoy-inference.yaml'), 'utf8');
  if (maxBodyBytes !== undefined) configText = configText.replace('"request": { "allowOnHeadersStopIteration": true }', `"request": { "allowOnHeadersStopIteration": true, "maxBodyBytes": ${maxBodyBytes} }`);
  const proxy = await EnvoyProxy.start({
    configText, wasmPath: path.join(ROOT, 'build/switchyard.wasm'),
    listenPort: 0, adminPort: 0, workers: 1, logLevel: 'critical',
    // no agent: the filter still holds and reads the body; with no snapshot its fallback forwards degraded
    clusterAddresses: { switchyard_agent: { address: '127.0.0.1', port: 9 }, inference_default: { address: '127.0.0.1', port } },
  });
  try {
    assert.equal(proxy.config.listener.bufferLimitBytes, 1024 * 1024, 'the shipped listener limit');
    assert.equal(proxy.config.wasm?.allowOnHeadersStopIteration, true);
    const size = 1024 * 1024 + 256 * 1024; // past both maxBodyBytes and the listener's limit
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    const res = await new Promise<{ status: number; body: string; backend?: string }>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port: proxy.listenPort, method: 'POST', path: '/v1/chat/completions', agent: false,
        headers: { host: 'inference.prod.svc.cluster.local', 'content-type': 'application/json', 'content-length': String(size) } }, (r) => {
        const chunks: Buffer[] = [];
        r.on('data', (c: Buffer) => chunks.push(c));
        r.on('end', () => resolve({ status: r.statusCode ?? 0, body: Buffer.concat(chunks).toString(), backend: r.headers['x-backend'] as string | undefined }));
      });
      req.on('error', reject);
      let sent = 0;
      const pump = (): void => {
        while (sent < size) {
          const n = Math.min(chunk.length, size - sent);
          sent += n;
          if (!req.write(chunk.subarray(0, n))) { req.once('drain', pump); return; }
        }
        req.end();
      };
      pump();
    });
    // the filter batches its request counters and hands them to the host on its tick (refreshMs,
    // 20 ms): wait for a tick after the response before reading one (at most a second)
    const invalid = async (): Promise<number | undefined> => {
      for (const t0 = Date.now(); Date.now() - t0 < 1000; await new Promise((r) => setTimeout(r, 10))) {
        if ((proxy.host!.metric('switchyard.request.invalid.llm') ?? 0) > 0) break;
      }
      return proxy.host!.metric('switchyard.request.invalid.llm');
    };
    return { ...res, received, hits: upstreamHits, invalid: await invalid(), proxy };
  } finally {
    await proxy.close();
    upstream.close();
  }
}

test('shipped defaults: an oversized body in 64 KiB chunks gets the filter\'s onInvalid (forwarded whole), not Envoy\'s 413', async () => {
  const r = await send();
  assert.equal(r.status, 200, `got ${r.status} ${r.body}`);
  assert.equal(r.backend, 'up');
  assert.equal(r.hits, 1);
  assert.equal(r.received, 1024 * 1024 + 256 * 1024, 'the whole body reached the upstream');
  assert.equal(r.invalid, 1, 'the filter judged the body (too large) and fell back');
});

test('maxBodyBytes equal to the listener limit (the old default): Envoy\'s 413 answers before the filter decides', async () => {
  const r = await send(1024 * 1024);
  assert.equal(r.status, 413);
  assert.equal(r.hits, 0);
  assert.equal(r.invalid ?? 0, 0, 'the filter never saw the body past its limit');
});
