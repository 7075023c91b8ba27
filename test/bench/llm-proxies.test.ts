// Harness invariants of the K-proxy mode (bench/llm-routing/proxies.ts): K = 1 is the matrix's
// Switchyard cell exactly (so the K rows compare with it), K proxies account for every request and
// each proxy routes its share, and mesh in-flight reaches the filters through the agent's own
// aggregator. Not the figures (those are docs/benchmarks/mesh-llm-r8.md).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runFleet } from '../../bench/llm-routing/fleet';
import { cellOf, runMatrix, scenarios } from '../../bench/llm-routing/matrix';
import { ProxiesPolicy } from '../../bench/llm-routing/proxies';
import { publishedFleet } from '../../bench/llm-routing/published';

const WASM = 'build/switchyard.wasm';

test('K = 1 gives the matrix cell of the shipped filter bit for bit', () => {
  const [m] = runMatrix({ quick: true, seed: 1, wasmPath: WASM, policies: ['switchyard (shipped'], workloads: ['p60'] }, [1]);
  const [{ sc }] = scenarios(true, 1, ['p60']);
  const c = cellOf(sc, runFleet(publishedFleet(sc.numBlocks), sc.requests, new ProxiesPolicy(1, 'rr', WASM), 1));
  assert.deepEqual([c.reqPerS, c.ttftP99S, c.hitRate, c.refused], [m[0].reqPerS, m[0].ttftP99S, m[0].hitRate, m[0].refused]);
});

test('K = 4: every request served or refused, each proxy parses its share; with mesh the agent hears all four', () => {
  const [{ sc }] = scenarios(true, 1, ['p60']);
  for (const mesh of [false, true]) {
    const p = new ProxiesPolicy(4, 'rr', WASM, mesh);
    const r = runFleet(publishedFleet(sc.numBlocks), sc.requests, p, 1);
    assert.equal(r.outcomes.filter((o) => o !== undefined).length, sc.requests.length);
    const parsed = p.perProxy().map((m) => m['switchyard.request.parsed.llm'] ?? 0);
    assert.deepEqual(parsed, parsed.map(() => sc.requests.length / 4), `round robin: ${parsed.join(', ')}`);
    assert.equal(p.meshProxies(), mesh ? 4 : 0);
  }
});

test('K = 4 with mesh: every proxy applies the others\' prefix placements, and the index finds a holder about as often as one proxy alone', () => {
  const [{ sc }] = scenarios(true, 1, ['p60']);
  const hitOf = (p: ProxiesPolicy): number => {
    const m = p.perProxy();
    const sum = (k: string): number => m.reduce((a, x) => a + (x[k] ?? 0), 0);
    return sum('switchyard.request.prefix_hit.llm') / sum('switchyard.request.parsed.llm');
  };
  const one = new ProxiesPolicy(1, 'rr', WASM, true);
  runFleet(publishedFleet(sc.numBlocks), sc.requests, one, 1);
  const four = new ProxiesPolicy(4, 'rr', WASM, true);
  runFleet(publishedFleet(sc.numBlocks), sc.requests, four, 1);
  // through the filters' version-2 reports and the agent's answers (agent/src/mesh/inflight.ts)
  for (const m of four.perProxy()) assert.ok((m['switchyard.mesh.prefix_learned'] ?? 0) > 0, `prefix_learned ${m['switchyard.mesh.prefix_learned']}`);
  // without the exchange each proxy knew a quarter of every prefix: 75 % against 94 % (docs/benchmarks/mesh-r9.md)
  assert.ok(hitOf(four) >= hitOf(one) - 0.05, `K=4 ${hitOf(four).toFixed(3)} against K=1 ${hitOf(one).toFixed(3)}`);
});
