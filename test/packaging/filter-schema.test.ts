// filter/config.schema.json: compiles in ajv strict mode, accepts the
// contract's example, and rejects what docs/contracts.md forbids.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import { type Obj, checkPluginConfig, readJson, readText } from './helpers';

const schema = readJson('filter/config.schema.json');

/** The JSON example in docs/contracts.md, section "Filter plugin configuration". */
function contractExample(): Obj {
  const md = readText('docs/contracts.md');
  const section = md.slice(md.indexOf('## Filter plugin configuration'));
  const m = /```json\n([\s\S]*?)\n```/.exec(section);
  assert.ok(m, 'contract example not found');
  return JSON.parse(m[1]);
}

const minimal = (): Obj => ({ agent: { cluster: 'switchyard_agent' }, link: { services: [] } });
const withLoadAware = (): Obj => ({
  ...minimal(),
  loadAware: {
    endpointHeader: 'x-switchyard-endpoint',
    degradedHeader: 'x-degraded',
    debugHeader: 'x-switchyard-debug',
    services: [
      {
        authorities: ['inference.prod.svc.cluster.local'],
        service: 'inference',
        maxUtilization: 0.95,
        stalenessMs: 5000,
        band: 0.1,
        allIneligible: 'reject-503',
        retryAfterS: 1,
        debug: true,
      },
    ],
  },
});

test('schema compiles in ajv strict mode', () => {
  const ajv = new Ajv({ strict: true, allErrors: true });
  addFormats(ajv);
  ajv.compile(schema);
});

test('accepts the contract example, a minimal config, and the load-aware block', () => {
  assert.deepEqual(checkPluginConfig(contractExample()), []);
  assert.deepEqual(checkPluginConfig(minimal()), []);
  assert.deepEqual(checkPluginConfig(withLoadAware()), []);
  const la = withLoadAware();
  la.loadAware.services = [{ authorities: ['*.inference.example'], service: 'inference' }];
  assert.deepEqual(checkPluginConfig(la), [], 'only service and authorities are required');
});

test('defaults in the schema are the contract defaults', () => {
  const md = readText('docs/contracts.md');
  const rows = new Map<string, string>();
  for (const m of md.matchAll(/^\| ([a-zA-Z.[\]]+) \| [^|]* \| ([^|]*) \|/gm)) rows.set(m[1], m[2].trim());
  const def = (path: string[]): unknown => {
    let s: Obj = schema;
    for (const k of path) s = s.properties[k];
    return s.default;
  };
  const expect = (field: string, path: string[]): void => {
    const v = rows.get(field);
    assert.ok(v !== undefined, `contracts.md row ${field}`);
    const literal = v.replace(/`/g, '');
    assert.equal(String(def(path)), literal, field);
  };
  expect('agent.authority', ['agent', 'authority']);
  expect('agent.path', ['agent', 'path']);
  expect('agent.pollMs', ['agent', 'pollMs']);
  expect('agent.longPollMs', ['agent', 'longPollMs']);
  expect('refreshMs', ['refreshMs']);
  expect('leaseMs', ['leaseMs']);
  expect('link.header', ['link', 'header']);
  expect('link.stalenessMs', ['link', 'stalenessMs']);
  expect('link.failMode', ['link', 'failMode']);
  expect('link.stripUnmatched', ['link', 'stripUnmatched']);
  assert.equal(def(['agent', 'timeoutMs']), undefined, 'timeoutMs default depends on longPollMs');
});

const invalid: [string, (c: Obj) => void][] = [
  ['unknown top-level field', (c) => (c.extra = 1)],
  ['unknown agent field', (c) => (c.agent.clutser = 'x')],
  ['unknown service field', (c) => (c.link.services = [{ authorities: ['a.b'], peer: 'cloud-b', weight: 1 }])],
  ['missing agent.cluster', (c) => delete c.agent.cluster],
  ['missing link.services', (c) => delete c.link.services],
  ['missing services[].peer', (c) => (c.link.services = [{ authorities: ['a.b'] }])],
  ['empty authorities', (c) => (c.link.services = [{ authorities: [], peer: 'cloud-b' }])],
  ['authority with port', (c) => (c.link.services = [{ authorities: ['a.b:80'], peer: 'cloud-b' }])],
  ['authority with scheme', (c) => (c.link.services = [{ authorities: ['http://a.b'], peer: 'cloud-b' }])],
  ['wildcard not at the front', (c) => (c.link.services = [{ authorities: ['a.*.b'], peer: 'cloud-b' }])],
  ['bare wildcard', (c) => (c.link.services = [{ authorities: ['*'], peer: 'cloud-b' }])],
  ['uppercase header', (c) => (c.link.header = 'X-Cross-Cloud-Status')],
  ['pseudo header', (c) => (c.link.header = ':authority')],
  ['header with space', (c) => (c.link.header = 'x cross')],
  ['pollMs below range', (c) => (c.agent.pollMs = 9)],
  ['pollMs not an integer', (c) => (c.agent.pollMs = 50.5)],
  ['longPollMs above range', (c) => (c.agent.longPollMs = 30001)],
  ['timeoutMs <= longPollMs', (c) => Object.assign(c.agent, { longPollMs: 500, timeoutMs: 500 })],
  ['default timeoutMs too small for custom longPollMs is fine but explicit too small is not', (c) => Object.assign(c.agent, { longPollMs: 2000, timeoutMs: 1500 })],
  ['leaseMs <= refreshMs', (c) => Object.assign(c, { refreshMs: 5000, leaseMs: 4000 })],
  ['leaseMs below range', (c) => (c.leaseMs = 99)],
  ['refreshMs zero', (c) => (c.refreshMs = 0)],
  ['stalenessMs zero', (c) => (c.link.stalenessMs = 0)],
  ['bad failMode', (c) => (c.link.failMode = 'open')],
  ['path without slash', (c) => (c.agent.path = 'v1/snapshot')],
  ['stripUnmatched not boolean', (c) => (c.link.stripUnmatched = 'yes')],
  ['loadAware unknown field', (c) => (c.loadAware = { services: [], extra: true })],
  ['loadAware service without service', (c) => (c.loadAware = { services: [{ authorities: ['a.b'] }] })],
  ['loadAware without services', (c) => (c.loadAware = {})],
  ['loadAware band out of range', (c) => (c.loadAware = { services: [{ authorities: ['a.b'], service: 's', band: 11 }] })],
  ['loadAware maxUtilization 0', (c) => (c.loadAware = { services: [{ authorities: ['a.b'], service: 's', maxUtilization: 0 }] })],
  ['loadAware maxUtilization > 1', (c) => (c.loadAware = { services: [{ authorities: ['a.b'], service: 's', maxUtilization: 1.5 }] })],
  ['loadAware bad allIneligible', (c) => (c.loadAware = { services: [{ authorities: ['a.b'], service: 's', allIneligible: 'drop' }] })],
  ['loadAware uppercase endpointHeader', (c) => (c.loadAware = { endpointHeader: 'X-Endpoint', services: [] })],
  ['loadAware endpointHeader per service (it is global)', (c) => (c.loadAware = { services: [{ authorities: ['a.b'], service: 's', endpointHeader: 'x-e' }] })],
];

for (const [name, mutate] of invalid) {
  test(`rejects: ${name}`, () => {
    const c = contractExample();
    mutate(c);
    assert.notDeepEqual(checkPluginConfig(c), [], name);
  });
}

test('authority patterns: exact hosts and *.suffix wildcards are accepted', () => {
  for (const a of ['payment-service.prod.svc.cluster.local', 'Payment.Example', '*.payments.example', '*.a.b.c', 'localhost', '10.0.0.1']) {
    const c = contractExample();
    c.link.services = [{ authorities: [a], peer: 'cloud-b' }];
    assert.deepEqual(checkPluginConfig(c), [], a);
  }
});

test('schema property sets equal the key lists the filter parser accepts (filter/assembly/lib/config.ts)', (t) => {
  const src = readText('filter/assembly/lib/config.ts');
  const list = (re: RegExp, what: string): string[] => {
    const m = re.exec(src);
    assert.ok(m, `filter parser: key list for ${what} not found (update this test if the parser moved)`);
    return JSON.parse(m[1].replace(/\s+/g, ''));
  };
  const keys = (o: Obj): string[] => Object.keys(o.properties).sort();
  const la = schema.properties.loadAware;
  const pairs: [string, string[], string[]][] = [
    ['root', list(/new ObjectReader\(root, "", p, (\[[^\]]*\])\)/, 'root'), keys(schema)],
    ['agent', list(/r\.obj\("agent", (\[[^\]]*\])/, 'agent'), keys(schema.properties.agent)],
    ['link', list(/r\.obj\("link", (\[[^\]]*\])/, 'link'), keys(schema.properties.link)],
    ['link.services[]', list(/new ObjectReader\(sv, at, r\.problems, (\["authorities", "peer"\])\)/, 'link.services[]'), keys(schema.properties.link.properties.services.items)],
    ['loadAware', list(/r\.obj\("loadAware", (\[[^\]]*\])/, 'loadAware'), keys(la)],
    ['loadAware.services[]', list(/new ObjectReader\(sv, at, r\.problems,\s*(\["authorities", "service"[^\]]*\])\)/, 'loadAware.services[]'), keys(la.properties.services.items)],
  ];
  for (const [what, parser, sch] of pairs) assert.deepEqual(sch, [...parser].sort(), `${what}: schema and filter parser disagree`);
});
