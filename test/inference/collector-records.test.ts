// What the collector publishes per instance, fast: buildInstanceRecord (reason, imputation, slots,
// data age), the medians behind imputation, and a virtual-clock collector over local pages
// (imputation by service name across peers, the per-instance gauges, removal by discovery).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Registry } from 'prom-client';
import { buildInstanceRecord, imputeFrom, InferenceCollector, priorFrom, type RecordInputs } from '../../agent/src/inference/collector';
import type { DnsResolver } from '../../agent/src/inference/discovery';
import { InstanceEstimator, type EstimatorState } from '../../agent/src/inference/estimator';
import { encodeInstancesSection, INSTANCE_FIXED_BYTES, instancesSectionSize } from '../../agent/src/inference/encode';

/** an estimator state with E[S] = es (and E[S²] = 2·es²), ρ 0.5 and `completions` in the window */
function state(es: number, completions = 10, extra: Partial<EstimatorState> = {}): EstimatorState {
  return { ...new InstanceEstimator().state(), esMs: es, es2Ms2: 2 * es * es, rho: 0.5, windowCompletions: completions, ...extra };
}

const base = (x: Partial<RecordInputs>): RecordInputs => ({
  service: 'llm',
  addr: '10.0.0.1:8000',
  peer: '',
  reason: 'ok',
  state: state(20),
  imputed: () => ({ es: NaN, es2: NaN }),
  baselineMs: NaN,
  lastOkAt: 1000,
  now: 1000,
  concurrency: undefined,
  ...x,
});

test('buildInstanceRecord: reason from the estimator (broken data, no ρ); an ok state is healthy', () => {
  assert.deepEqual([buildInstanceRecord(base({})).record.healthy, buildInstanceRecord(base({})).record.reason], [true, 'ok']);
  const invalid = buildInstanceRecord(base({ state: state(20, 10, { invalid: 'waiting is -1' }) })).record;
  assert.deepEqual([invalid.healthy, invalid.reason], [false, 'parse_error']);
  const noRho = buildInstanceRecord(base({ state: state(20, 10, { rho: NaN }) })).record;
  assert.deepEqual([noRho.healthy, noRho.reason], [false, 'no_data']);
  const noState = buildInstanceRecord(base({ state: undefined })).record;
  assert.deepEqual([noState.healthy, noState.reason, noState.lambdaPerS], [false, 'no_data', 0]);
  assert.ok(Number.isNaN(noState.rho) && Number.isNaN(noState.queueDepth) && Number.isNaN(noState.p99Ms) && Number.isNaN(noState.gpuUtil));
  // a scrape-side reason is kept as it is, whatever the estimator says
  const stale = buildInstanceRecord(base({ reason: 'stale', state: state(20, 10, { invalid: 'x', rho: NaN }) })).record;
  assert.deepEqual([stale.healthy, stale.reason], [false, 'stale']);
});

test('buildInstanceRecord: E[S] measured, else the service median, else the prior, else unknown', () => {
  let r = buildInstanceRecord(base({ imputed: () => ({ es: 5, es2: 50 }), prior: () => ({ es: 1000, es2: 2e6 }) }));
  assert.deepEqual([r.record.esMs, r.record.es2Ms2, r.record.esSource, r.imputedService], [20, 800, 'measured', false]);
  r = buildInstanceRecord(base({ state: state(NaN), imputed: () => ({ es: 5, es2: 50 }), prior: () => ({ es: 1000, es2: 2e6 }) }));
  assert.deepEqual([r.record.esMs, r.record.es2Ms2, r.record.esSource, r.imputedService], [5, 50, 'service-median', true]);
  r = buildInstanceRecord(base({ state: state(NaN), prior: () => ({ es: 1000, es2: 2e6 }) }));
  assert.deepEqual([r.record.esMs, r.record.es2Ms2, r.record.esSource, r.imputedService], [1000, 2e6, 'prior', false]);
  r = buildInstanceRecord(base({ state: undefined }));
  assert.ok(Number.isNaN(r.record.esMs) && Number.isNaN(r.record.es2Ms2));
  assert.equal(r.imputedService, false);
});

test('buildInstanceRecord: data age rounded and clamped to u32 (never scraped = 0xffffffff); slots at least 1', () => {
  const age = (lastOkAt: number | undefined, now: number): number => buildInstanceRecord(base({ lastOkAt, now })).record.dataAgeMs;
  assert.equal(age(undefined, 5), 0xffffffff);
  assert.equal(age(1000, 1250.6), 251);
  assert.equal(age(1000, 900), 0, 'a clock step back is age 0');
  assert.equal(age(0, 1e12), 0xffffffff);
  const slots = (st: EstimatorState | undefined, concurrency?: number): [number, string] => {
    const r = buildInstanceRecord(base({ state: st, concurrency })).record;
    return [r.slots as number, r.slotsSource as string];
  };
  assert.deepEqual(slots(state(20, 10, { concurrency: 6, slotsSource: 'exporter' })), [6, 'exporter']);
  assert.deepEqual(slots(state(20, 10, { concurrency: 0 })), [1, 'inferred']);
  assert.deepEqual(slots(undefined, 4), [4, 'configured']);
  assert.deepEqual(slots(undefined), [1, 'inferred']);
  const r = buildInstanceRecord(base({ peer: 'cloud-b', baselineMs: 120 })).record;
  assert.deepEqual([r.service, r.addr, r.peer, r.baselineP99Ms], ['llm', '10.0.0.1:8000', 'cloud-b', 120]);
});

test('imputeFrom / priorFrom: medians over the instances that have E[S]; the prior only over instances with completions in the window', () => {
  assert.deepEqual(imputeFrom([state(10), undefined, state(NaN), state(30)]), { es: 20, es2: (200 + 1800) / 2 });
  assert.deepEqual(imputeFrom([state(10), state(40), state(30)]), { es: 30, es2: 1800 });
  const none = imputeFrom([undefined, state(NaN)]);
  assert.ok(Number.isNaN(none.es) && Number.isNaN(none.es2));
  assert.deepEqual(priorFrom([state(10, 0), state(30, 5), undefined]), { es: 30, es2: 1800 });
  assert.ok(Number.isNaN(priorFrom([state(10, 0)]).es));
});

/** a vLLM-style page whose counters the test drives */
interface Page { running?: number; waiting?: number; n: number; sumS: number }
function render(p: Page): string {
  return [
    ...(p.running === undefined ? [] : ['# TYPE vllm:num_requests_running gauge', `vllm:num_requests_running ${p.running}`]),
    ...(p.waiting === undefined ? [] : ['# TYPE vllm:num_requests_waiting gauge', `vllm:num_requests_waiting ${p.waiting}`]),
    '# TYPE vllm:e2e_request_latency_seconds histogram',
    `vllm:e2e_request_latency_seconds_bucket{le="1"} ${p.n}`,
    `vllm:e2e_request_latency_seconds_bucket{le="+Inf"} ${p.n}`,
    `vllm:e2e_request_latency_seconds_count ${p.n}`,
    `vllm:e2e_request_latency_seconds_sum ${p.sumS}`,
    '',
  ].join('\n');
}
async function pageServer(p: Page): Promise<{ addr: string; close: () => Promise<void> }> {
  const s = http.createServer((_q, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end(render(p)));
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  return {
    addr: `127.0.0.1:${(s.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((r) => {
        s.closeAllConnections();
        s.close(() => r());
      }),
  };
}

test('collector: an idle instance gets the median E[S] of its service name over every peer, never of another service', async () => {
  const pages: Page[] = [
    { running: 2, waiting: 1, n: 0, sumS: 0 }, // llm (local): 10 ms requests
    { running: 0, waiting: 0, n: 0, sumS: 0 }, // llm (cloud-b): 30 ms requests
    { n: 0, sumS: 0 }, // other: 1 s requests, no queue gauges
    { running: 0, waiting: 0, n: 0, sumS: 0 }, // llm (local): idle
  ];
  const servers = await Promise.all(pages.map(pageServer));
  const [a, b, c, d] = servers.map((s) => s.addr);
  let now = 1_000_000;
  const registry = new Registry();
  const common = { kind: 'vllm', llm: false, fetchModels: false, concurrency: 4 };
  const col = new InferenceCollector(
    {
      scrapeIntervalMs: 600_000,
      staleAfterMs: 3_600_000,
      services: [
        { ...common, name: 'llm', instances: { static: [a, d] } },
        { ...common, name: 'llm', peer: 'cloud-b', instances: { static: [b] } },
        { ...common, name: 'other', instances: { static: [c] } },
      ],
    },
    { registry, now: () => now },
  );
  try {
    await col.start();
    await new Promise((r) => setTimeout(r, 200)); // the first scrapes the start schedules
    for (let t = 0; t < 3; t++) {
      pages[0].n += 10;
      pages[0].sumS += 0.1;
      pages[1].n += 10;
      pages[1].sumS += 0.3;
      pages[2].n += 1;
      pages[2].sumS += 1;
      now += 1000;
      await col.scrapeAll();
    }
    const rec = (addr: string, peer = ''): ReturnType<InferenceCollector['snapshot']>[number] => col.snapshot().find((r) => r.addr === addr && r.peer === peer)!;
    assert.ok(Math.abs(rec(a).esMs - 10) < 1e-6, `a ${rec(a).esMs}`);
    assert.ok(Math.abs(rec(b, 'cloud-b').esMs - 30) < 1e-6, `b ${rec(b, 'cloud-b').esMs}`);
    assert.ok(Math.abs(rec(c).esMs - 1000) < 1e-6, `c ${rec(c).esMs}`);
    const idle = rec(d);
    assert.ok(Math.abs(idle.esMs - 20) < 1e-6, `idle instance imputed ${idle.esMs} (want the median of 10 and 30)`);
    assert.equal(idle.esSource, 'service-median');
    assert.equal(col.details().find((x) => x.addr === d)?.imputedService, true);

    const text = await registry.metrics();
    const esc = (s: string): string => s.replace(/[.]/g, '\\.');
    assert.match(text, new RegExp(`switchyard_inference_queue_depth\\{service="llm",instance="${esc(a)}"\\} 3\\n`));
    // no queue gauges exported: queue unknown, Little's law λ·E[S] = 1/s × 1 s stands in (never NaN)
    assert.match(text, new RegExp(`switchyard_inference_queue_depth\\{service="other",instance="${esc(c)}"\\} 1\\n`));
    assert.equal(rec(c).healthy, true);
    assert.equal(col.details().find((x) => x.addr === c)?.estimator?.queueSource, 'little');
    assert.match(text, new RegExp(`switchyard_inference_p99_seconds\\{service="other",instance="${esc(c)}"\\} 0\\.(99|98999+\\d*)\\n`)); // 99th of the (0, 1 s] bucket, in s
    assert.match(text, new RegExp(`switchyard_inference_arrival_rate\\{service="llm",instance="${esc(a)}"\\} \\d`));
    assert.match(text, new RegExp(`switchyard_inference_healthy\\{service="llm",instance="${esc(d)}"\\} 1\\n`));
    assert.match(text, /switchyard_inference_instances\{service="other"\} 1\n/);
    assert.match(text, /switchyard_inference_scrapes_total\{service="other",result="ok"\} [1-9]/);
    assert.match(text, /switchyard_inference_scrapes_total\{service="other",result="no_data"\} 0\n/);
  } finally {
    await col.stop();
    await Promise.all(servers.map((s) => s.close()));
  }
});

test('collector: an instance DNS no longer lists is dropped from the records and its gauges', async () => {
  const page: Page = { running: 1, waiting: 0, n: 0, sumS: 0 };
  const servers = await Promise.all([pageServer(page), pageServer(page)]);
  const ips = new Map(servers.map((s) => [s.addr, s.addr.split(':')[0]]));
  assert.equal(new Set(ips.values()).size, 1);
  // both servers listen on 127.0.0.1: DNS answers one address per port, so one service per port
  const port = (s: { addr: string }): number => Number(s.addr.split(':')[1]);
  let answer = ['127.0.0.1'];
  const resolver: DnsResolver = { resolve4: async () => answer.slice(), resolve6: async () => [] };
  let now = 5_000_000;
  const registry = new Registry();
  const col = new InferenceCollector(
    {
      scrapeIntervalMs: 600_000,
      services: servers.map((s, i) => ({ name: `s${i}`, kind: 'vllm', llm: false, fetchModels: false, instances: { dns: { name: 'x', port: port(s), resolveIntervalMs: 3_600_000 } } })),
    },
    { registry, now: () => now, resolver },
  );
  try {
    await col.start();
    assert.deepEqual(col.snapshot().map((r) => r.addr), servers.map((s) => s.addr));
    for (let t = 0; t < 2; t++) {
      page.n += 5;
      page.sumS += 0.5;
      now += 1000;
      await col.scrapeAll();
    }
    assert.match(await registry.metrics(), /switchyard_inference_healthy\{service="s0"/);
    answer = [];
    await col.refreshDiscovery();
    assert.deepEqual(col.snapshot(), []);
    const text = await registry.metrics();
    for (const g of ['healthy', 'rho', 'queue_depth', 'arrival_rate']) assert.doesNotMatch(text, new RegExp(`switchyard_inference_${g}\\{service="s0"`), g);
    assert.match(text, /switchyard_inference_instances\{service="s0"\} 0\n/);
    assert.match(text, /switchyard_inference_dns_resolutions_total\{service="s0",result="ok"\} 2\n/);
  } finally {
    await col.stop();
    await Promise.all(servers.map((s) => s.close()));
  }
});

test('instancesSectionSize is the encoded size: multi-byte strings, a peer, an empty peer, a record without peer (JS caller)', () => {
  const rec = buildInstanceRecord(base({ peer: 'cloud-b' })).record;
  const records = [rec, { ...rec, service: 'modèle-ü', peer: '' }, { ...rec, addr: '[fd00::1]:8000', peer: undefined as unknown as string }];
  for (const rs of [[], [rec], records]) assert.equal(instancesSectionSize(rs), encodeInstancesSection(rs).length, `${rs.length} records`);
  assert.equal(instancesSectionSize([rec]), 4 + INSTANCE_FIXED_BYTES + 3 + 13 + 7);
});

test('collector: a failing /v1/models fetch is logged once per outage (with service and instance), counted every time', async () => {
  const srv = await pageServer({ running: 0, waiting: 0, n: 0, sumS: 0 }); // answers /v1/models with a metrics page: not JSON
  const warns: Array<{ obj: unknown; msg?: string }> = [];
  const registry = new Registry();
  const col = new InferenceCollector(
    { scrapeIntervalMs: 600_000, modelsIntervalMs: 3_600_000, services: [{ name: 'llm', kind: 'vllm', instances: { static: [srv.addr] } }] },
    { registry, logger: { warn: (obj, msg) => void warns.push({ obj, msg }) } },
  );
  const errors = async (): Promise<number> => (await registry.getSingleMetric('switchyard_inference_models_fetches_total')!.get()).values.find((v) => v.labels.result === 'error')?.value ?? 0;
  try {
    await col.start();
    for (let i = 0; i < 200 && (await errors()) < 1; i++) await new Promise((r) => setTimeout(r, 10));
    const inst = (col as unknown as { services: Array<{ instances: Map<string, unknown> }> }).services[0].instances.get(srv.addr);
    await (col as unknown as { refreshModels(i: unknown): Promise<void> }).refreshModels(inst);
    await (col as unknown as { refreshModels(i: unknown): Promise<void> }).refreshModels(inst);
    assert.equal(await errors(), 3);
    const modelWarns = warns.filter((w) => /\/v1\/models/.test(w.msg ?? ''));
    assert.equal(modelWarns.length, 1, JSON.stringify(warns));
    assert.deepEqual(modelWarns[0].obj, { service: 'llm', instance: srv.addr });
    assert.match(modelWarns[0].msg ?? '', new RegExp(`^inference instance llm/${srv.addr.replace(/\./g, '\\.')}: /v1/models: not JSON`));
    assert.match(col.details()[0].llm?.modelsError ?? '', /not JSON/);
  } finally {
    await col.stop();
    await srv.close();
  }
});

test('collector: one scrape of an instance at a time (a scrape still running is not started again)', async () => {
  let requests = 0;
  const page: Page = { running: 0, waiting: 0, n: 0, sumS: 0 };
  const s = http.createServer((_q, res) => {
    requests++;
    setTimeout(() => res.writeHead(200, { 'content-type': 'text/plain' }).end(render(page)), 30);
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const addr = `127.0.0.1:${(s.address() as AddressInfo).port}`;
  const col = new InferenceCollector({ scrapeIntervalMs: 600_000, services: [{ name: 'llm', kind: 'vllm', llm: false, fetchModels: false, instances: { static: [addr] } }] }, { registry: new Registry() });
  try {
    await col.start();
    await new Promise((r) => setTimeout(r, 250)); // the first scrape the start schedules
    assert.equal(requests, 1);
    await Promise.all([col.scrapeAll(), col.scrapeAll(), col.scrapeAll()]);
    assert.equal(requests, 2);
    assert.equal(col.details()[0].scrapesOk, 2);
  } finally {
    await col.stop();
    s.closeAllConnections();
    await new Promise<void>((r) => s.close(() => r()));
  }
});

test("queue unknown: Little's law with the imputed E[S], raised to the service's largest known queue (never cheaper than known)", () => {
  const base = { service: 's', addr: '10.0.0.1:80', peer: '', reason: 'ok' as const, baselineMs: NaN, lastOkAt: 0, now: 0, concurrency: 4,
    imputed: () => ({ es: 500, es2: 500000 }) };
  const st = (over: Partial<EstimatorState>): EstimatorState => ({ lambdaPerS: 4, departuresPerS: 4, esMs: 250, es2Ms2: 125000, es2Method: 'assumed-scv', es2ErrBoundMs2: NaN,
    p50Ms: NaN, p99Ms: NaN, rho: 0.25, rhoLoad: 0.25, rhoOcc: NaN, gpuUtil: NaN, concurrency: 4, concurrencySource: 'configured', slotsSource: 'configured',
    queueDepth: 1, queueSource: 'little', waiting: NaN, running: NaN, kvCacheUsage: NaN, slotsFloor: false, queueGrowing: false, windowCompletions: 40, windowCoveredMs: 10000, counterResets: 0, baselineP99Ms: NaN, lastObservedAt: 0, ...over });
  // alone in its service: its own Little estimate
  assert.equal(buildInstanceRecord({ ...base, state: st({}), knownQueueMax: () => NaN }).record.queueDepth, 1);
  // a peer reads 6 from its gauges: unknown is priced at least as busy
  const r = buildInstanceRecord({ ...base, state: st({}), knownQueueMax: () => 6 }).record;
  assert.equal(r.queueDepth, 6);
  assert.equal(r.healthy, true);
  // no E[S] of its own yet: the imputed one (λ 4/s x 500 ms = 2), never NaN
  assert.equal(buildInstanceRecord({ ...base, state: st({ esMs: NaN, queueDepth: NaN }), knownQueueMax: () => NaN }).record.queueDepth, 2);
  // gauges read: published as read, whatever the others
  assert.equal(buildInstanceRecord({ ...base, state: st({ queueSource: 'gauges', queueDepth: 0 }), knownQueueMax: () => 6 }).record.queueDepth, 0);
});
