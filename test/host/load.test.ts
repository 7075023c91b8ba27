// Module loading and VM start-up, as Envoy / proxy-wasm-cpp-host do it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ProxyWasmHost } from '../../host/src';
import { wat } from './helpers';

const H = { ':method': 'GET', ':path': '/', ':authority': 'x' };

test('detects ABI 0.2.1 and starts canary, main-thread and worker VMs with root context id 1', async () => {
  const host = await ProxyWasmHost.create({ wasm: await wat('filter'), vmId: 'v', rootId: 'r', clock: 'manual' });
  try {
    assert.equal(host.abi, '0.2.1');
    assert.deepEqual(host.vms.map((v) => v.name), ['worker0', 'worker1', 'main']);
    for (const vm of host.vms) assert.equal(vm.rootContext.id, 1);
    // "configured" is logged once per VM, the canary included (Envoy's createWasm canary).
    const configured = host.logs().filter((l) => l.message === 'configured').map((l) => l.vm);
    assert.deepEqual(configured, ['canary', 'main', 'worker0', 'worker1']);
    // Stream context ids are allocated per VM after the root context: 2, 3, ...
    const a = host.requestSync(H, { worker: 0 });
    const b = host.requestSync(H, { worker: 0 });
    const c = host.requestSync(H, { worker: 1 });
    assert.deepEqual([a.contextId, b.contextId, c.contextId], [2, 3, 2]);
  } finally {
    await host.close();
  }
});

test('workers/mainThread/canary options control the VM set', async () => {
  const host = await ProxyWasmHost.create({ wasm: await wat('filter'), workers: 3, mainThread: false, canary: false, clock: 'manual' });
  try {
    assert.deepEqual(host.vms.map((v) => v.name), ['worker0', 'worker1', 'worker2']);
    assert.deepEqual(host.logs().filter((l) => l.message === 'configured').map((l) => l.vm), ['worker0', 'worker1', 'worker2']);
    // round robin over workers
    const ws = [0, 1, 2, 3].map(() => host.requestSync(H).worker);
    assert.deepEqual(ws, [0, 1, 2, 0]);
  } finally {
    await host.close();
  }
});

test('detects ABI 0.2.0 and then refuses proxy_get_log_level (registered only for 0.2.1)', async () => {
  await assert.rejects(
    ProxyWasmHost.create({ wasm: await wat('abi020'), clock: 'manual' }),
    /missing import: env\.proxy_get_log_level/,
  );
  const host = await ProxyWasmHost.create({ wasm: await wat('abi020'), clock: 'manual', strictImports: false, canary: false, mainThread: false, workers: 1 })
    .catch((e: Error) => e);
  // non-strict: the stub throws when on_vm_start calls it, so the VM fails to start
  assert.ok(host instanceof Error);
  assert.match(host.message, /Failed to start thread-local Wasm/);
  assert.match(host.message, /import env\.proxy_get_log_level is not provided by Envoy/);
});

test('refuses a module exporting no proxy_abi_version_* function', async () => {
  await assert.rejects(ProxyWasmHost.create({ wasm: await wat('no_abi') }),
    /proxy_abi_version_0_2_0 or proxy_abi_version_0_2_1/);
});

test('a host call from the wasm start function fails VM creation', async () => {
  await assert.rejects(ProxyWasmHost.create({ wasm: await wat('start_import'), clock: 'manual' }),
    (e: Error) => /env\.proxy_log was called during module instantiation/.test(e.message) && /start function/.test(e.message));
});

test('restricted host calls during _initialize fail the VM (cpp-host startVm allow-list)', async () => {
  await assert.rejects(ProxyWasmHost.create({ wasm: await wat('init_restricted'), clock: 'manual' }),
    /Failed to initialize Wasm code[\s\S]*restricted_callback: host function env\.proxy_set_shared_data/);
});

test('imports Envoy does not provide: rejected (strict) or stubs that throw naming the import', async () => {
  await assert.rejects(ProxyWasmHost.create({ wasm: await wat('unknown_import'), clock: 'manual' }),
    /missing import: env\.abort/);
  const host = await ProxyWasmHost.create({ wasm: await wat('unknown_import'), clock: 'manual', strictImports: false, workers: 1 });
  try {
    const r = host.requestSync(H);
    assert.equal(r.status, 503);
    assert.equal(r.localReply?.details, 'wasm_fail_stream');
    assert.match(host.vms[0].failed ?? '', /proxy-wasm host: import env\.abort is not provided by Envoy/);
    assert.match(host.failures[0].message, /env\.abort/);
    assert.deepEqual(host.unknownImports, ['env.abort']);
    assert.ok(host.logs().some((l) => l.source === 'host' && /env\.abort, which Envoy does not provide/.test(l.message)));
  } finally {
    await host.close();
  }
});

test('proxy_on_configure returning 0 rejects create, with the plugin log lines', async () => {
  await assert.rejects(
    ProxyWasmHost.create({ wasm: await wat('filter'), pluginConfig: '0 refuse me', clock: 'manual' }),
    (e: Error) => /Wasm VM canary.*Failed to configure base Wasm plugin/.test(e.message) && /plugin logs:/.test(e.message),
  );
});

test('plugin configuration larger than 4 KiB is delivered intact', async () => {
  const big = Buffer.alloc(10_000);
  for (let i = 0; i < big.length; i++) big[i] = 32 + ((i * 7) % 90);
  big[0] = 0x7b; // '{'
  const host = await ProxyWasmHost.create({ wasm: await wat('filter'), pluginConfig: big, clock: 'manual' });
  try {
    assert.deepEqual(host.sharedData().config.value, big);
  } finally {
    await host.close();
  }
});

test('close() runs on_done/on_delete for root contexts and stops everything', async () => {
  const host = await ProxyWasmHost.create({ wasm: await wat('filter'), clock: 'manual', workers: 1, mainThread: false, canary: false });
  const before = host.sharedData().trace.value.toString();
  assert.equal(before, 'c');
  const vm = host.vms[0];
  await host.close();
  assert.equal(vm.closed, true);
  assert.throws(() => host.requestSync(H), /closed/);
});
