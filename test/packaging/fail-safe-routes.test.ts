// The shipped payment routes are fail-safe (issue 11 item 1): only the filter's explicit
// `x-cross-cloud-status: normal` may take the cross-cloud split; an absent header (the filter
// did not recognise the authority, e.g. `Host: …:80:80`), `degraded` or any other value goes to
// the local cluster. Checked on envoy/envoy.yaml as the embedded host loads and matches it, with
// the host's header matchers evaluated as Envoy defines them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { HeaderMap, loadEnvoyConfig, matchRoute } from '../../host/src/index';
import { headerMatcherMatches, parseEnvoyConfig, type HeaderMatcher } from '../../host/src/envoy-config';
import { contractFacts, p } from './helpers';

const C = contractFacts();
const cfg = loadEnvoyConfig(p('envoy/envoy.yaml'));

function routeFor(authority: string, status?: string | string[]): string {
  const h = new HeaderMap('request', [[':authority', authority], [':path', '/pay'], [':method', 'GET']]);
  for (const v of status === undefined ? [] : Array.isArray(status) ? status : [status]) h.add(C.statusHeader, v);
  const r = matchRoute(cfg.virtualHosts, h);
  assert.ok(r, `a route for ${authority}`);
  return r.cluster ?? `split(${r.weighted!.map((w) => `${w.name}:${w.weight}`).join(',')})`;
}

test('envoy.yaml: only x-cross-cloud-status: normal crosses the line; everything else stays local', () => {
  const local = 'cloud_a';
  const split = 'split(cloud_a:50,cloud_b:50)';
  assert.equal(routeFor(C.demoAuthority, 'normal'), split);
  assert.equal(routeFor(`${C.demoAuthority}:80`, 'normal'), split, 'the :* domain, same routes');
  assert.equal(routeFor(C.demoAuthority), local, 'no header');
  assert.equal(routeFor(C.demoAuthority, 'degraded'), local);
  for (const v of ['', 'Normal', 'NORMAL', 'normal ', 'up', 'normal,normal']) {
    assert.equal(routeFor(C.demoAuthority, v), local, `unknown value ${JSON.stringify(v)}`);
  }
  // Two copies are joined with "," by Envoy before matching: not "normal".
  assert.equal(routeFor(C.demoAuthority, ['normal', 'normal']), local, 'repeated header');
  // Authority forms the filter may not recognise, reaching the :* domain without a status header.
  for (const a of [`${C.demoAuthority}:80:80`, `${C.demoAuthority}:a:b`, `${C.demoAuthority.toUpperCase()}:8080`]) {
    assert.equal(routeFor(a), local, `Host: ${a}`);
  }
});

const m = (o: Partial<HeaderMatcher>): HeaderMatcher => ({ name: 'x', kind: 'exact', value: 'normal', ignoreCase: false, invert: false, ...o });

test("host header matchers follow Envoy's semantics for missing headers and invert_match", () => {
  // string matchers: a missing header never matches, inverted or not.
  assert.equal(headerMatcherMatches(m({}), []), false);
  assert.equal(headerMatcherMatches(m({ invert: true }), []), false, 'invert_match does not catch a missing header');
  assert.equal(headerMatcherMatches(m({}), ['normal']), true);
  assert.equal(headerMatcherMatches(m({ invert: true }), ['normal']), false);
  assert.equal(headerMatcherMatches(m({ invert: true }), ['degraded']), true);
  assert.equal(headerMatcherMatches(m({}), ['normal', 'x']), false, 'values joined with ","');
  assert.equal(headerMatcherMatches(m({ value: 'normal,x' }), ['normal', 'x']), true);
  assert.equal(headerMatcherMatches(m({ ignoreCase: true }), ['NORMAL']), true);
  assert.equal(headerMatcherMatches(m({ kind: 'prefix', value: 'nor' }), ['normal']), true);
  assert.equal(headerMatcherMatches(m({ kind: 'suffix', value: 'mal' }), ['normal']), true);
  assert.equal(headerMatcherMatches(m({ kind: 'contains', value: 'rma' }), ['normal']), true);
  // present_match: presence XOR invert; present_match: false matches only a missing header.
  const pres = (present: boolean, invert = false): HeaderMatcher => m({ kind: 'present', value: undefined, present, invert });
  assert.deepEqual([pres(true), pres(false), pres(true, true), pres(false, true)].map((x) => headerMatcherMatches(x, [])),
    [false, true, true, false]);
  assert.deepEqual([pres(true), pres(false), pres(true, true), pres(false, true)].map((x) => headerMatcherMatches(x, ['v'])),
    [true, false, false, true]);
});

test('unsupported header matchers keep failing loudly', () => {
  const base = (matcher: string): string => `
static_resources:
  listeners:
  - address: { socket_address: { address: 127.0.0.1, port_value: 1 } }
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          route_config:
            virtual_hosts:
            - name: v
              domains: ["*"]
              routes:
              - match: { prefix: "/", headers: [ { name: x, ${matcher} } ] }
                route: { cluster: c }
          http_filters:
          - name: envoy.filters.http.router
  clusters:
  - name: c
    load_assignment: { endpoints: [ { lb_endpoints: [ { endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: 2 } } } } ] } ] }
`;
  assert.doesNotThrow(() => parseEnvoyConfig(base('string_match: { exact: normal }, invert_match: true')));
  assert.doesNotThrow(() => parseEnvoyConfig(base('present_match: false')));
  assert.throws(() => parseEnvoyConfig(base('treat_missing_header_as_empty: true, string_match: { exact: a }')), /unsupported field .*treat_missing_header_as_empty/);
  assert.throws(() => parseEnvoyConfig(base('safe_regex_match: { regex: a }')), /unsupported field .*safe_regex_match/);
  assert.throws(() => parseEnvoyConfig(base('range_match: { start: 1, end: 2 }')), /unsupported field .*range_match/);
  assert.throws(() => parseEnvoyConfig(base('string_match: { safe_regex: { regex: a } }')), /unsupported field .*string_match\.safe_regex/);
});
