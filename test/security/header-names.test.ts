// Issue 24 #5: every header-name field of the plugin configuration is checked against one
// reserved list (tracing, hop-by-hop and HTTP semantics, Envoy's x-envoy-*, credentials) and
// against the other fields. Before: link.header accepted b3 (a client's trace context reached the
// upstream as `b3: degraded`), baggage, grpc-trace-bin, x-amzn-trace-id, origin,
// sec-websocket-key; request.criticalityHeader = x-cross-cloud-status stripped the filter's own
// link status. The real filter and filter/config.schema.json (+ the documented cross-field rule)
// must refuse each, the filter naming the field.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { ProxyWasmHost } from '../../host/src';
import { checkPluginConfig, readJson, type Obj } from '../packaging/helpers';

const ROOT = path.resolve(__dirname, '..', '..');
const wasm = readFileSync(path.join(ROOT, 'build/switchyard.wasm'));

async function filterVerdict(cfg: Obj): Promise<string> {
  try {
    const host = await ProxyWasmHost.create({ wasm, pluginConfig: JSON.stringify(cfg), clock: 'manual', workers: 1, mainThread: false, canary: false, logLevel: 'critical' });
    await host.close();
    return '';
  } catch (e) {
    const m = /invalid plugin configuration: (.*)/.exec((e as Error).message);
    return m ? m[1] : (e as Error).message.split('\n')[0];
  }
}

/** envoy/plugin-config.json with a request block on the load-aware service. */
function base(): Obj {
  const c = readJson('envoy/plugin-config.json');
  c.loadAware.services[0].request = { allowOnHeadersStopIteration: true };
  return c;
}

const FIELDS: [string, (c: Obj, h: string) => void][] = [
  ['link.header', (c, h) => { c.link.header = h; }],
  ['loadAware.endpointHeader', (c, h) => { c.loadAware.endpointHeader = h; }],
  ['loadAware.degradedHeader', (c, h) => { c.loadAware.degradedHeader = h; }],
  ['loadAware.debugHeader', (c, h) => { c.loadAware.debugHeader = h; }],
  ['rules.routeHeaders[0]', (c, h) => { c.rules.routeHeaders = [h]; }],
  ['loadAware.services[0].request.criticalityHeader', (c, h) => { c.loadAware.services[0].request.criticalityHeader = h; }],
];

// The names (each a class: the tracing formats, HTTP's own, credentials, Envoy's prefix).
const RESERVED = ['b3', 'x-b3-traceid', 'traceparent', 'tracestate', 'baggage', 'grpc-trace-bin', 'x-amzn-trace-id', 'x-request-id',
  'x-ot-span-context', 'x-datadog-trace-id', 'x-datadog-parent-id', 'uber-trace-id', 'connection', 'keep-alive', 'te', 'trailer',
  'transfer-encoding', 'upgrade', 'host', 'origin', 'sec-websocket-key', 'sec-websocket-protocol', 'content-length', 'content-type',
  'cookie', 'set-cookie', 'authorization', 'proxy-authorization', 'x-envoy-upstream-service-time', 'x-api-key'];

test('issue 24 #5: every header-name field refuses the reserved names, naming the field (filter and schema)', async () => {
  const wrong: string[] = [];
  for (const [field, set] of FIELDS) {
    for (const h of RESERVED) {
      const c = base();
      set(c, h);
      const why = await filterVerdict(c);
      if (!why.startsWith(field + ': ')) wrong.push(`${field} = ${h}: filter ${why === '' ? 'accepts' : 'says ' + why}`);
      if (checkPluginConfig(c).length === 0) wrong.push(`${field} = ${h}: schema accepts`);
    }
  }
  assert.deepEqual(wrong, []);
  // Not vacuous: the same fields accept a free name.
  for (const [field, set] of FIELDS) {
    const c = base();
    set(c, 'x-tenant-tier');
    assert.equal(await filterVerdict(c), '', field);
    assert.deepEqual(checkPluginConfig(c), [], field);
  }
});

test('issue 24 #5: no two header-name fields name the same header (criticalityHeader against the filter\'s owned names)', async () => {
  const owned: [string, string][] = [['link.header', 'x-cross-cloud-status'], ['loadAware.endpointHeader', 'x-switchyard-endpoint'],
    ['loadAware.degradedHeader', 'x-degraded'], ['loadAware.debugHeader', 'x-switchyard-debug'], ['rules.routeHeaders[0]', 'x-switchyard-route']];
  for (const [other, name] of owned) {
    const c = base();
    c.loadAware.services[0].request.criticalityHeader = name;
    assert.equal(await filterVerdict(c), `loadAware.services[0].request.criticalityHeader: must differ from ${other} (${name})`);
    assert.notDeepEqual(checkPluginConfig(c), [], `schema + cross-field rules accept criticalityHeader = ${name}`);
  }
  // Without a loadAware section the defaults still apply (the filter strips them regardless).
  const c = base();
  delete c.loadAware;
  c.link.header = 'x-degraded';
  assert.equal(await filterVerdict(c), 'loadAware.degradedHeader: must differ from link.header (x-degraded)');
  // Two services may read the same criticality header: one purpose.
  const two = base();
  two.loadAware.services.push({ ...two.loadAware.services[0], authorities: ['other.prod.svc.cluster.local'], request: { allowOnHeadersStopIteration: true } });
  assert.equal(await filterVerdict(two), '');
  assert.deepEqual(checkPluginConfig(two), []);
});
