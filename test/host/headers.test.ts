// Header maps, bodies, local replies and the stream lifecycle.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { HeaderMap, ProxyWasmHost, parsePairs, serializePairs } from '../../host/src';
import { decodePairs, wat } from './helpers';

async function host1(extra: Partial<Parameters<typeof ProxyWasmHost.create>[0]> = {}) {
  return ProxyWasmHost.create({ wasm: await wat('filter'), clock: 'manual', workers: 1, mainThread: false, canary: false, ...extra });
}
const trace = (h: ProxyWasmHost) => h.sharedData().trace.value.toString();

test('proxy_get_header_map_pairs: exact serialization, pseudo headers first, lower-case keys', async () => {
  const host = await host1();
  try {
    host.requestSync([['Foo', 'bar'], [':method', 'GET'], ['x-test', 'p'], [':path', '/a?b'], [':authority', 'x']]);
    const bytes = host.sharedData().pairs.value;
    const expected = Buffer.concat([
      u32(5),
      u32(7), u32(3), u32(5), u32(4), u32(10), u32(1), u32(3), u32(3), u32(6), u32(1),
      Buffer.from(':method\0GET\0:path\0/a?b\0:authority\0x\0foo\0bar\0x-test\0p\0', 'latin1'),
    ]);
    assert.deepEqual(bytes, expected);
    assert.deepEqual(decodePairs(bytes), [[':method', 'GET'], [':path', '/a?b'], [':authority', 'x'], ['foo', 'bar'], ['x-test', 'p']]);
    // proxy_get_header_map_size is Envoy's byteSize(): sum of key and value lengths
    assert.equal(host.sharedData().rc.value.readUInt32LE(0), 7 + 3 + 5 + 4 + 10 + 1 + 3 + 3 + 6 + 1);
  } finally {
    await host.close();
  }
});

test('add keeps duplicates, replace removes all then adds, remove drops all; get returns the first value', async () => {
  const host = await host1();
  try {
    const r = host.requestSync([[':method', 'GET'], [':path', '/'], [':authority', 'x'], ['x-test', 'm'], ['x-add', '0'],
      ['foo', 'old1'], ['bar', 'b1'], ['foo', 'old2'], ['bar', 'b2'], ['x-rep', 'z']]);
    assert.deepEqual(r.upstreamHeaders, [
      [':method', 'GET'], [':path', '/'], [':authority', 'x'], ['x-test', 'm'], ['x-add', '0'],
      ['x-add', 'a'], ['x-add', 'b'], ['x-rep', '2'], ['foo', 'new'],
    ]);
    // duplicate x-test: get_header_map_value sees only the first ('p'), so the 'p' branch runs
    host.requestSync([[':path', '/'], ['x-test', 'p'], ['x-test', 'm']]);
    assert.ok(host.sharedData().pairs);
  } finally {
    await host.close();
  }
});

test('HeaderMap: inline (O(1)) headers are appended with ",", others duplicated', () => {
  const h = new HeaderMap('request');
  h.add('X-Forwarded-For', 'a');
  h.add('x-forwarded-for', 'b');
  h.add('x-custom', '1');
  h.add('x-custom', '2');
  h.add(':path', '/');
  assert.deepEqual(h.pairs(), [[':path', '/'], ['x-forwarded-for', 'a,b'], ['x-custom', '1'], ['x-custom', '2']]);
  assert.equal(h.byteSize(), 5 + 1 + 15 + 3 + 8 + 1 + 8 + 1);
  h.set('x-custom', '3');
  assert.deepEqual(h.getAll('x-custom'), ['3']);
});

test('pairs: malformed input gives an empty list (PairsUtil::toPairs)', () => {
  const good = serializePairs([['a', 'b'], ['', 'x']]);
  assert.deepEqual(parsePairs(good), [['a', 'b'], ['', 'x']]);
  assert.deepEqual(parsePairs(good.subarray(0, good.length - 1)), []);
  const bad = Buffer.from(good);
  bad[bad.length - 1] = 1; // missing NUL
  assert.deepEqual(parsePairs(bad), []);
  assert.deepEqual(parsePairs(Buffer.concat([good, Buffer.from([0])])), []);
  const tooMany = Buffer.alloc(4);
  tooMany.writeUInt32LE(1025);
  assert.deepEqual(parsePairs(tooMany), []);
});

test('lifecycle order: create, request headers, body, response headers, body, log, done, delete', async () => {
  const host = await host1();
  try {
    const r = host.requestSync({ ':method': 'POST', ':path': '/', ':authority': 'x', 'x-test': 'L' },
      { body: ['ab', 'cd'], response: { status: 201, headers: { 'x-up': '1' }, body: 'xyz' } });
    assert.equal(trace(host), 'cCHBBRYLDX');
    // on_request_body buffered the first chunk (StopIterationAndBuffer) and replaced the whole body at end of stream
    assert.equal(r.upstreamBody?.toString(), 'a');
    assert.equal(r.status, 201);
    assert.deepEqual(r.responseHeaders, [[':status', '201'], ['x-up', '1'], ['content-length', '3'], ['x-got', '1']]);
    assert.equal(r.responseBody.toString(), 'xyz');
    assert.deepEqual(r.logs.map((l) => l.message), ['hello from request']);
    assert.equal(host.vms[0].contexts.size, 2, 'only the VM and root contexts remain');
  } finally {
    await host.close();
  }
});

test('local reply: not sent upstream, goes through on_response_headers, Envoy headers and details', async () => {
  const host = await host1();
  try {
    const r = host.requestSync({ ':method': 'GET', ':path': '/', ':authority': 'x', 'x-test': 'l' });
    assert.equal(r.upstreamHeaders, undefined);
    assert.equal(r.status, 403);
    assert.deepEqual(r.localReply, {
      status: 403,
      headers: [[':status', '403'], ['x-reason', 'test'], ['content-length', '6'], ['content-type', 'text/plain'], ['x-got', '1']],
      body: 'denied',
      details: 'test_denied',
      fromHost: false,
    });
    // the local reply body goes through on_response_body too
    assert.equal(trace(host), 'cCHRYLDX');
  } finally {
    await host.close();
  }
});

test('a paused stream cannot complete synchronously; requestSync throws and resets it', async () => {
  const host = await host1();
  try {
    assert.throws(() => host.requestSync({ ':path': '/', 'x-test': 'w' }), /did not complete synchronously/);
    assert.equal(trace(host), 'cCHLDX');
    assert.equal(host.activeStreams.size, 0);
  } finally {
    await host.close();
  }
});

test('proxy_close_stream(Request) resets the stream; the context still gets log/done/delete', async () => {
  const host = await host1();
  try {
    const r = host.requestSync({ ':path': '/', 'x-test': 'z' });
    assert.equal(r.reset, 'wasm_close_stream');
    assert.equal(r.upstreamHeaders, undefined);
    assert.equal(r.status, undefined);
    assert.equal(trace(host), 'cCHLDX');
  } finally {
    await host.close();
  }
});

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n);
  return b;
}
