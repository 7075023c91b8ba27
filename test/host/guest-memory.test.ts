// The host functions' view of guest memory: the decode cache of short strings (header names and
// values) and the exact u64 writes of the clock. The cache is content-addressed: whatever the
// guest wrote at an address is what the host reads, however many distinct strings go through it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { GuestMemory, type WAMemory } from '../../host/src/guest-memory';
import { ManualClock } from '../../host/src/clock';
import { ProxyWasmHost } from '../../host/src';
import { wat } from './helpers';

class Memory extends GuestMemory {
  constructor(readonly wasm: { buffer: ArrayBuffer; grow(pages: number): number }) {
    super();
    this.memory = wasm as WAMemory;
  }
  alloc(): number | null { return null; }
  bytes(): Buffer { return Buffer.from(this.wasm.buffer); }
}

const newMemory = () => new Memory(new (globalThis as unknown as { WebAssembly: { Memory: new (d: { initial: number }) => { buffer: ArrayBuffer; grow(p: number): number } } }).WebAssembly.Memory({ initial: 2 }));

test('decode cache: 5,000 distinct strings (a fleet of addresses, one digit apart) read back exactly, aligned or not', () => {
  const g = newMemory();
  const strs: string[] = [];
  for (let i = 0; i < 5000; i++) strs.push(`10.${i >> 16}.${(i >> 8) & 255}.${i & 255}:8000`);
  strs.push('x-switchyard-endpoint', 'X-Switchyard-Endpoint', '', 'a'.repeat(64), 'b'.repeat(65));
  for (let round = 0; round < 3; round++) {
    for (let k = 0; k < strs.length; k++) {
      // a fresh place every time, 4-byte aligned on even k and not on odd k
      const ptr = 4096 + ((k * 97 + round * 13) % 20000) * 4 + (k & 1 ? 1 + (k % 3) : 0);
      const b = g.bytes();
      b.write(strs[k], ptr, 'latin1');
      assert.equal(g.str(ptr, strs[k].length), strs[k]);
      assert.equal(g.key(ptr, strs[k].length), strs[k].toLowerCase());
    }
  }
});

test('decode cache: bytes rewritten at the same address are read anew; one byte changed is a different string', () => {
  const g = newMemory();
  const b = g.bytes();
  b.write('x-switchyard-debug', 1024, 'latin1');
  assert.equal(g.str(1024, 18), 'x-switchyard-debug');
  b.write('x-switchyard-route', 1024, 'latin1');
  assert.equal(g.str(1024, 18), 'x-switchyard-route');
  for (let i = 0; i < 18; i++) {
    const before = b[1024 + i];
    b[1024 + i] = 0x41;
    const expect = 'x-switchyard-route'.slice(0, i) + 'A' + 'x-switchyard-route'.slice(i + 1);
    assert.equal(g.str(1024, 18), expect, `byte ${i}`);
    assert.equal(g.key(1024, 18), expect.toLowerCase(), `byte ${i}`);
    b[1024 + i] = before;
    assert.equal(g.str(1024, 18), 'x-switchyard-route');
  }
  // a prefix of a cached string is its own string
  assert.equal(g.str(1024, 12), 'x-switchyard');
  assert.equal(g.str(1024, 0), '');
});

test('decode cache survives memory growth (the old buffer is detached) and bounds are checked', () => {
  const g = newMemory();
  g.bytes().write('endpoint-load-metrics', 2048, 'latin1');
  assert.equal(g.str(2048, 21), 'endpoint-load-metrics');
  g.wasm.grow(1);
  g.bytes().write('endpoint-load-metricz', 2048, 'latin1');
  assert.equal(g.str(2048, 21), 'endpoint-load-metricz');
  const size = g.wasm.buffer.byteLength;
  assert.equal(g.str(size - 4, 8), null);
  assert.equal(g.key(size, 1), null);
  assert.equal(g.str(size - 4, 4), '\0\0\0\0');
});

test('clock: proxy_get_current_time_nanoseconds writes the manual clock exactly, at epoch scale too (beyond 2^53 ns)', () => {
  const g = newMemory();
  for (const ms of [0, 1, 1_000_000, 1_001_100.5, 1_764_523_200_000, 1_764_523_200_123.456, 9_007_199.254740993, 4_102_444_800_000.999]) {
    const c = new ManualClock(ms);
    const n = c.nowNsNumber();
    assert.ok(n >= 0, `${ms}`);
    assert.ok(g.setU64Number(64, n));
    assert.equal(g.bytes().readBigUInt64LE(64), c.nowNs(), `${ms} ms`);
  }
  // negative times keep the BigInt path (two's complement, as before)
  assert.equal(new ManualClock(-1).nowNsNumber(), -1);
  assert.equal(g.setU64Number(g.wasm.buffer.byteLength - 4, 1), false);
});

test('clock: the guest reads the exact virtual time through proxy_get_current_time_nanoseconds at epoch scale', async () => {
  const start = 1_764_523_200_000.25;
  const host = await ProxyWasmHost.create({ wasm: await wat('filter'), pluginConfig: 'T', clock: 'manual', startTimeMs: start, workers: 1, mainThread: false, canary: false });
  try {
    await host.advance(100);
    const now = host.sharedData().now.value.readBigUInt64LE(0);
    assert.equal(now, BigInt(Math.round((start + 100) * 1e6)));
    assert.ok(now > 2n ** 53n);
  } finally {
    await host.close();
  }
});
