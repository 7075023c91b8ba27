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
