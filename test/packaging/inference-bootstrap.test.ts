// envoy/envoy-inference.yaml: the request-aware bootstrap (issue 23 §2). Envoy >= 1.35 with the
// Wasm PluginConfig's allow_on_headers_stop_iteration, the same inference routes and override_host
// cluster as envoy/envoy.yaml, a plugin configuration with a `request` block, and a listener
// buffer limit that leaves the filter the decision on an oversized body. The embedded host loads
// it with the field honoured (host/bin/proxy.ts, EnvoyProxy).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { type Obj, checkPluginConfig, p, readYaml } from './helpers';
import { formatFindings, validateBootstrap } from '../../scripts/envoy-proto';

const doc = readYaml('envoy/envoy-inference.yaml');
const rig = readYaml('envoy/envoy.yaml');
const hcmOf = (d: Obj): Obj => d.static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
const wasmOf = (d: Obj): Obj => hcmOf(d).http_filters.find((f: Obj) => f.name === 'envoy.filters.http.wasm').typed_config.config;
const vhOf = (d: Obj, host: string): Obj => hcmOf(d).route_config.virtual_hosts.find((v: Obj) => v.domains.includes(host));
const clusterOf = (d: Obj, name: string): Obj => d.static_resources.clusters.find((c: Obj) => c.name === name);

test('a valid Envoy >= 1.35 bootstrap (with the 1.35 definitions), allow_on_headers_stop_iteration set', () => {
  const r = validateBootstrap(doc, { deprecated: 'error' });
  assert.ok(r.ok && !r.warnings.length, formatFindings(r));
  assert.equal(wasmOf(doc).allow_on_headers_stop_iteration, true);
  assert.equal(wasmOf(doc).fail_open, false);
});

test('plugin configuration: the rig\'s load-aware service with a request block; schema-valid', () => {
  const pc = JSON.parse(wasmOf(doc).configuration.value);
  assert.deepEqual(checkPluginConfig(pc), []);
  const svc = pc.loadAware.services[0];
  assert.deepEqual(svc.request, { allowOnHeadersStopIteration: true });
  assert.ok(svc.fallbacks >= 1);
  const rigSvc = JSON.parse(wasmOf(rig).configuration.value).loadAware.services[0];
  for (const k of ['authorities', 'service', 'maxUtilization', 'stalenessMs', 'allIneligible', 'fallbacks']) assert.deepEqual(svc[k], rigSvc[k], k);
});

test('the inference routes and the override_host cluster are envoy.yaml\'s (without the remote instance\'s route)', () => {
  const host = 'inference.prod.svc.cluster.local';
  const ours = vhOf(doc, host).routes;
  const theirs = vhOf(rig, host).routes.filter((r: Obj) => r.route.cluster !== 'switchyard_original_dst');
  assert.deepEqual(ours, theirs);
  assert.deepEqual(clusterOf(doc, 'inference_default'), clusterOf(rig, 'inference_default'));
  assert.deepEqual(clusterOf(doc, 'switchyard_agent'), clusterOf(rig, 'switchyard_agent'));
});

test('the listener buffer limit leaves room for one chunk past maxBodyBytes (the filter decides, not Envoy\'s 413)', async () => {
  const limit = doc.static_resources.listeners[0].per_connection_buffer_limit_bytes;
  const pc = JSON.parse(wasmOf(doc).configuration.value);
  const { parseEnvoyConfig } = await import(p('host/src/envoy-config.ts'));
  const { readFileSync } = await import('node:fs');
  const parsed = parseEnvoyConfig(readFileSync(p('envoy/envoy-inference.yaml'), 'utf8'));
  assert.equal(parsed.listener.bufferLimitBytes, limit);
  assert.equal(parsed.wasm.allowOnHeadersStopIteration, true, 'the embedded host reads the field');
  // maxBodyBytes unset: the filter's default, which the schema states
  assert.equal(pc.loadAware.services[0].request.maxBodyBytes, undefined);
  const schema = JSON.parse(readFileSync(p('filter/config.schema.json'), 'utf8'));
  const max = schema.properties.loadAware.properties.services.items.properties.request.properties.maxBodyBytes.default;
  assert.ok(limit >= 2 * max, `limit ${limit} >= maxBodyBytes ${max} + a chunk of up to ${max}`);
});

test('host/bin/proxy.ts serves envoy/envoy-inference.yaml (it refused allow_on_headers_stop_iteration before)', { timeout: 60_000 }, async () => {
  const { spawn } = await import('node:child_process');
  const child = spawn(process.execPath, ['--import', 'tsx', p('host/bin/proxy.ts'), '--config', p('envoy/envoy-inference.yaml'),
    '--wasm', p('build/switchyard.wasm'), '--port', '0', '--admin-port', '0', '--workers', '1', '--quiet',
    '--cluster', 'switchyard_agent=127.0.0.1:9'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  try {
    const line = await new Promise<string>((resolve, reject) => {
      child.stderr!.on('data', (b: Buffer) => {
        err += b.toString();
        const m = /proxy listening on [^\n]*/.exec(err);
        if (m) resolve(m[0]);
      });
      child.once('exit', (code) => reject(new Error(`proxy exited ${code}: ${err}`)));
    });
    assert.match(line, /wasm vm_id "switchyard"/);
  } finally {
    child.kill('SIGTERM');
  }
});
