// docs/grafana/switchyard.json: valid dashboard JSON whose queries only use
// metric names that the filter and the agent actually define, under Envoy's
// Prometheus naming for Wasm custom metrics ("wasmcustom." stripped, no
// "envoy_" prefix, dots -> underscores).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { type Obj, p, readJson } from './helpers';

function sources(dir: string, ext: string): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const f of readdirSync(d)) {
      const full = join(d, f);
      if (statSync(full).isDirectory()) walk(full);
      else if (f.endsWith(ext)) out.push(readFileSync(full, 'utf8'));
    }
  };
  walk(p(dir));
  return out;
}

/** Prometheus names of the filter's metrics; names built at run time end in '_' (prefixes). */
function filterMetrics(): { exact: Set<string>; prefixes: string[] } {
  const exact = new Set<string>();
  const prefixes: string[] = [];
  for (const src of sources('filter/assembly', '.ts')) {
    // defineMetric(METRIC_X, "name") and the flushed request-path counters, new Counter("name").
    for (const m of src.matchAll(/(?:defineMetric\(\s*METRIC_[A-Z]+\s*,|new Counter\()\s*"(switchyard\.[a-z0-9_.]+)"\s*(\+)?/g)) {
      const prom = m[1].replace(/\./g, '_');
      if (m[2]) prefixes.push(prom);
      else exact.add(prom);
    }
  }
  return { exact, prefixes };
}

function agentMetrics(): Set<string> {
  const out = new Set<string>();
  for (const src of sources('agent/src', '.ts')) {
    for (const m of src.matchAll(/new (?:promClient\.)?(Counter|Gauge|Histogram|Summary)\(\{\s*name:\s*'([a-z0-9_]+)'/g)) {
      out.add(m[2]);
      if (m[1] === 'Histogram' || m[1] === 'Summary') for (const s of ['_bucket', '_sum', '_count']) out.add(m[2] + s);
    }
  }
  return out;
}

const dash = readJson('docs/grafana/switchyard.json');
const exprs: string[] = [];
const collect = (v: unknown): void => {
  if (Array.isArray(v)) v.forEach(collect);
  else if (v && typeof v === 'object') {
    for (const [k, x] of Object.entries(v as Obj)) {
      if ((k === 'expr' || k === 'definition') && typeof x === 'string') exprs.push(x);
      else collect(x);
    }
  }
};
collect(dash);

test('dashboard structure: panels with unique ids, prometheus datasource variable, grid positions', () => {
  assert.equal(dash.uid, 'switchyard');
  assert.ok(Number.isInteger(dash.schemaVersion));
  const ids = dash.panels.map((x: Obj) => x.id);
  assert.equal(new Set(ids).size, ids.length, 'unique panel ids');
  assert.ok(dash.templating.list.some((v: Obj) => v.type === 'datasource' && v.query === 'prometheus'));
  for (const panel of dash.panels) {
    for (const k of ['h', 'w', 'x', 'y']) assert.ok(Number.isInteger(panel.gridPos[k]), `${panel.title}: gridPos.${k}`);
    assert.ok(panel.gridPos.x + panel.gridPos.w <= 24, `${panel.title}: fits the 24-column grid`);
    if (panel.type !== 'row') assert.ok(panel.targets.length > 0, `${panel.title}: has queries`);
  }
  assert.ok(exprs.length > 10);
});

test('every metric in the dashboard is defined by the filter or the agent', () => {
  const f = filterMetrics();
  const a = agentMetrics();
  assert.ok(f.exact.size >= 8, 'found the filter metric definitions');
  assert.ok(a.size > 0, 'found the agent metric definitions');
  for (const e of exprs) {
    assert.ok(!/envoy_wasmcustom|wasmcustom_/.test(e), `Envoy strips the wasmcustom namespace in /stats/prometheus: ${e}`);
    for (const m of e.matchAll(/\b(switchyard_[a-z0-9_]+)/g)) {
      const name = m[1];
      // A name built at run time (switchyard_lb_choice_<service>) may appear as its
      // prefix only inside a regex (e.g. __name__=~"switchyard_lb_choice_.+").
      const asPattern = f.prefixes.includes(name) && /^[.(]/.test(e.slice(m.index! + name.length));
      const ok = f.exact.has(name) || a.has(name) || asPattern || f.prefixes.some((pre) => name.startsWith(pre) && name.length > pre.length);
      assert.ok(ok, `unknown metric ${name} in: ${e}`);
    }
  }
});

test('the core filter metrics all have a panel', () => {
  const all = exprs.join('\n');
  for (const name of filterMetrics().exact) assert.ok(all.includes(name), `no panel uses ${name}`);
});

test('the load-aware metrics (filter and agent) all have a panel', () => {
  const all = exprs.join('\n');
  const f = filterMetrics();
  assert.ok(f.prefixes.includes('switchyard_lb_choice_'), 'the filter defines per-service choice counters');
  for (const pre of f.prefixes) assert.ok(all.includes(pre), `no panel uses ${pre}<...>`);
  // filter/assembly/lib/choice/skip.ts skipName: every reason has a query.
  const choose = readFileSync(p('filter/assembly/lib/choice/skip.ts'), 'utf8');
  const reasons = [...choose.matchAll(/case SKIP_\w+: return "(\w+)";/g)].map((m) => m[1]);
  assert.deepEqual(reasons.sort(), ['link_degraded', 'saturated', 'slow', 'stale', 'unhealthy']);
  for (const r of reasons) assert.ok(all.includes(`switchyard_lb_skip_${r}`), `no panel for skip reason ${r}`);
  for (const name of agentMetrics()) {
    if (!name.startsWith('switchyard_inference_')) continue;
    const base = name.replace(/_(bucket|sum|count)$/, '');
    assert.ok(all.includes(base), `no panel uses ${base}`);
  }
});
