// Guest traps, proc_exit and unimplemented imports fail the VM; fail_open decides what requests see.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ProxyWasmHost } from '../../host/src';
import { wat } from './helpers';

const mk = async (failOpen: boolean) =>
  ProxyWasmHost.create({ wasm: await wat('filter'), clock: 'manual', canary: false, mainThread: false, failOpen });
const req = (t: string) => ({ ':method': 'GET', ':path': '/', ':authority': 'x', 'x-test': t });

test('trap with fail_open=false: 503 wasm_fail_stream now and for later requests on that worker only', async () => {
  const host = await mk(false);
  try {
    const r = host.requestSync(req('t'), { worker: 0 });
    assert.equal(r.status, 503);
    assert.equal(r.upstreamHeaders, undefined);
    assert.deepEqual(r.localReply, { status: 503, headers: [[':status', '503']], body: '', details: 'wasm_fail_stream', fromHost: true });
    assert.match(r.vmFailure ?? '', /Function: proxy_on_request_headers failed: Uncaught RuntimeError: unreachable/);
    assert.equal(host.failures.length, 1);
    assert.equal(host.failures[0].vm, 'worker0');
    assert.ok(host.logs().some((l) => l.level === 4 && /Wasm VM failed/.test(l.message)), 'failure is logged');
    const again = host.requestSync(req('p'), { worker: 0 });
    assert.equal(again.status, 503);
    assert.equal(again.contextId, undefined);
    const other = host.requestSync(req('p'), { worker: 1 });
    assert.equal(other.status, 200);
    assert.deepEqual(other.responseHeaders, [[':status', '200'], ['x-got', '1']]);
  } finally {
    await host.close();
  }
});

test('trap with fail_open=true: the request continues and later ones skip the filter', async () => {
  const host = await mk(true);
  try {
    const r = host.requestSync(req('t'), { worker: 0 });
    assert.equal(r.status, 200);
    assert.ok(r.upstreamHeaders);
    assert.ok(r.vmFailure);
    const again = host.requestSync(req('m'), { worker: 0 });
    assert.deepEqual(again.upstreamHeaders, Object.entries(req('m')), 'filter skipped: no mutation');
    assert.deepEqual(again.responseHeaders, [[':status', '200']]);
  } finally {
    await host.close();
  }
});

test('wasi proc_exit marks the VM failed and is reported', async () => {
  const host = await mk(false);
  try {
    const r = host.requestSync(req('x'), { worker: 1 });
    assert.equal(r.status, 503);
    assert.match(host.workers[1].failed ?? '', /proc_exit\(255\)/);
    assert.ok(host.logs().some((l) => l.levelName === 'critical' && /proc_exit\(255\)/.test(l.message)));
  } finally {
    await host.close();
  }
});

test('calling an import the host does not implement throws naming it (and fails the VM)', async () => {
  const host = await mk(false);
  try {
    const r = host.requestSync(req('g'), { worker: 0 });
    assert.equal(r.status, 503);
    assert.match(host.failures[0].message, /proxy-wasm host: import env\.proxy_grpc_call is not implemented/);
  } finally {
    await host.close();
  }
});

test('reloadWorker (Envoy FAIL_RELOAD): a failed worker gets a new VM, configured anew; shared data and metrics stay', async () => {
  const host = await ProxyWasmHost.create({ wasm: await wat('filter'), pluginConfig: 'T', clock: 'manual', startTimeMs: 1_000_000,
    canary: false, mainThread: false, workers: 2 });
  try {
    await host.advance(100);
    assert.equal(host.metric('ticks'), 2);
    assert.equal(host.requestSync(req('t'), { worker: 0 }).status, 503);
    assert.ok(host.workers[0].failed);
    const failed = host.workers[0];
    host.reloadWorker(0);
    assert.notEqual(host.workers[0], failed);
    assert.equal(host.workers[0].failed, null);
    assert.equal(host.vms.filter((v) => v === failed).length, 0);
    // the metric kept its value; now both workers tick again (the failed VM had stopped)
    assert.equal(host.metric('ticks'), 2);
    await host.advance(100);
    assert.equal(host.metric('ticks'), 4);
    assert.ok(host.sharedData().now, 'shared data kept');
    assert.equal(host.requestSync(req('p'), { worker: 0 }).status, 200);
    assert.throws(() => host.reloadWorker(2), /no worker 2/);
  } finally {
    await host.close();
  }
});
