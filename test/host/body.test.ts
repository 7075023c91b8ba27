// Request/response bodies with Envoy's semantics (Context::decodeData/encodeData, the filter
// manager's buffering, Buffer::copyFrom, continueStream, allow_on_headers_stop_iteration and the
// buffer limit). The guest is test/fixtures/host/body.wat, scripted per body call.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import {
  DEFAULT_BUFFER_LIMIT_BYTES, EnvoyProxy, FilterDataStatus, FilterHeadersStatus, ProxyWasmHost, RequestOptions, WasmResult,
} from '../../host/src';
import { fixturePath, wat } from './helpers';

type HostOpts = Partial<Parameters<typeof ProxyWasmHost.create>[0]>;
const POST = { ':method': 'POST', ':path': '/v1/completions', ':authority': 'svc' };
const { Continue, StopIterationAndBuffer, StopIterationAndWatermark, StopIterationNoBuffer } = FilterDataStatus;
const STREAM_CONTEXT = 2; // first stream context of a fresh VM (root context is 1)

interface Script { statuses?: number[]; actions?: number[]; headers?: number; responseHeaders?: number }

async function bodyHost(script: Script, opts: HostOpts = {}) {
  const host = await ProxyWasmHost.create({ wasm: await wat('body'), clock: 'manual', workers: 1, mainThread: false, canary: false, ...opts });
  const vm = host.vms[0];
  (script.statuses ?? []).forEach((s, i) => vm.invoke('set_status', i, s));
  (script.actions ?? []).forEach((a, i) => vm.invoke('set_action', i, a));
  vm.invoke('set_headers', script.headers ?? FilterHeadersStatus.Continue, script.responseHeaders ?? FilterHeadersStatus.Continue);
  return host;
}

type Recorded = ProxyWasmHost | ReturnType<ProxyWasmHost['sharedData']>;
const dataOf = (h: Recorded) => (h instanceof ProxyWasmHost ? h.sharedData() : h);

/** What body call n saw. */
function call(h: Recorded, n: number) {
  const sd = dataOf(h);
  const rec = sd[`b${String.fromCharCode(48 + n)}`]?.value;
  if (!rec) return undefined;
  return {
    length: rec.readUInt32LE(0), eos: rec.readUInt32LE(4) === 1, rc: rec.readUInt32LE(8), getRc: rec.readUInt32LE(12),
    body: sd[`d${String.fromCharCode(48 + n)}`].value.toString(),
  };
}
const headersCall = (h: Recorded, key: 'hq' | 'hs') => {
  const v = dataOf(h)[key]?.value;
  return v && { headers: v.readUInt32LE(0), eos: v.readUInt32LE(4) === 1 };
};

async function run(script: Script, body: RequestOptions['body'], opts: HostOpts = {}, req: RequestOptions = {}) {
  const h = await bodyHost(script, opts);
  try {
    const r = await h.request(POST, { body, ...req });
    // shared data goes away with the last VM: keep what the guest recorded
    return { host: h.sharedData(), r };
  } finally {
    await h.close();
  }
}

test('on_request_body is called per chunk with (length, end_of_stream); Continue forwards each chunk', async () => {
  const { host, r } = await run({ statuses: [Continue, Continue, Continue] }, ['ab', 'cd', 'ef']);
  assert.deepEqual(headersCall(host, 'hq'), { headers: 3, eos: false });
  assert.deepEqual(call(host, 0), { length: 2, eos: false, rc: 0, getRc: 0, body: 'ab' });
  assert.deepEqual(call(host, 1), { length: 2, eos: false, rc: 0, getRc: 0, body: 'cd' });
  assert.deepEqual(call(host, 2), { length: 2, eos: true, rc: 0, getRc: 0, body: 'ef' });
  assert.equal(r.upstreamBody?.toString(), 'abcdef');
});

test('StopIterationAndBuffer: the buffered body accumulates and the guest sees all of it', async () => {
  const { host, r } = await run({ statuses: [StopIterationAndBuffer, StopIterationAndBuffer, Continue] }, ['ab', 'cd', 'ef']);
  assert.deepEqual([0, 1, 2].map((n) => [call(host, n)?.length, call(host, n)?.body]), [[2, 'ab'], [4, 'abcd'], [6, 'abcdef']]);
  assert.equal(r.upstreamBody?.toString(), 'abcdef');
});

test('StopIterationAndWatermark: buffered by the filter manager, but the next call sees only the new chunk', async () => {
  const { host, r } = await run({ statuses: [StopIterationAndWatermark, StopIterationAndWatermark, Continue] }, ['ab', 'cd', 'ef']);
  assert.deepEqual([0, 1, 2].map((n) => [call(host, n)?.length, call(host, n)?.body]), [[2, 'ab'], [2, 'cd'], [2, 'ef']]);
  assert.equal(r.upstreamBody?.toString(), 'abcdef', 'Continue sends the buffered data, then this chunk');
});

test('StopIterationNoBuffer: the chunk is not buffered (dropped unless the filter keeps it)', async () => {
  const { host, r } = await run({ statuses: [StopIterationNoBuffer, Continue, Continue] }, ['ab', 'cd', 'ef']);
  assert.deepEqual(call(host, 1)?.body, 'cd');
  assert.equal(r.upstreamBody?.toString(), 'cdef');
});

test('a Stop status at end_of_stream holds the request until proxy_continue_stream', async () => {
  const seen: string[] = [];
  const host = await bodyHost({ statuses: [StopIterationAndBuffer, StopIterationAndBuffer] });
  try {
    let done = false;
    const p = host.request(POST, { body: ['ab', 'cd'], response: (req) => { seen.push(req.body.toString()); return { status: 200 }; } })
      .then((r) => { done = true; return r; });
    await host.flush();
    assert.equal(done, false);
    assert.deepEqual(seen, [], 'nothing went upstream');
    assert.equal(host.vms[0].invoke('resume', STREAM_CONTEXT, 0), WasmResult.Ok);
    const r = await p;
    assert.deepEqual(seen, ['abcd']);
    assert.equal(r.status, 200);
  } finally {
    await host.close();
  }
});

test('proxy_continue_stream from the body callback that stops is ignored (warning); a later one continues', async () => {
  const host = await bodyHost({ statuses: [StopIterationAndBuffer], actions: [5] });
  try {
    let done = false;
    const p = host.request(POST, { body: 'ab' }).then((r) => { done = true; return r; });
    await host.flush();
    assert.equal(done, false);
    assert.equal(call(host, 0)?.rc, WasmResult.Ok);
    assert.ok(host.logs().some((l) => /proxy_continue_stream\(Request\) ignored/.test(l.message)));
    host.vms[0].invoke('resume', STREAM_CONTEXT, 0);
    assert.equal((await p).upstreamBody?.toString(), 'ab');
  } finally {
    await host.close();
  }
});

test('proxy_set_buffer_bytes: prepend (0,0), append (start >= size), replace (0,n), mid-buffer start is BadArgument', async () => {
  const cases: [number, string, number][] = [
    [2, 'PREhello', WasmResult.Ok], [3, 'helloAPP', WasmResult.Ok], [4, 'NEW', WasmResult.Ok],
    [7, 'Zllo', WasmResult.Ok], [6, 'hello', WasmResult.BadArgument],
  ];
  for (const [action, expected, rc] of cases) {
    const { host, r } = await run({ statuses: [Continue], actions: [action] }, 'hello');
    assert.equal(call(host, 0)?.rc, rc, `action ${action}`);
    assert.equal(call(host, 0)?.body, expected, `action ${action}: what the guest reads back`);
    assert.equal(r.upstreamBody?.toString(), expected, `action ${action}: what goes upstream`);
  }
});

test('proxy_get_buffer_bytes clamps a range past the end; the response body works the same way', async () => {
  const { host } = await run({ statuses: [Continue], actions: [8] }, 'hello');
  assert.equal(call(host, 0)?.body, 'ello');
  const { host: h2, r } = await run({ statuses: [Continue, Continue], actions: [0, 3] }, 'x', {},
    { response: { status: 200, body: 'resp' } });
  assert.deepEqual(call(h2, 1), { length: 4, eos: true, rc: 0, getRc: 0, body: 'respAPP' });
  assert.equal(r.responseBody.toString(), 'respAPP');
});

test('default (allow_on_headers_stop_iteration false): StopIteration from headers stops the body callbacks too', async () => {
  const seen: string[] = [];
  const host = await bodyHost({ headers: FilterHeadersStatus.StopIteration, statuses: [Continue] });
  try {
    let done = false;
    const p = host.request(POST, { body: ['ab', 'cd'], response: (req) => { seen.push(req.body.toString()); return { status: 200 }; } })
      .then((r) => { done = true; return r; });
    await host.flush();
    assert.equal(done, false);
    assert.equal(call(host, 0), undefined, 'no on_request_body while the headers are stopped');
    assert.deepEqual(seen, []);
    host.vms[0].invoke('resume', STREAM_CONTEXT, 0);
    await p;
    // the data buffered meanwhile reaches the filter as one buffer
    assert.deepEqual(call(host, 0), { length: 4, eos: true, rc: 0, getRc: 0, body: 'abcd' });
    assert.deepEqual(seen, ['abcd']);
  } finally {
    await host.close();
  }
});

test('allow_on_headers_stop_iteration: headers held while the body is buffered; mutation from the body callback reaches the router', async () => {
  const seen: string[] = [];
  const host = await bodyHost({ headers: FilterHeadersStatus.StopIteration, statuses: [StopIterationAndBuffer, Continue], actions: [0, 1] },
    { allowOnHeadersStopIteration: true });
  try {
    const r = await host.request(POST, { body: ['{"model":', '"m"}'], response: (req) => {
      seen.push(req.body.toString());
      return { status: 200 };
    } });
    assert.deepEqual(call(host, 1), { length: 13, eos: true, rc: WasmResult.Ok, getRc: 0, body: '{"model":"m"}' });
    assert.deepEqual(seen, ['{"model":"m"}'], 'headers and body went upstream once, after the body callback continued');
    assert.deepEqual(r.upstreamHeaders?.find(([k]) => k === 'x-route'), ['x-route', 'to-b']);
  } finally {
    await host.close();
  }
});

test('headers already continued: request-header mutation from a body callback is BadArgument and changes nothing', async () => {
  const { host, r } = await run({ statuses: [Continue], actions: [1] }, 'x');
  assert.equal(call(host, 0)?.rc, WasmResult.BadArgument);
  assert.equal(r.upstreamHeaders?.find(([k]) => k === 'x-route'), undefined);
  // held headers released by a body Continue: Envoy keeps the map reachable (Ok) but the router
  // already has the headers it routed on
  const { host: h2, r: r2 } = await run({ headers: FilterHeadersStatus.StopIteration, statuses: [Continue, Continue], actions: [0, 1] },
    ['a', 'b'], { allowOnHeadersStopIteration: true });
  assert.equal(call(h2, 1)?.rc, WasmResult.Ok);
  assert.equal(r2.upstreamHeaders?.find(([k]) => k === 'x-route'), undefined);
  assert.equal(r2.upstreamBody?.toString(), 'ab');
});

test('buffer limit: StopIterationAndBuffer past the limit answers 413 request_payload_too_large (the VM is not called for that chunk)', async () => {
  // (call 1 is then the local reply's on_response_body)
  const { host, r } = await run({ statuses: [StopIterationAndBuffer, Continue] }, ['aaaaaa', 'bbbbbb', 'c'],
    { bufferLimitBytes: 10 });
  assert.equal(r.status, 413);
  assert.equal(r.responseBody.toString(), 'Payload Too Large');
  assert.equal(r.localReply?.details, 'request_payload_too_large');
  assert.equal(r.upstreamHeaders, undefined);
  assert.equal(call(host, 1)?.body, 'Payload Too Large', 'the next body call is the local reply\'s response body');
  // a single chunk over the limit: 413 once the filter asks to buffer it
  const one = await run({ statuses: [StopIterationAndBuffer] }, 'x'.repeat(11), { bufferLimitBytes: 10 });
  assert.equal(one.r.status, 413);
  // watermark buffering is flow control, not a limit
  const wm = await run({ statuses: [StopIterationAndWatermark, Continue] }, ['aaaaaa', 'bbbbbb'], { bufferLimitBytes: 10 });
  assert.equal(wm.r.status, 200);
  assert.equal(wm.r.upstreamBody?.length, 12);
});

test('buffer limit default is Envoy\'s 1 MiB connection buffer limit: exactly the limit passes, one byte more is 413', async () => {
  assert.equal(DEFAULT_BUFFER_LIMIT_BYTES, 1024 * 1024);
  const half = Buffer.alloc(DEFAULT_BUFFER_LIMIT_BYTES / 2, 0x61);
  const at = await run({ statuses: [StopIterationAndBuffer, Continue], actions: [9, 9] }, [half, half]);
  assert.equal(at.r.status, 200);
  assert.equal(at.r.upstreamBody?.length, DEFAULT_BUFFER_LIMIT_BYTES);
  const over = await run({ statuses: [StopIterationAndBuffer, StopIterationAndBuffer, Continue], actions: [9, 9] }, [half, half, 'x']);
  assert.equal(over.r.status, 413);
});

test('response buffer limit: 500 response_payload_too_large sent directly while the headers are held, a reset once they went out', async () => {
  const held = await run({ responseHeaders: FilterHeadersStatus.StopIteration, statuses: [Continue, StopIterationAndBuffer] },
    'x', { bufferLimitBytes: 3, allowOnHeadersStopIteration: true }, { response: { status: 200, body: 'toolong' } });
  assert.equal(held.r.status, 500);
  assert.equal(held.r.responseBody.toString(), 'Internal Server Error');
  assert.equal(held.r.localReply?.details, 'response_payload_too_large');
  assert.equal(call(held.host, 2), undefined, 'the direct local reply bypasses the filter');
  const sent = await run({ statuses: [Continue, StopIterationAndBuffer] }, 'x', { bufferLimitBytes: 3 },
    { response: { status: 200, body: 'toolong' } });
  assert.equal(sent.r.status, 200);
  assert.equal(sent.r.reset, 'response_payload_too_large');
});

test('end_of_stream with an empty body calls on_request_body(0, true); a GET without body never calls it', async () => {
  const { host } = await run({ statuses: [Continue] }, '');
  assert.deepEqual(headersCall(host, 'hq'), { headers: 3, eos: false });
  assert.deepEqual(call(host, 0), { length: 0, eos: true, rc: 0, getRc: 0, body: '' });
  const h2 = await bodyHost({});
  try {
    const r = await h2.request({ ':method': 'GET', ':path': '/', ':authority': 'svc' });
    assert.equal(r.status, 200);
    assert.deepEqual(headersCall(h2, 'hq'), { headers: 3, eos: true });
    assert.equal(call(h2, 0), undefined);
  } finally {
    await h2.close();
  }
});

test('HTTP mode: a JSON body goes upstream, headers held until the body is complete, route re-selected from the body callback', async () => {
  const seen: { backend: string; body: string; route: string | undefined }[] = [];
  const backend = async (name: string) => {
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        seen.push({ backend: name, body: Buffer.concat(chunks).toString(), route: req.headers['x-route'] as string | undefined });
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end(name);
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    return server;
  };
  const a = await backend('A');
  const b = await backend('B');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'pwhost-body-'));
  const wasmPath = path.join(dir, 'body.wasm');
  writeFileSync(wasmPath, await wat('body'));
  const p = await EnvoyProxy.start({
    configPath: fixturePath('envoy.yaml'), wasmPath, listenPort: 0, adminPort: 0, workers: 1, allowOnHeadersStopIteration: true,
    clusterAddresses: {
      cloud_a: { address: '127.0.0.1', port: (a.address() as AddressInfo).port },
      cloud_b: { address: '127.0.0.1', port: (b.address() as AddressInfo).port },
    },
  });
  try {
    const vm = p.host!.vms[0];
    vm.invoke('set_headers', FilterHeadersStatus.StopIteration, FilterHeadersStatus.Continue);
    vm.invoke('set_all', 99, 0); // StopIterationAndBuffer until end of stream, then Continue
    vm.invoke('set_action', 0, 1); // the first body call adds x-route: to-b (once: Envoy matches the joined values)
    const json = JSON.stringify({ model: 'llama', prompt: 'x'.repeat(100_000), max_tokens: 8 });
    const res = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port: p.listenPort, path: '/v1/completions', method: 'POST', agent: false,
        headers: { host: 'svc', 'content-type': 'application/json', 'content-length': Buffer.byteLength(json) } }, (r) => {
        const c: Buffer[] = [];
        r.on('data', (d: Buffer) => c.push(d));
        r.on('end', () => resolve({ status: r.statusCode ?? 0, body: Buffer.concat(c).toString() }));
      });
      req.on('error', reject);
      // two writes: the body arrives in more than one chunk
      req.write(json.slice(0, 1000));
      setTimeout(() => req.end(json.slice(1000)), 20);
    });
    assert.equal(res.status, 200);
    assert.equal(res.body, 'B', 'routed on the header added by the body callback');
    assert.equal(seen.length, 1);
    assert.equal(seen[0].body, json);
    assert.equal(seen[0].route, 'to-b');
    const calls = p.host!.sharedData();
    assert.ok(calls.b1 !== undefined, 'the body arrived in more than one on_request_body call');
  } finally {
    await p.close();
    a.close();
    b.close();
  }
});
