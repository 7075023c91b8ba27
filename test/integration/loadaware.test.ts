// Load-aware instance choice end to end in the embedded host: snapshots with INSTANCES (encoded by
// the agent's codec) are served to the real filter; the test checks the header Envoy's ORIGINAL_DST
// cluster would route on, the skips, the link interplay, the all-ineligible policies and herding.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeSnapshot, type InstanceRecord } from '../../agent/src/snapshot/codec';
import { ProxyWasmHost, type RequestResult } from '../../host/src';
import { WASM, header } from './helpers';

const AUTH = 'inference.example';
const T0 = 1_000_000;

function inst(addr: string, over: Partial<InstanceRecord> = {}): InstanceRecord {
  return { service: 'llm', addr, peer: '', healthy: true, reason: 'ok', rho: 0.3, esMs: 10, es2Ms2: 200, lambdaPerS: 10, queueDepth: 0,
    p50Ms: 10, p99Ms: 40, baselineP99Ms: 40, gpuUtil: 0.3, dataAgeMs: 0, slots: 1, ...over };
}

interface Bed {
  host: ProxyWasmHost;
  /** Serve this snapshot from now on (new seq, generated now) and let every VM adopt it. */
  serve(instances: InstanceRecord[], link?: 'normal' | 'degraded', rttMs?: number): Promise<void>;
  request(extra?: Record<string, string>, worker?: number): Promise<RequestResult>;
}

interface BedOptions {
  workers?: number;
  /** The plugin's `link` section (default: data valid for 60 s, so that only the tested staleness runs). */
  link?: Record<string, unknown>;
  refreshMs?: number;
}

let seq = 1;
/**
 * The shipped default picker (p2c) runs unless a test sets one: with two eligible instances p2c
 * always compares both, so it is deterministic there. Service data stays valid for 60 s unless a
 * test passes stalenessMs (or `stalenessMs: undefined` for the shipped default).
 */
async function bed(loadAware: Record<string, unknown> = {}, opts: BedOptions = {}): Promise<Bed> {
  let body: Buffer = Buffer.alloc(0);
  const refreshMs = opts.refreshMs ?? 10;
  const host = await ProxyWasmHost.create({
    wasm: WASM, workers: opts.workers ?? 1, mainThread: false, canary: false, clock: 'manual', startTimeMs: T0,
    pluginConfig: JSON.stringify({
      agent: { cluster: 'switchyard_agent', longPollMs: 0, pollMs: refreshMs }, refreshMs, leaseMs: 20 * refreshMs,
      link: opts.link ?? { stalenessMs: 60000, services: [] },
      loadAware: { services: [{ authorities: [AUTH], service: 'llm', stalenessMs: 60000, debug: true, ...loadAware }] },
    }),
    clusters: { switchyard_agent: { handler: () => ({ status: 200, body }) } },
  });
  return {
    host,
    serve: async (instances, link = 'normal', rttMs = 10) => {
      const now = host.clock.nowMs();
      body = encodeSnapshot({ seq: ++seq, generatedAtMs: now,
        peers: [{ name: 'cloud-b', state: link, lastRttMs: rttMs, avgRttMs: rttMs, recoverStreak: 10, lastSampleAtMs: now }], instances });
      for (let i = 0; i < 8; i++) await host.advance(refreshMs);
    },
    request: (extra = {}, worker) => host.request({ ':method': 'POST', ':path': '/v1/completions', ':authority': AUTH, ...extra }, { worker }),
  };
}

const endpoint = (r: RequestResult) => header(r.upstreamHeaders, 'x-switchyard-endpoint');

test('picker band 0 chooses the lowest expected wait and overwrites a client-sent endpoint', async () => {
  const b = await bed({ picker: 'band', band: 0 });
  try {
    await b.serve([inst('10.0.0.1:80', { rho: 0.8, queueDepth: 3 }), inst('10.0.0.2:80', { rho: 0.2 }), inst('10.0.0.3:80', { rho: 0.5, queueDepth: 1 })]);
    const r = await b.request({ 'x-switchyard-endpoint': '169.254.169.254:80' });
    assert.deepEqual(endpoint(r), ['10.0.0.2:80']);
    assert.match(header(r.responseHeaders, 'x-switchyard-debug')[0], /^instance=10\.0\.0\.2:80 w_ms=10\.0 rho=0\.2\d* eligible=3 considered=1 inband=1\.0$/);
    // debug on: a client copy never reaches the upstream, an upstream copy is replaced by the filter's
    const d = await b.host.request({ ':method': 'POST', ':path': '/v1/completions', ':authority': AUTH, 'x-switchyard-debug': 'client' },
      { response: { status: 200, headers: { 'x-switchyard-debug': 'upstream', 'x-switchyard-endpoint': '10.0.0.2:80' } } });
    assert.deepEqual(header(d.upstreamHeaders, 'x-switchyard-debug'), []);
    assert.equal(header(d.responseHeaders, 'x-switchyard-debug').length, 1);
    assert.match(header(d.responseHeaders, 'x-switchyard-debug')[0], /^instance=10\.0\.0\.2:80 /);
    assert.deepEqual(header(d.responseHeaders, 'x-switchyard-endpoint'), []);
  } finally {
    await b.host.close();
  }
});

test('skips saturated, unhealthy, slow and stale instances, and counts why', async () => {
  const b = await bed();
  try {
    await b.serve([
      inst('10.0.0.1:80', { rho: 0.96, queueDepth: 1 }),              // saturated: rho >= 0.95 and its one slot busy
      inst('10.0.0.2:80', { healthy: false, reason: 'unreachable' }), // unhealthy
      inst('10.0.0.3:80', { p99Ms: 700, baselineP99Ms: 100 }),        // score 0.43 < 0.5: out
      inst('10.0.0.4:80', { dataAgeMs: 70000 }),                      // older than stalenessMs
      inst('10.0.0.5:80', { rho: 0.9, queueDepth: 0 }),               // the only eligible one
    ]);
    for (let i = 0; i < 5; i++) assert.deepEqual(endpoint(await b.request()), ['10.0.0.5:80']);
    await b.host.advance(20); // counters reach the host on the tick
    assert.equal(b.host.metric('switchyard.lb.skip.saturated'), 5);
    assert.equal(b.host.metric('switchyard.lb.skip.unhealthy'), 5);
    assert.equal(b.host.metric('switchyard.lb.skip.slow'), 5);
    assert.equal(b.host.metric('switchyard.lb.skip.stale'), 5);
    assert.equal(b.host.metric('switchyard.lb.choice.llm'), 5, 'one choice counter per service');
  } finally {
    await b.host.close();
  }
});

test('de-weights a slow instance progressively instead of dropping it', async () => {
  const b = await bed();
  try {
    // same load; B's P99 is 4.5x its baseline: score 0.67, its cost counts 1/0.67 = 1.5x
    await b.serve([inst('10.0.0.1:80', { queueDepth: 4 }), inst('10.0.0.2:80', { p99Ms: 180, baselineP99Ms: 40 })]);
    const r = await b.request();
    // A: 10 + 4·10 = 50 ms; B: 10 / 0.667 = 15 ms: B still wins while it is much less loaded
    assert.deepEqual(endpoint(r), ['10.0.0.2:80']);
    await b.serve([inst('10.0.0.1:80', { queueDepth: 0 }), inst('10.0.0.2:80', { p99Ms: 180, baselineP99Ms: 40 })]);
    assert.deepEqual(endpoint(await b.request()), ['10.0.0.1:80']); // equal load: the healthy one
  } finally {
    await b.host.close();
  }
});

test('a degraded cross-cloud link excludes remote instances', async () => {
  const b = await bed();
  try {
    const fleet = [inst('10.0.0.1:80', { rho: 0.7, queueDepth: 2 }), inst('10.1.0.1:80', { peer: 'cloud-b', rho: 0.1 })];
    await b.serve(fleet, 'normal');
    assert.deepEqual(endpoint(await b.request()), ['10.1.0.1:80'], 'the idle remote instance wins while the line is fine');
    await b.serve(fleet, 'degraded');
    for (let i = 0; i < 5; i++) assert.deepEqual(endpoint(await b.request()), ['10.0.0.1:80']);
    await b.host.advance(20);
    assert.ok((b.host.metric('switchyard.lb.skip.link_degraded') ?? 0) >= 5);
  } finally {
    await b.host.close();
  }
});

test('a remote instance pays the measured link round trip', async () => {
  const b = await bed();
  try {
    // local: 10 + 3 queued × 10 = 40 ms; remote: 10 ms + RTT
    const fleet = [inst('10.0.0.1:80', { queueDepth: 3 }), inst('10.1.0.1:80', { peer: 'cloud-b' })];
    await b.serve(fleet, 'normal', 10);
    assert.deepEqual(endpoint(await b.request()), ['10.1.0.1:80'], '10 + 10 < 40');
    await b.serve(fleet, 'normal', 45); // inside the hysteresis band: still normal, but slow
    assert.deepEqual(endpoint(await b.request()), ['10.0.0.1:80'], '10 + 45 > 40');
  } finally {
    await b.host.close();
  }
});

test('all ineligible, forward-degraded: the default route with x-degraded: true, never a silent drop', async () => {
  const b = await bed({ allIneligible: 'forward-degraded' });
  try {
    await b.serve([inst('10.0.0.1:80', { dataAgeMs: 70000 }), inst('10.0.0.2:80', { healthy: false })]);
    const r = await b.request({ 'x-switchyard-endpoint': '10.9.9.9:1', 'x-degraded': 'false' });
    assert.equal(r.localReply, undefined);
    assert.deepEqual(endpoint(r), [], 'no endpoint: ORIGINAL_DST is not used');
    assert.deepEqual(header(r.upstreamHeaders, 'x-degraded'), ['true']);
    await b.host.advance(20);
    assert.equal(b.host.metric('switchyard.lb.all_ineligible'), 1);
  } finally {
    await b.host.close();
  }
});

test('every eligible instance saturated, forward-degraded: the filter still chooses among them (the regular cluster would reach the unhealthy one)', async () => {
  const b = await bed({ allIneligible: 'forward-degraded' });
  try {
    await b.serve([inst('10.0.0.1:80', { rho: 0.99, queueDepth: 1 }), inst('10.0.0.2:80', { healthy: false })]);
    const r = await b.request({ 'x-degraded': 'false' });
    assert.deepEqual(endpoint(r), ['10.0.0.1:80']);
    assert.deepEqual(header(r.upstreamHeaders, 'x-degraded'), []);
    await b.host.advance(20);
    assert.equal(b.host.metric('switchyard.lb.all_ineligible') ?? 0, 0);
  } finally {
    await b.host.close();
  }
});

test('all ineligible, reject-503: a local 503 with retry-after', async () => {
  const b = await bed({ allIneligible: 'reject-503', retryAfterS: 2 });
  try {
    await b.serve([inst('10.0.0.1:80', { rho: 0.97, queueDepth: 2 })]);
    const r = await b.request();
    assert.equal(r.localReply?.status, 503);
    assert.equal(r.localReply?.details, 'switchyard_all_instances_ineligible');
    assert.deepEqual(header(r.localReply!.headers, 'retry-after'), ['2']);
    assert.equal(r.upstreamHeaders, undefined, 'nothing went upstream');
  } finally {
    await b.host.close();
  }
});

test('a client-sent x-degraded is stripped on load-aware and other authorities', async () => {
  const b = await bed();
  try {
    await b.serve([inst('10.0.0.1:80')]);
    const r = await b.request({ 'x-degraded': 'true' });
    assert.deepEqual(header(r.upstreamHeaders, 'x-degraded'), []);
    assert.deepEqual(endpoint(r), ['10.0.0.1:80']);
    const o = await b.host.request({ ':method': 'GET', ':path': '/', ':authority': 'other.example', 'x-degraded': 'true', 'x-switchyard-endpoint': '10.9.9.9:1' });
    assert.deepEqual(header(o.upstreamHeaders, 'x-degraded'), []);
    assert.deepEqual(header(o.upstreamHeaders, 'x-switchyard-endpoint'), []);
  } finally {
    await b.host.close();
  }
});

test('herding: our own in-flight requests count at once, across worker VMs', async () => {
  const b = await bed({}, { workers: 2 });
  const release: (() => void)[] = [];
  const held = (worker: number) => b.host.request({ ':method': 'POST', ':path': '/', ':authority': AUTH },
    { worker, response: () => new Promise((resolve) => release.push(() => resolve({ status: 200 }))) });
  try {
    // A looks idle, B has 5.5 requests queued; both serve one request at a time at the same speed.
    await b.serve([inst('10.0.0.1:80', { queueDepth: 0 }), inst('10.0.0.2:80', { queueDepth: 5.5 })]);
    const w0: Promise<RequestResult>[] = [];
    for (let i = 0; i < 6; i++) w0.push(held(0));
    await new Promise((r) => setImmediate(r));
    // worker 1 learns worker 0's in-flight counts on the next tick: A now has 6 of ours > B's 5.5
    await b.host.advance(20);
    const r1 = held(1);
    await new Promise((r) => setImmediate(r));
    release.splice(0).forEach((f) => f());
    await new Promise((r) => setImmediate(r));
    await b.host.advance(1); // manual clock: upstream answers are delivered on the next advance
    const first = await Promise.all(w0);
    assert.deepEqual(first.map((r) => endpoint(r)[0]), Array(6).fill('10.0.0.1:80'), 'a burst fills A up to B\'s backlog, not past it');
    assert.deepEqual(endpoint(await r1), ['10.0.0.2:80'], 'worker 1 counts worker 0\'s in-flight requests');
    // the streams ended: A is free again for both workers
    await b.host.advance(20);
    assert.deepEqual(endpoint(await b.request({}, 1)), ['10.0.0.1:80']);
    assert.deepEqual(endpoint(await b.request({}, 0)), ['10.0.0.1:80']);
  } finally {
    release.forEach((f) => f());
    await b.host.close();
  }
});

test('default picker (p2c): the cheaper of two random instances, never the worst of three, spread over the rest', async () => {
  const b = await bed();
  try {
    await b.serve([inst('10.0.0.1:80', { queueDepth: 5 }), inst('10.0.0.2:80', { queueDepth: 0 }), inst('10.0.0.3:80', { queueDepth: 1 })]);
    const seen = new Map<string, number>();
    for (let i = 0; i < 40; i++) {
      const r = await b.request();
      const e = endpoint(r)[0];
      seen.set(e, (seen.get(e) ?? 0) + 1);
      assert.match(header(r.responseHeaders, 'x-switchyard-debug')[0], / eligible=3 considered=2 inband=1\.0$/);
    }
    assert.equal(seen.get('10.0.0.1:80'), undefined, 'the most loaded instance loses every pair it is in');
    assert.ok((seen.get('10.0.0.2:80') ?? 0) > 20, 'the idle one wins every pair it is in (2 of 3 pairs)');
    assert.ok((seen.get('10.0.0.3:80') ?? 0) > 0, 'the middle one wins the pair without the idle one');
    await b.host.advance(20);
    assert.equal(b.host.metric('switchyard.lb.choice.llm'), 40);
  } finally {
    await b.host.close();
  }
});

test('default picker (p2c) with the shipped stalenessMs: an instance whose data went stale gets nothing', async () => {
  const b = await bed({ stalenessMs: undefined }); // shipped default: 5000 ms
  try {
    // 1 is idle but its data was scraped 4.5 s before the snapshot: stale 0.5 s later
    await b.serve([inst('10.0.0.1:80', { dataAgeMs: 4500 }), inst('10.0.0.2:80', { queueDepth: 3 }), inst('10.0.0.3:80', { queueDepth: 3 })]);
    let toStale = 0;
    for (let i = 0; i < 30; i++) if (endpoint(await b.request())[0] === '10.0.0.1:80') toStale++;
    assert.ok(toStale > 10, `fresh, it wins every pair it is drawn into (${toStale}/30)`);
    await b.host.advance(500);
    for (let i = 0; i < 30; i++) assert.notEqual(endpoint(await b.request())[0], '10.0.0.1:80');
    await b.host.advance(20);
    assert.equal(b.host.metric('switchyard.lb.skip.stale'), 30);
  } finally {
    await b.host.close();
  }
});

test('link data gone stale with the shipped link settings (1 s, failMode degraded): remote instances get nothing', async () => {
  const b = await bed({}, { link: { services: [] } });
  try {
    const fleet = [inst('10.0.0.1:80', { queueDepth: 3 }), inst('10.1.0.1:80', { peer: 'cloud-b' })];
    await b.serve(fleet, 'normal');
    assert.deepEqual(endpoint(await b.request()), ['10.1.0.1:80'], 'idle remote instance, fresh link data');
    // no new snapshot: the link data passes its 1 s staleness while the instance data (60 s) is fresh
    await b.host.advance(1000);
    for (let i = 0; i < 5; i++) assert.deepEqual(endpoint(await b.request()), ['10.0.0.1:80']);
    await b.host.advance(20);
    assert.equal(b.host.metric('switchyard.lb.skip.link_degraded'), 5);
  } finally {
    await b.host.close();
  }
});

test('model mg1 is selectable: the M/G/1 queueing delay prices a busy-but-empty instance', async () => {
  // A: rho 0.9 by the agent's window but its queue is empty now; B: rho 0.3 with 3 queued.
  // conditional: A 10 ms, B 10 + 3·10 = 40 ms. mg1 adds rho·E[S²]/(2E[S](1−rho)):
  // A 10 + 450 = 460 ms, B 10 + 21.4 + 30 = 61.4 ms.
  const fleet = [inst('10.0.0.1:80', { rho: 0.9, es2Ms2: 1000 }), inst('10.0.0.2:80', { rho: 0.3, es2Ms2: 1000, queueDepth: 3 })];
  const c = await bed();
  try {
    await c.serve(fleet);
    const r = await c.request();
    assert.deepEqual(endpoint(r), ['10.0.0.1:80'], 'default model: conditional');
    assert.match(header(r.responseHeaders, 'x-switchyard-debug')[0], /w_ms=10\.0 /);
  } finally {
    await c.host.close();
  }
  const m = await bed({ model: 'mg1' });
  try {
    await m.serve(fleet);
    const r = await m.request();
    assert.deepEqual(endpoint(r), ['10.0.0.2:80']);
    assert.match(header(r.responseHeaders, 'x-switchyard-debug')[0], /instance=10\.0\.0\.2:80 w_ms=61\.4\d* /);
  } finally {
    await m.host.close();
  }
});

test('state stays bounded while 10,000 addresses churn through a fleet of 100 (memory, metrics, shared in-flight table)', async () => {
  const b = await bed({}, { workers: 2, refreshMs: 100 });
  const release: (() => void)[] = [];
  // one request per round that never ends before its instance is gone: its slot is freed under it
  const held = (worker: number) => b.host.request({ ':method': 'POST', ':path': '/', ':authority': AUTH },
    { worker, response: () => new Promise((resolve) => release.push(() => resolve({ status: 200 }))) });
  const pending: Promise<RequestResult>[] = [];
  const fleet = (round: number) => Array.from({ length: 100 }, (_, i) => inst(`10.${(round >> 8) & 255}.${round & 255}.${i}:80`));
  const sample = () => ({
    metrics: b.host.metrics().length,
    memory: Math.max(...b.host.workers.map((w) => w.memoryBytes())),
    inflightDoc: b.host.sharedData()['switchyard.inflight.v1']?.value.length ?? 0,
  });
  try {
    let warm = sample();
    for (let round = 0; round < 100; round++) {
      await b.serve(fleet(round)); // 100 new addresses each round (800 ms)
      pending.push(held(round % 2));
      for (let i = 0; i < 4; i++) assert.match(endpoint(await b.request({}, i % 2))[0], new RegExp(`^10\\.0\\.${round}\\.`));
      await b.host.advance(200);
      if (round === 49) warm = sample(); // well past the 10 s grace: churned slots are being reused
    }
    const end = sample();
    assert.equal(end.metrics, warm.metrics, 'no metric per address');
    assert.ok(end.memory <= warm.memory + 64 * 1024, `wasm memory flat after warm-up: ${warm.memory} -> ${end.memory} bytes`);
    // in-flight entries (u8 length, address of <= 13 bytes, u32 count) only for the addresses held
    // within the grace (10 s: 10 rounds, +2 for when the once-a-second sweep notices) in 2 workers'
    // sections; without freeing, all 100 held requests would be listed
    assert.ok(end.inflightDoc <= 2 * 14 + 13 * (1 + 13 + 4), `shared in-flight document bounded: ${end.inflightDoc} bytes`);
    // the held requests end long after their slots were freed and reused: nothing else is released
    release.splice(0).forEach((f) => f());
    await b.host.advance(1);
    await Promise.all(pending);
    await b.host.advance(200);
    assert.equal(b.host.sharedData()['switchyard.inflight.v1']?.value.length, 2 * 14, 'no in-flight request left');
    const r = await b.request();
    assert.match(header(r.responseHeaders, 'x-switchyard-debug')[0], / eligible=100 considered=2 inband=1\.0$/);
  } finally {
    release.forEach((f) => f());
    await b.host.close();
  }
});
