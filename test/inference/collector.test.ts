import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import { Registry } from 'prom-client';
import { InferenceCollector } from '../../agent/src/inference/collector';
import type { DnsResolver } from '../../agent/src/inference/discovery';
import { decodeInstancesSection, encodeInstancesSection, instancesSectionSize, INSTANCE_FIXED_BYTES, type InstanceRecord } from '../../agent/src/inference/encode';
import { InferenceConfigError, inferenceSchema, resolveInferenceConfig } from '../../agent/src/inference/schema';
import { startInferenceServer } from '../../sim/inference-server';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
async function until<T>(what: string, f: () => T | undefined | false, ms = 5000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = f();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

/** a port on which nothing listens */
async function deadPort(): Promise<number> {
  const s = http.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

function hit(url: string): Promise<void> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent: false }, (res) => {
        res.resume();
        res.on('end', () => resolve());
      })
      .on('error', reject);
  });
}

/** vLLM-style servers, c = 1, fixed 50 ms service; SLOW runs at 1/30 speed (1.5 s). */
const FAST = { speed: 1 };
const SLOW = { speed: 1 / 30 };

/** Starts the servers, keeps each one busy with back-to-back requests, scrapes them every 100 ms (4 s window), runs fn. */
async function withLoadedFleet(
  specs: Array<{ speed: number }>,
  extra: Record<string, unknown>,
  fn: (col: InferenceCollector, servers: Array<Awaited<ReturnType<typeof startInferenceServer>>>) => Promise<void>,
): Promise<void> {
  const all = await Promise.all(specs.map((sp, i) => startInferenceServer({ kind: 'vllm', concurrency: 1, dist: { kind: 'fixed', meanMs: 50 }, speed: sp.speed, seed: i + 1 })));
  const col = new InferenceCollector(
    { scrapeIntervalMs: 100, windowS: 4, ...extra, services: [{ name: 'llm', kind: 'vllm', instances: { static: all.map((s) => s.addr) } }] },
    { registry: new Registry() },
  );
  let load = true;
  const loops = all.map(async (s) => {
    while (load) await hit(`${s.url}/v1/completions`);
  });
  try {
    await col.start();
    await fn(col, all);
  } finally {
    load = false;
    await Promise.all(loops.map((l) => l.catch(() => undefined)));
    await col.stop();
    await Promise.all(all.map((s) => s.stop()));
  }
}

test('collector end to end: two simulated vLLM servers healthy with live estimates, a dead one unhealthy/unreachable', async () => {
  const a = await startInferenceServer({ kind: 'vllm', concurrency: 2, dist: { kind: 'fixed', meanMs: 30 }, seed: 1 });
  const b = await startInferenceServer({ kind: 'vllm', concurrency: 2, dist: { kind: 'fixed', meanMs: 30 }, seed: 2 });
  const dead = `127.0.0.1:${await deadPort()}`;
  const registry = new Registry();
  const col = new InferenceCollector(
    { scrapeIntervalMs: 100, scrapeTimeoutMs: 500, windowS: 2, services: [{ name: 'llm', kind: 'vllm', concurrency: 2, instances: { static: [a.addr, b.addr, dead] } }] },
    { registry },
  );
  const errors: Array<{ addr: string; reason: string; message: string }> = [];
  col.on('scrapeError', (e) => errors.push(e));
  let changes = 0;
  col.on('change', () => changes++);
  let load = true;
  const loadLoop = (async () => {
    while (load) await Promise.all([hit(`${a.url}/v1/completions`), hit(`${b.url}/v1/completions`)]);
  })();
  try {
    await col.start();
    const recs = await until('A and B healthy with completions, dead unhealthy', () => {
      const r = col.snapshot();
      const ok = r.filter((x) => x.healthy && x.lambdaPerS > 0 && Number.isFinite(x.esMs));
      const d = r.find((x) => x.addr === dead);
      return ok.length === 2 && d && !d.healthy ? r : undefined;
    });
    assert.equal(recs.length, 3);
    const d = recs.find((x) => x.addr === dead) as InstanceRecord;
    assert.equal(d.reason, 'unreachable');
    assert.equal(d.dataAgeMs, 0xffffffff);
    for (const r of recs.filter((x) => x.addr !== dead)) {
      assert.equal(r.service, 'llm');
      assert.equal(r.peer, '');
      assert.equal(r.reason, 'ok');
      // 30 ms of service measured with real timers (late under CPU contention, never early)
      assert.ok(r.esMs >= 29 && r.esMs < 150, `E[S] ${r.esMs}`);
      // one request at a time on 2 slots: rho = λ·E[S]/2 <= 1/2 (+ scrape-interval noise)
      assert.ok(r.rho > 0 && r.rho < 0.8, `rho ${r.rho}`);
      assert.ok(r.dataAgeMs < 1000);
      assert.equal(r.slots, 2);
    }
    assert.ok(errors.some((e) => e.addr === dead && e.reason === 'unreachable' && e.message.includes(`llm/${dead}`)));
    assert.ok(changes > 0);
    const text = await registry.metrics();
    assert.match(text, /switchyard_inference_scrapes_total\{service="llm",result="unreachable"\} [1-9]/);
    assert.match(text, /switchyard_inference_scrapes_total\{service="llm",result="ok"\} [1-9]/);
    assert.match(text, new RegExp(`switchyard_inference_healthy\\{service="llm",instance="${dead}"\\} 0`));
    assert.match(text, /switchyard_inference_rho\{service="llm",instance="127.0.0.1:\d+"\} 0\.\d+/);
    // the records survive the codec
    const payload = encodeInstancesSection(recs);
    assert.equal(payload.length, instancesSectionSize(recs));
    assert.equal(payload.readUInt16LE(0), 3);
    const back = decodeInstancesSection(payload);
    assert.deepEqual(
      back.map((x) => [x.addr, x.healthy, x.reason]),
      recs.map((x) => [x.addr, x.healthy, x.reason]),
    );
    assert.equal(back[0].esMs, Math.fround(recs[0].esMs));
  } finally {
    load = false;
    await loadLoop.catch(() => undefined);
    await col.stop();
    await a.stop();
    await b.stop();
  }
});

test('collector: service-wide P99 baseline de-weights the instance that is much slower than its peers', async () => {
  // timer lateness under CPU contention is additive: a wide gap (50 ms vs 1.5 s) keeps the test robust
  await withLoadedFleet([FAST, FAST, SLOW], { baselineScope: 'service' }, async (col, [f1, f2, slow]) => {
    const det = await until('slow instance scored below 0.5', () => {
      const d = col.details();
      const sd = d.find((x) => x.addr === slow.addr);
      return sd && sd.healthScore < 0.5 && d.every((x) => x.healthy) ? d : undefined;
    }, 15000);
    for (const f of [f1, f2]) {
      const fd = det.find((x) => x.addr === f.addr)!;
      assert.equal(fd.healthScore, 1);
      assert.ok(fd.p99Ms <= 250, `fast p99 ${fd.p99Ms}`); // 60 ms bucket top, more if timers run late
    }
    const sd = det.find((x) => x.addr === slow.addr)!;
    assert.ok(sd.p99Ms > 1000, `slow p99 ${sd.p99Ms}`);
    // one baseline for the service, close to the fast instances' P99
    assert.ok(det.every((x) => x.baselineP99Ms === det[0].baselineP99Ms));
    assert.ok(det[0].baselineP99Ms <= 250, `baseline ${det[0].baselineP99Ms}`);
  });
});

test('collector: default per-instance baseline -- a peer that is slower by design keeps full weight (its speed is priced by E[S])', async () => {
  await withLoadedFleet([FAST, SLOW], {}, async (col, [fast, slow]) => {
    // both have P99 data and a baseline of their own
    const det = await until('P99 and baseline for both', () => {
      const d = col.details();
      return d.length === 2 && d.every((x) => x.healthy && x.p99Ms > 0 && x.baselineP99Ms > 0) && d.find((x) => x.addr === slow.addr)!.p99Ms > 1000 ? d : undefined;
    }, 15000);
    const sd = det.find((x) => x.addr === slow.addr)!;
    const fd = det.find((x) => x.addr === fast.addr)!;
    assert.ok(sd.baselineP99Ms > 1000 && fd.baselineP99Ms <= 250, `baselines slow ${sd.baselineP99Ms} fast ${fd.baselineP99Ms}`);
    assert.equal(sd.healthScore, 1);
    assert.equal(fd.healthScore, 1);
  });
});

test('collector: malformed exposition -> parse_error naming the instance and line, last good values kept; HTTP 500 -> http_error; stale', async () => {
  const good = fs.readFileSync(path.join(__dirname, 'fixtures', 'vllm.txt'), 'utf8');
  let mode: 'good' | 'bad' | '500' = 'good';
  const srv = http.createServer((req, res) => {
    if (mode === '500') {
      res.writeHead(500).end('engine dead');
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end(mode === 'good' ? good : good.replace('vllm:num_requests_waiting{engine="0"', 'vllm:num_requests_waiting{engine="0'));
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const addr = `127.0.0.1:${(srv.address() as AddressInfo).port}`;
  const registry = new Registry();
  const col = new InferenceCollector({ scrapeIntervalMs: 600_000, scrapeTimeoutMs: 1000, staleAfterMs: 5000, services: [{ name: 'm', kind: 'vllm', instances: { static: [addr] } }] }, { registry });
  const errors: string[] = [];
  col.on('scrapeError', (e: { message: string }) => errors.push(e.message));
  try {
    await col.start();
    await col.scrapeAll();
    assert.equal(col.snapshot()[0].reason, 'no_data', 'one scrape gives no interval yet');
    await col.scrapeAll();
    let r = col.snapshot()[0];
    assert.equal(r.reason, 'ok');
    assert.equal(r.queueDepth, 5); // waiting 2 + running 3
    assert.equal(r.slots, 3); // inferred: 3 running while 2 waited

    mode = 'bad';
    await col.scrapeAll();
    r = col.snapshot()[0];
    assert.equal(r.healthy, false);
    assert.equal(r.reason, 'parse_error');
    assert.equal(r.queueDepth, 5, 'last good values kept');
    assert.match(errors[0], new RegExp(`inference instance m/${addr.replace(/\./g, '\\.')}: malformed exposition: line \\d+: `));
    assert.match(await registry.metrics(), /switchyard_inference_scrapes_total\{service="m",result="parse_error"\} 1/);

    mode = '500';
    await col.scrapeAll();
    r = col.snapshot()[0];
    assert.equal(r.reason, 'http_error');
    assert.match(errors[1], /HTTP 500: engine dead/);

    mode = 'good';
    await col.scrapeAll();
    r = col.snapshot()[0];
    assert.equal(r.reason, 'ok');
    assert.equal(col.snapshot(Date.now() + 10_000)[0].reason, 'stale');
    const det = col.details()[0];
    assert.equal(det.scrapesFailed, 2);
    assert.equal(det.healthScore, 1);
  } finally {
    await col.stop();
    await new Promise<void>((r) => srv.close(() => r()));
  }
});

test('collector with DNS discovery: instances follow the resolver', async () => {
  const s1 = await startInferenceServer({ kind: 'vllm', concurrency: 1, seed: 5 });
  const ips: string[] = ['127.0.0.1'];
  const resolver: DnsResolver = {
    resolve4: async () => ips.slice(),
    resolve6: async () => {
      throw Object.assign(new Error('ENODATA'), { code: 'ENODATA' });
    },
  };
  const col = new InferenceCollector(
    { scrapeIntervalMs: 100, services: [{ name: 'llm', kind: 'vllm', instances: { dns: { name: 'llm-headless.ns.svc.cluster.local', port: s1.port, resolveIntervalMs: 3_600_000 } } }] },
    { registry: new Registry(), resolver },
  );
  try {
    await col.start();
    assert.deepEqual(col.snapshot().map((r) => r.addr), [s1.addr]);
    await until('healthy via DNS', () => col.snapshot()[0]?.healthy);
    ips.length = 0;
    await col.refreshDiscovery();
    assert.deepEqual(col.snapshot(), []);
  } finally {
    await col.stop();
    await s1.stop();
  }
});

test('config schema: defaults filled, errors name the field', () => {
  const c = resolveInferenceConfig({ services: [{ name: 'llm', kind: 'vllm', instances: { static: ['10.0.0.1:8000'] } }] });
  assert.equal(c.scrapeIntervalMs, 1000);
  assert.equal(c.windowS, 10);
  assert.equal(c.baselineWindowS, 300);
  assert.equal(c.baselineScope, 'instance');
  assert.equal(c.minMomentCompletions, 50);
  assert.equal(c.services[0].metricsPath, '/metrics');
  assert.equal(c.services[0].peer, '');
  assert.equal(c.services[0].scheme, 'http');
  const bad = (v: unknown, re: RegExp): void =>
    assert.throws(() => resolveInferenceConfig(v), (e: unknown) => e instanceof InferenceConfigError && re.test(e.message), String(re));
  bad({ scrapeIntervalMs: 10 }, /inference\.scrapeIntervalMs: must be >= 50/);
  bad({ services: [{ name: 'x', kind: 'dcgm', instances: { static: [] } }] }, /inference\.services\[0\]\.kind/);
  bad({ services: [{ name: 'x', kind: 'vllm' }] }, /inference\.services\[0\]\.instances: required/);
  bad({ services: [{ name: 'x', kind: 'vllm', instances: { static: ['host:80'] } }] }, /instances\.static\[0\]: must match pattern/);
  bad({ services: [{ name: 'x', kind: 'vllm', instances: { static: ['1.2.3.4:80'] }, colour: 1 }] }, /inference\.services\[0\]\.colour: unknown field/);
  bad({ services: [{ name: 'x', kind: 'vllm', instances: { static: ['1.2.3.4:99999'] } }] }, /static\[0\]: port out of range/);
  bad(
    {
      services: [
        { name: 'x', kind: 'vllm', instances: { static: ['1.2.3.4:80'] } },
        { name: 'x', kind: 'tgi', instances: { static: ['1.2.3.5:80'] } },
      ],
    },
    /services\[1\]\.name: duplicate service "x"/,
  );
  assert.equal((inferenceSchema as { additionalProperties: boolean }).additionalProperties, false);
});

test('INSTANCES payload size: 4 + Σ(50 + strings) bytes', () => {
  const rec: InstanceRecord = {
    service: 'llm',
    addr: '10.0.0.1:8000',
    peer: 'cloud-b',
    healthy: true,
    reason: 'ok',
    rho: 0.5,
    esMs: 80,
    es2Ms2: 12800,
    lambdaPerS: 6.25,
    queueDepth: 2,
    p50Ms: 60,
    p99Ms: 400,
    baselineP99Ms: 380,
    gpuUtil: NaN,
    dataAgeMs: 120,
    slots: 4,
  };
  const buf = encodeInstancesSection([rec, { ...rec, addr: '10.0.0.2:8000', healthy: false, reason: 'stale' }]);
  assert.equal(buf.length, 4 + 2 * (INSTANCE_FIXED_BYTES + 3 + 13 + 7));
  const back = decodeInstancesSection(buf);
  assert.equal(back[1].reason, 'stale');
  assert.equal(back[1].healthy, false);
  assert.ok(Number.isNaN(back[0].gpuUtil));
  assert.equal(back[0].slots, 4);
});

test('collector (virtual clock): an instance 10x slower for 30 s, then priced out, is published back near its peers within bounded time', async () => {
  // two vLLM pages whose cumulative counters the test drives; scrapes at a virtual 1 s cadence
  const state = [
    { n: 0, sum: 0 },
    { n: 0, sum: 0 },
  ];
  const page = (i: number): string =>
    [
      '# TYPE vllm:num_requests_running gauge', 'vllm:num_requests_running 1',
      '# TYPE vllm:num_requests_waiting gauge', 'vllm:num_requests_waiting 0',
      '# TYPE vllm:e2e_request_latency_seconds histogram',
      `vllm:e2e_request_latency_seconds_bucket{le="0.05"} ${i === 0 ? state[0].n : 0}`,
      `vllm:e2e_request_latency_seconds_bucket{le="+Inf"} ${state[i].n}`,
      `vllm:e2e_request_latency_seconds_count ${state[i].n}`,
      `vllm:e2e_request_latency_seconds_sum ${state[i].sum}`,
      '',
    ].join('\n');
  const servers = await Promise.all(
    [0, 1].map(async (i) => {
      const s = http.createServer((_q, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end(page(i)));
      await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
      return s;
    }),
  );
  const addrs = servers.map((s) => `127.0.0.1:${(s.address() as AddressInfo).port}`);
  let now = 1_000_000;
  const col = new InferenceCollector(
    { scrapeIntervalMs: 600_000, scrapeTimeoutMs: 5000, staleAfterMs: 3_600_000, services: [{ name: 'llm', kind: 'vllm', concurrency: 4, instances: { static: addrs } }] },
    { registry: new Registry(), now: () => now },
  );
  const es = (i: number): number => col.snapshot().find((r) => r.addr === addrs[i])!.esMs;
  try {
    await col.start();
    for (let t = 0; t <= 120; t++) {
      state[0].n += 10; // the peer: 10 ms requests, 10 per second, throughout
      state[0].sum += 0.1;
      if (t >= 1 && t <= 30) {
        state[1].n += 5; // the sick one: 100 ms requests for 30 s ...
        state[1].sum += 0.5;
      } // ... then nothing: priced out
      await col.scrapeAll();
      if (t === 30) assert.ok(Math.abs(es(1) - 100) < 1, `during the episode: ${es(1)}`);
      now += 1000;
    }
    assert.ok(Math.abs(es(0) - 10) < 0.01, `peer ${es(0)} ${JSON.stringify(col.details()[0], (k, v) => (k === "estimator" ? undefined : v))}`);
    // window 10 s: empties at 40 s; after 80 s more (8 τ) it is at the peers' median
    assert.ok(es(1) < 11, `published E[S] of the recovered instance ${es(1)} (peer ${es(0)})`);
  } finally {
    await col.stop();
    for (const s of servers) await new Promise<void>((r) => s.close(() => r()));
  }
});

test('collector: switchyard_inference_instances counts every fleet of a service name (local and per peer), not the last discovered', async () => {
  const registry = new Registry();
  const [a, b, c] = [await deadPort(), await deadPort(), await deadPort()];
  const col = new InferenceCollector(
    {
      scrapeIntervalMs: 600_000,
      services: [
        { name: 'llm', kind: 'vllm', instances: { static: [`127.0.0.1:${a}`, `127.0.0.1:${b}`] } },
        { name: 'llm', kind: 'vllm', peer: 'cloud-b', instances: { static: [`127.0.0.1:${c}`] } },
      ],
    },
    { registry },
  );
  try {
    await col.start();
    const g = (await registry.getSingleMetric('switchyard_inference_instances')!.get()).values;
    assert.deepEqual(g.map((v) => [v.labels.service, v.value]), [['llm', 3]]);
  } finally {
    await col.stop();
  }
});
