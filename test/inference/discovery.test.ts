import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Discovery, type DiscoveryChange, type DnsResolver, formatAddr, parseAddr } from '../../agent/src/inference/discovery';

function fakeResolver(): DnsResolver & { v4: string[] | Error; v6: string[] | Error; calls: number } {
  const enodata = (): Error => Object.assign(new Error('queryAaaa ENODATA'), { code: 'ENODATA' });
  const r = {
    v4: [] as string[] | Error,
    v6: enodata() as string[] | Error,
    calls: 0,
    async resolve4(): Promise<string[]> {
      r.calls++;
      if (r.v4 instanceof Error) throw r.v4;
      return r.v4.slice();
    },
    async resolve6(): Promise<string[]> {
      if (r.v6 instanceof Error) throw r.v6;
      return r.v6.slice();
    },
  };
  return r;
}

test('DNS discovery: instances added and removed as the A/AAAA set changes', async () => {
  const res = fakeResolver();
  res.v4 = ['10.0.0.2', '10.0.0.1'];
  const d = new Discovery({ dns: { name: 'vllm.llm.svc.cluster.local', port: 8000, resolveIntervalMs: 3_600_000 } }, res);
  const changes: DiscoveryChange[] = [];
  d.on('change', (c: DiscoveryChange) => changes.push(c));
  await d.start();
  try {
    assert.deepEqual(d.current, ['10.0.0.1:8000', '10.0.0.2:8000']);
    assert.deepEqual(changes[0].added, ['10.0.0.1:8000', '10.0.0.2:8000']);

    res.v4 = ['10.0.0.2', '10.0.0.3'];
    res.v6 = ['fd00::7'];
    await d.refresh();
    assert.deepEqual(changes[1].added.sort(), ['10.0.0.3:8000', '[fd00::7]:8000']);
    assert.deepEqual(changes[1].removed, ['10.0.0.1:8000']);
    assert.deepEqual(d.current, ['10.0.0.2:8000', '10.0.0.3:8000', '[fd00::7]:8000']);

    // same set: no event
    await d.refresh();
    assert.equal(changes.length, 2);

    // a failing resolver (SERVFAIL / timeout) keeps the previous set
    res.v4 = Object.assign(new Error('queryA ESERVFAIL'), { code: 'ESERVFAIL' });
    res.v6 = Object.assign(new Error('queryAaaa ETIMEOUT'), { code: 'ETIMEOUT' });
    const errs: string[] = [];
    d.on('resolveError', (e: { message: string }) => errs.push(e.message));
    await d.refresh();
    assert.equal(changes.length, 2);
    assert.equal(d.current.length, 3);
    assert.match(errs[0], /ESERVFAIL/);
    assert.equal(d.failures, 1);

    // NXDOMAIN / no records (headless Service with no ready pods): the set empties
    res.v4 = Object.assign(new Error('queryA ENOTFOUND'), { code: 'ENOTFOUND' });
    res.v6 = Object.assign(new Error('queryAaaa ENODATA'), { code: 'ENODATA' });
    await d.refresh();
    assert.deepEqual(d.current, []);
    assert.equal(changes[2].removed.length, 3);
  } finally {
    d.stop();
  }
});

test('DNS discovery re-resolves periodically', async () => {
  const res = fakeResolver();
  res.v4 = ['10.0.0.1'];
  const d = new Discovery({ dns: { name: 'x', port: 1, resolveIntervalMs: 20, family: 'ipv4' } }, res);
  const seen = new Promise<DiscoveryChange>((resolve) => d.on('change', (c: DiscoveryChange) => c.added.includes('10.0.0.9:1') && resolve(c)));
  await d.start();
  res.v4 = ['10.0.0.1', '10.0.0.9'];
  const c = await Promise.race([seen, new Promise<never>((_, rej) => setTimeout(() => rej(new Error('no re-resolution within 2 s')), 2000))]);
  d.stop();
  assert.deepEqual(c.added, ['10.0.0.9:1']);
  assert.ok(res.calls >= 2);
});

test('static discovery and address helpers', async () => {
  const d = new Discovery({ static: ['127.0.0.1:9201', '127.0.0.1:9202', '127.0.0.1:9201'] });
  const got = new Promise<DiscoveryChange>((r) => d.once('change', r));
  await d.start();
  assert.deepEqual((await got).current, ['127.0.0.1:9201', '127.0.0.1:9202']);
  assert.equal(formatAddr('::1', 80), '[::1]:80');
  assert.deepEqual(parseAddr('[::1]:80'), { host: '::1', port: 80 });
  assert.deepEqual(parseAddr('10.1.2.3:8000'), { host: '10.1.2.3', port: 8000 });
  assert.throws(() => parseAddr('nope'), /invalid address/);
});

test('DNS discovery: one family without records and the other failing keeps the previous set (no address answered)', async () => {
  const res = fakeResolver();
  res.v4 = ['10.0.0.1'];
  const d = new Discovery({ dns: { name: 'x', port: 80, resolveIntervalMs: 3_600_000 } }, res);
  await d.start();
  try {
    assert.deepEqual(d.current, ['10.0.0.1:80']);
    res.v4 = Object.assign(new Error('queryA ENOTFOUND'), { code: 'ENOTFOUND' });
    res.v6 = Object.assign(new Error('queryAaaa ESERVFAIL'), { code: 'ESERVFAIL' });
    await d.refresh();
    assert.deepEqual(d.current, ['10.0.0.1:80']);
    assert.equal(d.failures, 1);
    // the failing family alone does not empty the set when the other one answers
    res.v4 = ['10.0.0.2'];
    await d.refresh();
    assert.deepEqual(d.current, ['10.0.0.2:80']);
    assert.equal(d.failures, 1);
    assert.equal(d.resolutions, 3);
  } finally {
    d.stop();
  }
});

test('DNS discovery: family ipv4 / ipv6 asks only that family; concurrent refreshes share one resolution', async () => {
  const res = fakeResolver();
  res.v4 = ['10.0.0.1'];
  res.v6 = ['fd00::1'];
  const v4 = new Discovery({ dns: { name: 'x', port: 80, resolveIntervalMs: 3_600_000, family: 'ipv4' } }, res);
  const v6 = new Discovery({ dns: { name: 'x', port: 80, resolveIntervalMs: 3_600_000, family: 'ipv6' } }, res);
  await Promise.all([v4.refresh(), v4.refresh(), v6.refresh()]);
  assert.deepEqual(v4.current, ['10.0.0.1:80']);
  assert.deepEqual(v6.current, ['[fd00::1]:80']);
  assert.equal(res.calls, 1, 'resolve4 once for the ipv4 discovery, never for the ipv6 one');
  assert.equal(v4.resolutions, 1);
});

test('Discovery.current is a copy: changing it does not change the discovered set', async () => {
  const d = new Discovery({ static: ['127.0.0.1:1', '127.0.0.1:2'] });
  await d.start();
  const a = d.current;
  a.push('127.0.0.1:3');
  a.shift();
  assert.deepEqual(d.current, ['127.0.0.1:1', '127.0.0.1:2']);
  // a second start() is a no-op (no second 'change')
  let changes = 0;
  d.on('change', () => changes++);
  await d.start();
  assert.equal(changes, 0);
  d.stop();
});

test('DNS discovery: stop() ends the re-resolution, also when called during a resolution and after a double start()', async () => {
  const wait = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
  // stopped from inside the second resolution (a refresh in flight)
  let calls = 0;
  let d: Discovery | undefined;
  const res: DnsResolver = {
    resolve4: async () => {
      calls++;
      if (calls === 2) d?.stop();
      await wait(5);
      return ['10.0.0.1'];
    },
    resolve6: async () => [],
  };
  d = new Discovery({ dns: { name: 'x', port: 1, resolveIntervalMs: 20, family: 'ipv4' } }, res);
  await d.start();
  for (let i = 0; i < 100 && calls < 2; i++) await wait(10);
  assert.equal(calls, 2);
  await wait(120);
  assert.equal(calls, 2, 'no resolution after stop()');

  // started twice: one loop only, and stop() ends it
  let n = 0;
  const r2: DnsResolver = { resolve4: async () => (n++, ['10.0.0.1']), resolve6: async () => [] };
  const d2 = new Discovery({ dns: { name: 'x', port: 1, resolveIntervalMs: 30, family: 'ipv4' } }, r2);
  await Promise.all([d2.start(), d2.start()]);
  assert.equal(n, 1, 'one initial resolution');
  d2.stop();
  await wait(120);
  assert.equal(n, 1, 'no loop left running after stop()');
});

test('parseAddr: the whole string must be ip:port or [v6]:port', () => {
  for (const bad of ['x[::1]:80', '[::1]:80x', 'a:b:80', '10.0.0.1:80x', ':10.0.0.1:80', '10.0.0.1:', '[::1]']) {
    assert.throws(() => parseAddr(bad), /invalid address/, bad);
  }
  assert.deepEqual(parseAddr('[fd00::1]:8000'), { host: 'fd00::1', port: 8000 });
});
