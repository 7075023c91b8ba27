// The `inference` config key: every shipped default, every numeric bound (the last accepted value
// and the first refused one, named in the error), the enums, the mapping refs and the checks ajv
// cannot express.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { InferenceConfigError, resolveInferenceConfig } from '../../agent/src/inference/schema';

const SVC = { name: 'llm', kind: 'vllm', instances: { static: ['10.0.0.1:8000'] } };
const refused = (raw: unknown, re: RegExp): void =>
  assert.throws(() => resolveInferenceConfig(raw), (e: unknown) => e instanceof InferenceConfigError && re.test(e.message), `${JSON.stringify(raw)} ${re}`);

test('shipped defaults of every top-level field', () => {
  const c = resolveInferenceConfig({});
  assert.deepEqual(c, {
    scrapeIntervalMs: 1000,
    scrapeTimeoutMs: 800,
    windowS: 10,
    minMomentCompletions: 50,
    baselineWindowS: 300,
    baselineScope: 'instance',
    baselineTrim: 0.1,
    assumedScv: 1,
    rhoCombine: 'max',
    staleAfterMs: 5000,
    failuresToUnhealthy: 1,
    maxBodyBytes: 8388608,
    modelsIntervalMs: 30000,
    modelsTimeoutMs: 2000,
    services: [],
  });
  assert.deepEqual(resolveInferenceConfig(undefined).services, []);
});

test('numeric bounds: the bounds are accepted, one step outside is refused naming the field', () => {
  const bounds: Array<[string, number, number, number]> = [
    // field, min, max, step outside
    ['scrapeIntervalMs', 50, 600000, 1],
    ['scrapeTimeoutMs', 10, 600000, 1],
    ['windowS', 1, 3600, 0.5],
    ['minMomentCompletions', 1, 100000, 1],
    ['baselineWindowS', 10, 86400, 0.5],
    ['baselineTrim', 0, 0.5, 0.01],
    ['assumedScv', 0, 1000, 0.01],
    ['staleAfterMs', 100, 3600000, 1],
    ['failuresToUnhealthy', 1, 100, 1],
    ['maxBodyBytes', 1024, 268435456, 1],
    ['modelsIntervalMs', 1000, 3600000, 1],
    ['modelsTimeoutMs', 10, 600000, 1],
  ];
  for (const [f, min, max, d] of bounds) {
    assert.equal((resolveInferenceConfig({ [f]: min }) as unknown as Record<string, number>)[f], min, `${f} = ${min}`);
    assert.equal((resolveInferenceConfig({ [f]: max }) as unknown as Record<string, number>)[f], max, `${f} = ${max}`);
    refused({ [f]: min - d }, new RegExp(`inference\\.${f}: must be >= ${min}`));
    refused({ [f]: max + d }, new RegExp(`inference\\.${f}: must be <= ${max}`));
  }
  for (const f of ['scrapeIntervalMs', 'scrapeTimeoutMs', 'minMomentCompletions', 'staleAfterMs', 'failuresToUnhealthy', 'maxBodyBytes', 'modelsIntervalMs', 'modelsTimeoutMs']) {
    refused({ [f]: 1000.5 }, new RegExp(`inference\\.${f}: must be integer`));
  }
});

test('enums: baselineScope, rhoCombine, kind, scheme, DNS family; unknown fields refused', () => {
  assert.equal(resolveInferenceConfig({ baselineScope: 'service' }).baselineScope, 'service');
  refused({ baselineScope: 'fleet' }, /inference\.baselineScope: must be equal to one of the allowed values/);
  for (const r of ['max', 'load', 'gpu']) assert.equal(resolveInferenceConfig({ rhoCombine: r }).rhoCombine, r);
  refused({ rhoCombine: 'min' }, /inference\.rhoCombine/);
  for (const kind of ['vllm', 'sglang', 'triton', 'tgi', 'custom']) assert.equal(resolveInferenceConfig({ services: [{ ...SVC, kind }] }).services[0].kind, kind);
  // a GPU-only exporter is not a kind (its instances could never be priced): paired through `gpu`
  refused({ services: [{ ...SVC, kind: 'dcgm' }] }, /inference\.services\[0\]\.kind: must be equal to one of the allowed values/);
  refused({ services: [{ ...SVC, scheme: 'ftp' }] }, /inference\.services\[0\]\.scheme/);
  refused({ colour: 1 }, /inference\.colour: unknown field/);
});

test('service defaults and bounds: peer, path, scheme, priorServiceMs, concurrency, models', () => {
  const s = resolveInferenceConfig({ services: [SVC] }).services[0];
  assert.deepEqual(s, { ...SVC, peer: '', metricsPath: '/metrics', scheme: 'http', priorServiceMs: 1000, modelsPath: '/v1/models' });
  const at = (extra: Record<string, unknown>): unknown => resolveInferenceConfig({ services: [{ ...SVC, ...extra }] }).services[0];
  assert.ok(at({ priorServiceMs: 0.001, concurrency: 1 }));
  assert.ok(at({ priorServiceMs: 3600000, concurrency: 100000 }));
  refused({ services: [{ ...SVC, priorServiceMs: 0 }] }, /services\[0\]\.priorServiceMs: must be >= 0\.001/);
  refused({ services: [{ ...SVC, priorServiceMs: 3600001 }] }, /services\[0\]\.priorServiceMs: must be <= 3600000/);
  refused({ services: [{ ...SVC, concurrency: 0 }] }, /services\[0\]\.concurrency: must be >= 1/);
  refused({ services: [{ ...SVC, concurrency: 100001 }] }, /services\[0\]\.concurrency: must be <= 100000/);
  refused({ services: [{ ...SVC, concurrency: 1.5 }] }, /services\[0\]\.concurrency: must be integer/);
  refused({ services: [{ ...SVC, metricsPath: 'metrics' }] }, /services\[0\]\.metricsPath: must match pattern/);
  refused({ services: [{ ...SVC, name: '-x' }] }, /services\[0\]\.name: must match pattern/);
  refused({ services: [{ ...SVC, peer: 'a b' }] }, /services\[0\]\.peer: must match pattern/);
  assert.equal((at({ peer: 'cloud-b' }) as { peer: string }).peer, 'cloud-b');
  refused({ services: [{ ...SVC, models: ['a', 'a'] }] }, /services\[0\]\.models: must NOT have duplicate items/);
  refused({ services: [{ ...SVC, models: [''] }] }, /services\[0\]\.models\[0\]: must NOT have fewer than 1 characters/);
  refused({ services: [{ ...SVC, models: ['x'.repeat(256)] }] }, /services\[0\]\.models\[0\]: must NOT have more than 255 characters/);
});

test('instances: exactly one of static / dns; DNS defaults and bounds', () => {
  refused({ services: [{ ...SVC, instances: {} }] }, /services\[0\]\.instances: must NOT have fewer than 1 properties/);
  refused({ services: [{ ...SVC, instances: { static: [], dns: { name: 'x', port: 1 } } }] }, /services\[0\]\.instances: must NOT have more than 1 properties/);
  const dns = (d: Record<string, unknown>): unknown => resolveInferenceConfig({ services: [{ ...SVC, instances: { dns: d } }] }).services[0].instances;
  assert.deepEqual(dns({ name: 'vllm.llm.svc', port: 8000 }), { dns: { name: 'vllm.llm.svc', port: 8000, resolveIntervalMs: 5000, family: 'any' } });
  assert.ok(dns({ name: 'x', port: 1, resolveIntervalMs: 100 }));
  assert.ok(dns({ name: 'x'.repeat(253), port: 65535, resolveIntervalMs: 3600000, family: 'ipv6' }));
  const bad = (d: Record<string, unknown>, re: RegExp): void => refused({ services: [{ ...SVC, instances: { dns: d } }] }, re);
  bad({ name: 'x', port: 1, resolveIntervalMs: 99 }, /instances\.dns\.resolveIntervalMs: must be >= 100/);
  bad({ name: 'x', port: 1, resolveIntervalMs: 3600001 }, /instances\.dns\.resolveIntervalMs: must be <= 3600000/);
  bad({ name: 'x', port: 0 }, /instances\.dns\.port: must be >= 1/);
  bad({ name: 'x', port: 65536 }, /instances\.dns\.port: must be <= 65535/);
  bad({ name: '', port: 1 }, /instances\.dns\.name: must NOT have fewer than 1 characters/);
  bad({ name: 'x'.repeat(254), port: 1 }, /instances\.dns\.name: must NOT have more than 253 characters/);
  bad({ name: 'x', port: 1, family: 'ipv5' }, /instances\.dns\.family/);
  bad({ port: 1 }, /instances\.dns\.name: required/);
  bad({ name: 'x', port: 1, ttl: 5 }, /instances\.dns\.ttl: unknown field/);
});

test('mappings: a name or a non-empty list of names; timed refs default to seconds and refuse other units; gpuUtil scale > 0', () => {
  const m = (mappings: Record<string, unknown>): Record<string, unknown> | undefined =>
    resolveInferenceConfig({ services: [{ ...SVC, kind: 'custom', mappings }] }).services[0].mappings as Record<string, unknown> | undefined;
  assert.deepEqual(m({ waiting: 'q', running: ['r1', 'r2'] }), { waiting: 'q', running: ['r1', 'r2'] });
  const bad = (mappings: Record<string, unknown>, re: RegExp): void => refused({ services: [{ ...SVC, kind: 'custom', mappings }] }, re);
  bad({ waiting: '' }, /mappings\.waiting/);
  bad({ waiting: [] }, /mappings\.waiting/);
  bad({ waiting: [''] }, /mappings\.waiting/);
  bad({ colour: 'x' }, /mappings\.colour: unknown field/);
  for (const f of ['serviceTimeSum', 'queueTimeSum', 'serviceHistogram', 'latencyHistogram', 'latencySummary']) {
    assert.deepEqual(m({ [f]: { name: 'x' } }), { [f]: { name: 'x', unit: 's' } }, f);
    for (const unit of ['ms', 'us', 'ns']) assert.deepEqual(m({ [f]: { name: 'x', unit } }), { [f]: { name: 'x', unit } });
    bad({ [f]: { name: 'x', unit: 'min' } }, new RegExp(`mappings\\.${f}\\.unit: must be equal to one of the allowed values`));
    bad({ [f]: { name: '' } }, new RegExp(`mappings\\.${f}\\.name: must NOT have fewer than 1 characters`));
    bad({ [f]: {} }, new RegExp(`mappings\\.${f}\\.name: required`));
    bad({ [f]: { name: 'x', scale: 2 } }, new RegExp(`mappings\\.${f}\\.scale: unknown field`));
  }
  assert.deepEqual(m({ gpuUtil: { name: 'g' } }), { gpuUtil: { name: 'g', scale: 1 } });
  assert.deepEqual(m({ gpuUtil: { name: 'g', scale: 0.01 } }), { gpuUtil: { name: 'g', scale: 0.01 } });
  bad({ gpuUtil: { name: 'g', scale: 0 } }, /mappings\.gpuUtil\.scale: must be > 0/);
  bad({ gpuUtil: { name: '' } }, /mappings\.gpuUtil\.name: must NOT have fewer than 1 characters/);
  bad({ gpuUtil: { scale: 1 } }, /mappings\.gpuUtil\.name: required/);
  bad({ gpuUtil: { name: 'g', unit: 's' } }, /mappings\.gpuUtil\.unit: unknown field/);
});

test('semantic checks: duplicate service per peer, port range, IPv4 octets; every problem listed', () => {
  // the same name under two peers is two services
  assert.equal(resolveInferenceConfig({ services: [SVC, { ...SVC, peer: 'cloud-b' }] }).services.length, 2);
  refused({ services: [SVC, { ...SVC, kind: 'tgi' }] }, /services\[1\]\.name: duplicate service "llm" for peer ""/);
  refused({ services: [{ ...SVC, instances: { static: ['10.0.0.1:0'] } }] }, /static\[0\]: port out of range/);
  refused({ services: [{ ...SVC, instances: { static: ['10.0.0.1:65536'] } }] }, /static\[0\]: port out of range/);
  assert.ok(resolveInferenceConfig({ services: [{ ...SVC, instances: { static: ['255.255.255.255:65535', '[::1]:1'] } }] }));
  refused({ services: [{ ...SVC, instances: { static: ['10.0.0.1:80', '10.0.256.1:80'] } }] }, /static\[1\]: invalid IPv4 address/);
  try {
    resolveInferenceConfig({ scrapeIntervalMs: 1, windowS: 0 });
    assert.fail('refused');
  } catch (e) {
    assert.ok(e instanceof InferenceConfigError);
    assert.equal(e.problems.length, 2, e.problems.join('; '));
    assert.match(e.message, /^config error: inference\.scrapeIntervalMs: must be >= 50\nconfig error: inference\.windowS: must be >= 1$/);
  }
  // the input is not changed (defaults go into a copy)
  const raw = { services: [{ ...SVC }] };
  resolveInferenceConfig(raw);
  assert.deepEqual(raw, { services: [SVC] });
});

test('gpu pairing and triton options: defaults, field-named errors', () => {
  const t = resolveInferenceConfig({ services: [{ ...SVC, kind: 'triton' }] }).services[0];
  assert.equal(t.triton, undefined, 'absent: the shipped defaults apply (configs read, ensembles per top-level model)');
  assert.deepEqual(resolveInferenceConfig({ services: [{ ...SVC, kind: 'triton', triton: {} }] }).services[0].triton, { modelConfig: true, ensembles: 'top-level' });
  assert.equal(t.gpu, undefined, 'no pairing unless configured');
  const g = resolveInferenceConfig({ services: [{ ...SVC, gpu: { port: 9400 } }] }).services[0].gpu;
  assert.deepEqual(g, { port: 9400, metricsPath: '/metrics', scheme: 'http' });
  refused({ services: [{ ...SVC, gpu: {} }] }, /inference\.services\[0\]\.gpu: needs port or static/);
  refused({ services: [{ ...SVC, gpu: { metricsPath: '/m' } }] }, /inference\.services\[0\]\.gpu: needs port or static/);
  refused({ services: [{ ...SVC, gpu: { port: 0 } }] }, /inference\.services\[0\]\.gpu\.port/);
  refused({ services: [{ ...SVC, gpu: { static: { '10.0.0.9:8000': '10.0.0.9:9400' } } }] }, /inference\.services\[0\]\.gpu\.static: "10\.0\.0\.9:8000" is not one of the service's instances/);
  refused({ services: [{ ...SVC, gpu: { static: { '10.0.0.1:8000': 'node-1' } } }] }, /inference\.services\[0\]\.gpu\.static/);
  refused({ services: [{ ...SVC, triton: { httpPort: 8000 } }] }, /inference\.services\[0\]\.triton: only for kind triton/);
  refused({ services: [{ ...SVC, kind: 'triton', triton: { ensembles: 'summed' } }] }, /inference\.services\[0\]\.triton\.ensembles/);
  refused({ services: [{ ...SVC, kind: 'triton', triton: { colour: 1 } }] }, /inference\.services\[0\]\.triton\.colour: unknown field/);
});
