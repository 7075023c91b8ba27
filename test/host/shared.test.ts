// Shared data (CAS) and shared queues across VMs, as proxy-wasm-cpp-host's shared_data.cc / shared_queue.cc.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { EnvoyProcess, ProxyWasmHost, SharedData, WasmResult } from '../../host/src';
import { wat } from './helpers';

const opts = async (vmId: string, process?: EnvoyProcess) => ({
  wasm: await wat('filter'), vmId, clock: 'manual' as const, canary: false, mainThread: false, process,
});

test('CAS across two VMs of the same vm_id: NotFound, Ok, CasMismatch, cas 0 always wins', async () => {
  const host = await ProxyWasmHost.create(await opts('vm'));
  try {
    const [a, b] = host.workers;
    assert.equal(a.invoke('t_get'), WasmResult.NotFound);
    assert.equal(a.invoke('t_set', 0, 65), WasmResult.Ok);
    assert.equal(a.invoke('t_get'), WasmResult.Ok);
    const cas1 = a.invoke('t_cas') as number;
    assert.equal(b.invoke('t_get'), WasmResult.Ok);
    assert.equal(b.invoke('t_cas'), cas1);
    assert.equal(b.invoke('t_value'), 65);
    assert.equal(b.invoke('t_set', cas1, 66), WasmResult.Ok);
    assert.equal(b.invoke('t_get'), WasmResult.Ok);
    const cas2 = b.invoke('t_cas') as number;
    assert.notEqual(cas2, cas1);
    assert.equal(a.invoke('t_set', cas1, 67), WasmResult.CasMismatch, 'stale cas from VM a');
    assert.equal(a.invoke('t_get'), WasmResult.Ok);
    assert.equal(a.invoke('t_value'), 66);
    assert.equal(a.invoke('t_set', 0, 68), WasmResult.Ok, 'cas 0 always succeeds');
    assert.equal(b.invoke('t_get'), WasmResult.Ok);
    assert.equal(b.invoke('t_value'), 68);
    assert.deepEqual(host.sharedData().k.value, Buffer.from('D'));
  } finally {
    await host.close();
  }
});

// What a shared-data call costs the guest is part of the request-path budget (docs/benchmarks/robust-r8.md:
// a per-request cross-VM in-flight count): cpp-host get_shared_data (src/exports.cc) copies the value
// under the process-wide mutex (SharedData::get, src/shared_data.cc) and then into a NEW guest buffer
// through the guest's own allocator on every call (WasmBase::copyToPointerSize -> allocMemory ->
// malloc); set_shared_data stores a copy of the guest's bytes (std::string(value)), never a view.
test('every get allocates a fresh guest buffer through the guest malloc; a set stores a copy of the bytes', async () => {
  const host = await ProxyWasmHost.create(await opts('vm'));
  try {
    const [a] = host.workers;
    assert.equal(a.invoke('t_set', 0, 65), WasmResult.Ok);
    const h0 = a.invoke('malloc', 0) as number; // the guest heap's top (malloc(0) does not move it)
    assert.equal(a.invoke('t_get'), WasmResult.Ok);
    const h1 = a.invoke('malloc', 0) as number;
    assert.equal(a.invoke('t_get'), WasmResult.Ok);
    const h2 = a.invoke('malloc', 0) as number;
    assert.ok(h1 > h0 && h2 > h1, `each get allocated in the guest (heap ${h0} -> ${h1} -> ${h2})`);
    assert.equal(a.invoke('t_value'), 65);
    // t_set writes its byte into guest memory (offset 44) and then calls set: refused here (stale
    // cas), so the guest's byte is 66 while the stored value must still be the copy of 65
    assert.equal(a.invoke('t_set', 0x7fffffff, 66), WasmResult.CasMismatch);
    assert.equal(a.invoke('t_get'), WasmResult.Ok);
    assert.equal(a.invoke('t_value'), 65, 'the stored value is a copy, not a view of guest memory');
  } finally {
    await host.close();
  }
});

test('shared data is per vm_id; hosts sharing a process and vm_id share it', async () => {
  const proc = new EnvoyProcess();
  const one = await ProxyWasmHost.create(await opts('one', proc));
  const two = await ProxyWasmHost.create(await opts('two', proc));
  const oneAgain = await ProxyWasmHost.create(await opts('one', proc));
  try {
    assert.equal(one.workers[0].invoke('t_set', 0, 65), WasmResult.Ok);
    assert.equal(two.workers[0].invoke('t_get'), WasmResult.NotFound);
    assert.equal(oneAgain.workers[1].invoke('t_get'), WasmResult.Ok);
    assert.equal(oneAgain.workers[1].invoke('t_value'), 65);
  } finally {
    await one.close();
    await two.close();
  }
  // still referenced by oneAgain
  assert.ok(proc.sharedData.get('one', 'k'));
  await oneAgain.close();
  // the last VM of vm_id "one" is gone: its shared data is deleted (VmIdHandle)
  assert.equal(proc.sharedData.get('one', 'k'), undefined);
});

test('CAS values come from one process-wide counter that skips 0', () => {
  const sd = new SharedData();
  assert.equal(sd.set('a', 'x', Buffer.from('1'), 0), WasmResult.Ok);
  assert.equal(sd.get('a', 'x')?.cas, 1);
  assert.equal(sd.set('b', 'y', Buffer.from('1'), 0), WasmResult.Ok);
  assert.equal(sd.get('b', 'y')?.cas, 2);
  (sd as unknown as { cas: number }).cas = 0xffffffff;
  sd.set('a', 'x', Buffer.from('2'), 0);
  assert.equal(sd.get('a', 'x')?.cas, 0xffffffff);
  sd.set('a', 'x', Buffer.from('3'), 0);
  assert.equal(sd.get('a', 'x')?.cas, 1);
  assert.equal(sd.set('a', 'x', Buffer.from('4'), 0xffffffff), WasmResult.CasMismatch);
});

test('shared queue: enqueue → proxy_on_queue_ready on the registering root context, delivered asynchronously', async () => {
  const host = await ProxyWasmHost.create(await opts('q'));
  try {
    host.requestSync({ ':path': '/', 'x-test': 'Q' }, { worker: 1 });
    assert.deepEqual(host.sharedData().rc.value, Buffer.from([WasmResult.Ok]));
    assert.equal(host.sharedData().qready, undefined, 'not re-entrant');
    await host.flush();
    assert.deepEqual(host.sharedData().qready.value, Buffer.from('v'));
    // the worker-1 root context got it (its trace ends with Q)
    assert.match(host.sharedData().trace.value.toString(), /Q$/);
    assert.equal(host.process.queues.resolve('q', 'q1'), 1);
  } finally {
    await host.close();
  }
});
