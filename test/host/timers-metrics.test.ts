// Tick timers (real and virtual clock), metrics, properties, log level.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ProxyWasmHost } from '../../host/src';
import { wat } from './helpers';

test('manual clock: each root context ticks every period, in virtual time; time is virtual', async () => {
  const host = await ProxyWasmHost.create({ wasm: await wat('filter'), pluginConfig: 'T', clock: 'manual', startTimeMs: 1_000_000 });
  try {
    assert.equal(host.metric('ticks'), undefined);
    await host.advance(99);
    assert.equal(host.metric('ticks'), undefined);
    host.advanceSync(1);
    // two workers + the main-thread VM tick; the canary was discarded after configure
    assert.equal(host.metric('ticks'), 3);
    host.advanceSync(1000);
    assert.equal(host.metric('ticks'), 33);
    assert.equal(host.sharedData().now.value.readBigUInt64LE(0), BigInt(1_001_100) * 1_000_000n);
  } finally {
    await host.close();
  }
  await assert.rejects(async () => {
    const h = await ProxyWasmHost.create({ wasm: await wat('filter'), canary: false });
    try {
      await h.advance(1);
    } finally {
      await h.close();
    }
  }, /manual/);
});

test('real clock ticks', async () => {
  const host = await ProxyWasmHost.create({ wasm: await wat('filter'), pluginConfig: 'T', clock: 'real', workers: 1, mainThread: false, canary: false });
  try {
    await new Promise((r) => setTimeout(r, 330));
    const n = host.metric('ticks') ?? 0;
    assert.ok(n >= 2 && n <= 4, `ticks ${n}`);
    const now = host.sharedData().now.value.readBigUInt64LE(0);
    assert.ok(Math.abs(Number(now / 1_000_000n) - Date.now()) < 1000);
  } finally {
    await host.close();
  }
});

test('metrics: ids per VM (counter 4, gauge 5, histogram 6, +4 per definition), values shared process-wide', async () => {
  const host = await ProxyWasmHost.create({ wasm: await wat('filter'), clock: 'manual', canary: false, mainThread: false });
  const read = () => {
    const b = host.sharedData().metricvals.value;
    return {
      ids: [b.readUInt32LE(0), b.readUInt32LE(4), b.readUInt32LE(8)],
      counter: b.readBigUInt64LE(12), gauge: b.readBigUInt64LE(20),
      getHistogram: b.readUInt32LE(28), incCounterBy0: b.readUInt32LE(32), incHistogram: b.readUInt32LE(36),
    };
  };
  try {
    host.requestSync({ ':path': '/', 'x-test': 'k' }, { worker: 0 });
    assert.deepEqual(read(), { ids: [4, 5, 6], counter: 1n, gauge: 3n, getHistogram: 2, incCounterBy0: 2, incHistogram: 2 });
    host.requestSync({ ':path': '/', 'x-test': 'k' }, { worker: 0 });
    assert.deepEqual(read().ids, [8, 9, 10]);
    assert.equal(read().counter, 2n);
    host.requestSync({ ':path': '/', 'x-test': 'k' }, { worker: 1 });
    assert.deepEqual(read().ids, [4, 5, 6]);
    assert.equal(read().counter, 3n);
    assert.equal(host.metric('reqs'), 3);
    assert.equal(host.metric('gauge'), 3);
    const hist = host.metrics().find((m) => m.name === 'hist');
    assert.deepEqual({ count: hist?.count, sum: hist?.sum }, { count: 3, sum: 126 });
    const prom = host.prometheus();
    assert.match(prom, /^# TYPE reqs counter\nreqs 3$/m);
    assert.match(prom, /^# TYPE gauge gauge\ngauge 3$/m);
    assert.match(prom, /^hist_bucket\{le="50"\} 3$/m);
    assert.match(prom, /^hist_count 3$/m);
    assert.match(host.statsText(), /^wasmcustom\.reqs: 3$/m);
  } finally {
    await host.close();
  }
});

test('properties: plugin_root_id; unknown path → NotFound', async () => {
  const host = await ProxyWasmHost.create({ wasm: await wat('filter'), rootId: 'my_root', clock: 'manual', canary: false });
  try {
    host.requestSync({ ':path': '/', 'x-test': 'P' });
    assert.equal(host.sharedData().prop.value.toString(), 'my_root');
    assert.deepEqual(host.sharedData().rc.value, Buffer.from([1]));
  } finally {
    await host.close();
  }
});

test('proxy_get_log_level reports the host level; proxy_log below it is dropped', async () => {
  const info = await ProxyWasmHost.create({ wasm: await wat('filter'), clock: 'manual', canary: false, logLevel: 'info' });
  const warn = await ProxyWasmHost.create({ wasm: await wat('filter'), clock: 'manual', canary: false, logLevel: 'warn' });
  try {
    assert.equal(info.sharedData().loglevel.value.readUInt32LE(0), 2);
    assert.equal(warn.sharedData().loglevel.value.readUInt32LE(0), 3);
    assert.equal(warn.logs().filter((l) => l.message === 'configured').length, 0);
    assert.ok(info.logs().some((l) => l.message === 'configured' && l.levelName === 'info'));
  } finally {
    await info.close();
    await warn.close();
  }
});
