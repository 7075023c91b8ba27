// A request paused at the end of its body (StopIterationAndBuffer) and continued later from
// outside any stream callback (a tick: proxy_set_effective_context + proxy_continue_stream), as a
// filter holding a request in the proxy would (flow control, measured and not merged: branch
// llm-r12a, docs/benchmarks/llm-r12a.md). Envoy semantics pinned: the filter manager keeps
// the buffered body and sends it on continueDecoding, with what the filter wrote into it while
// paused (Context::getBuffer answers with decodingBuffer() while buffering_request_body_; Envoy
// source/extensions/common/wasm/context.cc continueStream defers continueDecoding to after the VM
// call); a downstream reset while paused ends the stream (on_log, on_done, on_delete: the filter
// frees what it held), nothing goes upstream, and the context is gone: a later continue reaches
// no stream.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FilterDataStatus, HeaderMap, ProxyWasmHost, WasmResult, type HttpStream } from '../../host/src';
import { wat } from './helpers';

const STREAM_CONTEXT = 2;
const { StopIterationAndBuffer } = FilterDataStatus;

async function host() {
  const h = await ProxyWasmHost.create({ wasm: await wat('body'), clock: 'manual', workers: 1, mainThread: false, canary: false });
  return h;
}

function start(h: ProxyWasmHost, body: string[]) {
  const sent: string[] = [];
  const resets: string[] = [];
  let done = 0;
  const headers = new HeaderMap('request', [[':method', 'POST'], [':path', '/v1/completions'], [':authority', 'svc']]);
  const { stream } = h.startStream(headers, body.map((b) => Buffer.from(b)), true,
    { headers() {}, data() {}, reset(d) { resets.push(d); } },
    { send(_s: HttpStream, _h: HeaderMap, b: Buffer) { sent.push(b.toString()); } }, 0, () => { done++; });
  return { stream, sent, resets, done: () => done };
}

test('a request paused at end of body is sent with its buffered body when continued from outside a callback', async () => {
  const h = await host();
  try {
    const vm = h.vms[0];
    vm.invoke('set_status', 0, StopIterationAndBuffer);
    vm.invoke('set_status', 1, StopIterationAndBuffer);
    const s = start(h, ['{"a":', '1}']);
    assert.equal(s.stream.state, 'wait_req');
    assert.deepEqual(s.sent, [], 'held: nothing upstream');
    h.advanceSync(500);
    assert.deepEqual(s.sent, [], 'still held after time passes (no timeout of its own)');
    assert.equal(vm.invoke('resume', STREAM_CONTEXT, 0), WasmResult.Ok);
    assert.deepEqual(s.sent, ['{"a":1}'], 'continued: the whole buffered body goes upstream');
  } finally {
    await h.close();
  }
});

test('a downstream reset while paused ends the stream: nothing upstream, the context is destroyed, a later continue finds no context', async () => {
  const h = await host();
  try {
    const vm = h.vms[0];
    vm.invoke('set_status', 0, StopIterationAndBuffer);
    const s = start(h, ['{"a":1}']);
    assert.equal(s.stream.state, 'wait_req');
    assert.ok(vm.contexts.has(STREAM_CONTEXT));
    s.stream.resetStream('downstream_remote_disconnect');
    assert.equal(s.done(), 1, 'the stream completed (on_log, on_done, on_delete ran)');
    assert.ok(!vm.contexts.has(STREAM_CONTEXT), 'context destroyed');
    // (the fixture drops proxy_set_effective_context's BadArgument; the continue then applies to no stream)
    vm.invoke('resume', STREAM_CONTEXT, 0);
    assert.deepEqual(s.sent, [], 'a late continue sends nothing');
  } finally {
    await h.close();
  }
});
