// SDK fixes and our ABI wrappers, exercised in the embedded host (which follows
// proxy-wasm-cpp-host): each test fails if the fix it names is reverted.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { ProxyWasmHost } from '../../host/src';

const ROOT = path.resolve(__dirname, '../..');
const probe = (name: string) => path.join(ROOT, `build/probe-${name}.wasm`);

function fnv(s: string): number {
  let h = 2166136261;
  for (const b of Buffer.from(s, 'utf8')) { h ^= b; h = Math.imul(h, 16777619) >>> 0; }
  return h;
}

function probeLines(host: ProxyWasmHost): Map<string, string> {
  const out = new Map<string, string>();
  for (const l of host.logs()) {
    const m = /^probe (\S+)=(.*)$/.exec(l.message);
    if (m && !out.has(m[1])) out.set(m[1], m[2]);
  }
  return out;
}

test('SDK RootContext.onConfigure (patched) reads a plugin configuration over 4 KiB intact', async () => {
  const config = JSON.stringify({ pad: 'x'.repeat(6000), tail: 'end-\u00e9' });
  const host = await ProxyWasmHost.create({ rootId: 'switchyard', wasm: probe('sdk-configure'), pluginConfig: config, workers: 1 });
  try {
    const line = host.logs().find((l) => l.message.startsWith('probe config'));
    assert.equal(line?.message, `probe config length=${Buffer.byteLength(config)} fnv=${fnv(config)}`);
  } finally {
    await host.close();
  }
});

test('SDK RootContext.onConfigure (patched) writes the size where the ABI says, not at address = size', async () => {
  const learn = await ProxyWasmHost.create({ rootId: 'switchyard', wasm: probe('sdk-configure'), pluginConfig: '{}', workers: 1 });
  const m = /probe sentinel address=(\d+) intact/.exec(learn.logs().map((l) => l.message).join('\n'));
  await learn.close();
  assert.ok(m, 'the probe reports its sentinel');
  const addr = Number(m[1]);
  const host = await ProxyWasmHost.create({ rootId: 'switchyard', wasm: probe('sdk-configure'), pluginConfig: 'z'.repeat(addr), workers: 1 });
  try {
    assert.ok(host.logs().some((l) => l.message === `probe sentinel address=${addr} intact`), 'a configuration of that size must not corrupt memory');
  } finally {
    await host.close();
  }
});

test('readPluginConfiguration (raw buffer import) reads 64 KiB intact', async () => {
  const config = 'y'.repeat(65536);
  const host = await ProxyWasmHost.create({ rootId: 'switchyard', wasm: probe('abi-wrappers'), pluginConfig: config, workers: 1 });
  try {
    assert.equal(probeLines(host).get('config-length'), '65536');
  } finally {
    await host.close();
  }
});

test('shared-data wrappers: NotFound, CAS success, CAS conflict detected', async () => {
  const host = await ProxyWasmHost.create({ rootId: 'switchyard', wasm: probe('abi-wrappers'), pluginConfig: 'shared-cas', workers: 1, mainThread: false, canary: false });
  try {
    const p = probeLines(host);
    assert.equal(p.get('get-missing'), '1'); // NotFound
    assert.equal(p.get('set-first'), '0');
    assert.equal(p.get('get-a'), 'a/cas');
    assert.equal(p.get('set-with-cas'), '0');
    assert.equal(p.get('set-stale-cas'), '8'); // CasMismatch
    assert.equal(p.get('get-b'), 'b');
    assert.equal(p.get('cas-changed'), 'true');
  } finally {
    await host.close();
  }
});

test('metric wrappers: define, increment, record, get', async () => {
  const host = await ProxyWasmHost.create({ rootId: 'switchyard', wasm: probe('abi-wrappers'), pluginConfig: 'metrics', workers: 1, mainThread: false, canary: false });
  try {
    const p = probeLines(host);
    assert.equal(p.get('counter'), '7');
    assert.equal(p.get('gauge'), '42');
    assert.equal(host.metric('probe.counter'), 7);
  } finally {
    await host.close();
  }
});

test('wasm memory stays flat over 100,000 requests, with no log call on the request path', async () => {
  const config = JSON.stringify({ agent: { cluster: 'switchyard_agent' }, link: { services: [{ authorities: ['payment.example'], peer: 'cloud-b' }] },
    loadAware: { services: [] } });
  const host = await ProxyWasmHost.create({ wasm: path.join(ROOT, 'build/switchyard.wasm'), pluginConfig: config, workers: 1,
    mainThread: false, canary: false, clock: 'manual', clusters: { switchyard_agent: { handler: () => ({ status: 503 }) } } });
  try {
    const vm = host.workers[0];
    const headers = { ':method': 'GET', ':path': '/', ':authority': 'payment.example', 'x-cross-cloud-status': 'normal' };
    const mixed = (i: number) => (i % 2 ? headers : { ...headers, ':authority': `h${i % 50}.other.example` });
    // warm up on the measured mix (the 50 other authorities fill the authority cache): the GC and
    // the cache reach their steady state, so any growth after it is a leak, not the working set
    for (let i = 0; i < 2000; i++) host.requestSync(mixed(i));
    const before = vm.memoryBytes();
    host.clearLogs();
    for (let i = 0; i < 100_000; i++) {
      const r = host.requestSync(mixed(i));
      if (i === 1) assert.deepEqual(r.upstreamHeaders!.filter(([k]) => k === 'x-cross-cloud-status'), [['x-cross-cloud-status', 'degraded']]);
    }
    assert.equal(vm.memoryBytes(), before, 'linear memory grew');
    assert.deepEqual(host.logs().filter((l) => l.source === 'wasm').map((l) => l.message), [], 'the request path logs nothing');
  } finally {
    await host.close();
  }
});
