// Harness invariants of the LLM routing benchmark (bench/llm-routing): every request accounted
// for, reference policies behaving as their owners define them, the prototype's cost terms.
// Not performance targets (those are printed by `tsx bench/llm-routing/run.ts`).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { prepare, runFleet, type PolicyCtx, type RouteRequest } from '../../bench/llm-routing/fleet';
import { GieIndexer, hashPromptBlocks, SlotIndex } from '../../bench/llm-routing/prefix';
import { GIE_DEFAULT_WEIGHTS, GIE_REFRESH_METRICS_MS, GIE_SATURATION, GieScheduler, LeastRequest, prefixOnly, RoundRobin } from '../../bench/llm-routing/reference';
import { fleet, LLAMA, prefixHeavy } from '../../bench/llm-routing/scenarios';
import type { Scraped } from '../../bench/llm-routing/scrape';
import { DEFAULT_PROTOTYPE, RequestAwarePrototype, SwitchyardBodyBlind } from '../../bench/llm-routing/switchyard';
import { SwitchyardFilterPolicy } from '../../bench/llm-routing/filter';
import { LlmAgentModel, DEFAULT_LLM_AGENT, modelsAnswer } from '../../bench/llm-routing/agent';
import { decodeSnapshot } from '../../agent/src/snapshot/codec';
import { MODEL_BASE } from '../../agent/src/snapshot/llm';
import { LlmEngine } from '../../sim/inference/llm/engine';
import { renderLlmVllm } from '../../sim/inference/llm/render';
import { advanceTo } from '../../sim/inference/llm/virtual';
import { tokenize } from '../../sim/inference/llm/tokens';
import { randomText } from '../../sim/inference/llm/workloads';
import { mulberry32 } from '../../sim/inference/prng';

function scraped(o: Partial<Scraped> = {}): Scraped {
  return {
    numRequestsWaiting: 0, numRequestsRunning: 0, kvCacheUsagePerc: 0, promptTokensTotal: 0, generationTokensTotal: 0,
    prefixCacheQueriesTotal: 0, prefixCacheHitsTotal: 0, requestSuccessTotal: 0, ttftSum: 0, ttftCount: 0, queueTimeSum: 0,
    queueTimeCount: 0, tpotSum: 0, tpotCount: 0, inferenceTimeSum: 0, inferenceTimeCount: 0, runningLoraAdapters: [],
    waitingLoraAdapters: [], maxLora: 2, numGpuBlocks: 2048, blockSize: 16, ...o,
  };
}

const FOUR = Array.from({ length: 4 }, (_, i) => ({ name: `i${i}`, cfg: { models: ['m'] } }));
function ctx4(seed = 1): PolicyCtx {
  return { instances: FOUR, candidates: () => [0, 1, 2, 3], seed };
}
let nextIdx = 0;
function req(text: string, criticality: RouteRequest['criticality'] = 'standard', model = 'm'): RouteRequest {
  return { idx: nextIdx++, model, text, promptBytes: text.length, maxTokens: 32, criticality,
    wire: () => ({ path: '/v1/completions', body: JSON.stringify({ model, prompt: text, max_tokens: 32, stream: true }) }) };
}

test('every request is accounted for (served to its last token or shed), on an instance serving its model', { timeout: 60_000 }, () => {
  const sc = prefixHeavy({ seed: 3, durationMs: 12_000, warmupMs: 2_000, ratePerS: 60, mix: [0.2, 0.4] });
  const fl = fleet();
  for (const p of [new RoundRobin(), new LeastRequest(), new GieScheduler(), prefixOnly(), new SwitchyardBodyBlind(), new RequestAwarePrototype({ scrapeMs: 250 }),
    new SwitchyardFilterPolicy({ agent: { scrapeIntervalMs: 250 } })]) {
    const r = runFleet(fl, sc.requests, p, 3);
    assert.equal(r.outcomes.length, sc.requests.length, p.name);
    let served = 0;
    let shed = 0;
    for (let i = 0; i < sc.requests.length; i++) {
      const o = r.outcomes[i];
      assert.ok(o, `${p.name}: request ${i} has no outcome`);
      assert.equal(o.idx, i);
      if (o.shed) {
        shed++;
        assert.equal(o.instance, -1);
        assert.ok(Number.isNaN(o.queuedMs));
        continue;
      }
      served++;
      assert.ok(o.ttftMs > 0 && o.ttftMs <= o.e2eMs, `${p.name}: ttft ${o.ttftMs} e2e ${o.e2eMs}`);
      // the queue part of TTFT: from arrival to the step that first scheduled it, which ends at or before the first token
      assert.ok(o.queuedMs >= 0 && o.queuedMs < o.ttftMs, `${p.name}: queued ${o.queuedMs} ttft ${o.ttftMs}`);
      assert.ok(o.cachedTokens >= 0 && o.cachedTokens < o.promptTokens);
      const m = sc.requests[i].w.model;
      assert.ok(fl[o.instance].cfg.models?.includes(m) || Object.keys(fl[o.instance].cfg.adapters ?? {}).includes(m), `${p.name}: ${m} on ${fl[o.instance].name}`);
    }
    assert.equal(served + shed, sc.requests.length);
    assert.equal(r.sent.reduce((a, b) => a + b, 0), served, `${p.name}: sent = served`);
    // only the policies with admission control shed, and never a critical request
    if (p instanceof RoundRobin || p instanceof LeastRequest || p instanceof SwitchyardBodyBlind || p.name === 'prefix-only') assert.equal(shed, 0, p.name);
    assert.ok(r.outcomes.every((o) => !o.shed || sc.requests[o.idx].criticality !== 'critical'), `${p.name} shed a critical request`);
    if (p instanceof GieScheduler && p.name === 'gie-default') assert.ok(r.outcomes.every((o) => !o.shed || sc.requests[o.idx].criticality === 'sheddable'), 'GIE sheds only sheddable');
  }
});

test('the same sample path for every policy: prepare() is deterministic and marks the measured window', () => {
  const a = prefixHeavy({ seed: 5, durationMs: 5000, warmupMs: 1000, ratePerS: 20 });
  const b = prefixHeavy({ seed: 5, durationMs: 5000, warmupMs: 1000, ratePerS: 20 });
  assert.deepEqual(a.requests.map((r) => [r.w.atMs, r.text.length, r.tokens.length]), b.requests.map((r) => [r.w.atMs, r.text.length, r.tokens.length]));
  assert.ok(a.requests.every((r, i) => i === 0 || r.w.atMs >= a.requests[i - 1].w.atMs));
  assert.ok(a.requests.every((r) => r.measured === (r.w.atMs >= 1000 && r.w.atMs < 5000)));
  assert.throws(() => runFleet(fleet(), prepare([{ ...a.requests[0].w, model: LLAMA }], () => 'standard', 0, 1), { name: 'bad', scrapeMs: 0, init() {}, route: () => 7 }, 1), /does not serve/);
});

test('round-robin cycles through the model\'s instances', () => {
  const p = new RoundRobin();
  p.init(ctx4());
  assert.deepEqual(Array.from({ length: 8 }, () => p.route(0, req('x'))), [0, 1, 2, 3, 0, 1, 2, 3]);
});

test('LEAST_REQUEST: two draws, the one with strictly fewer active requests wins; completions lower the count', () => {
  const p = new LeastRequest();
  p.init(ctx4(7));
  for (let k = 0; k < 400; k++) p.route(0, req('x'));
  // p2c on active counts keeps them within a few of each other
  assert.ok(Math.max(...p.active) - Math.min(...p.active) <= 3, `active ${p.active}`);
  assert.equal(p.active.reduce((a, b) => a + b, 0), 400);
  p.onComplete(0, 2);
  assert.equal(p.active.reduce((a, b) => a + b, 0), 399);
  // an instance with far more active requests is never picked when the other draw is below it
  const q = new LeastRequest();
  q.init({ instances: FOUR.slice(0, 2), candidates: () => [0, 1], seed: 3 });
  q.active = [100, 0];
  const picks = Array.from({ length: 50 }, () => q.route(0, req('x')));
  // instance 0 wins only when both draws are 0 (probability 1/4)
  assert.ok(picks.filter((i) => i === 0).length < 25 && picks.filter((i) => i === 1).length > 25);
});

test('GIE default scorers: weights 2/2/3, queue min-max, 1 - KV usage, prefix matched/total; 50 ms refresh', () => {
  assert.deepEqual({ ...GIE_DEFAULT_WEIGHTS }, { queue: 2, kvCacheUtilization: 2, prefixCache: 3 });
  assert.equal(GIE_REFRESH_METRICS_MS, 50);
  assert.deepEqual({ ...GIE_SATURATION }, { queueDepthThreshold: 5, kvCacheUtilThreshold: 0.8 });
  const g = new GieScheduler();
  assert.equal(g.scrapeMs, 50);
  g.init(ctx4());
  g.onScrape(0, 0, scraped({ numRequestsWaiting: 0, kvCacheUsagePerc: 0.5 }));
  g.onScrape(0, 1, scraped({ numRequestsWaiting: 4, kvCacheUsagePerc: 0.1 }));
  g.onScrape(0, 2, scraped({ numRequestsWaiting: 8, kvCacheUsagePerc: 0 }));
  g.onScrape(0, 3, scraped({ numRequestsWaiting: 8, kvCacheUsagePerc: 1 }));
  const text = randomText(mulberry32(1), 64); // 256 bytes = 4 blocks (+ the model's hash)
  const hashes = g.hashes(req(text));
  assert.equal(hashes.length, 5);
  g.indexer.add(hashes.slice(0, 3), 3); // instance 3 holds the model + 2 blocks
  const s = g.scores([0, 1, 2, 3], hashes);
  const expect = [2 * 1 + 2 * 0.5, 2 * 0.5 + 2 * 0.9, 2 * 0 + 2 * 1, 2 * 0 + 2 * 0 + 3 * (3 / 5)];
  s.forEach((v, k) => assert.ok(Math.abs(v - expect[k]) < 1e-9, `score ${k}: ${v} vs ${expect[k]}`));
  // max-score: instance 0 (3.0) over 1 (2.8); the chosen instance is recorded in the indexer
  assert.equal(g.route(0, req(text)), 0);
  assert.equal(g.indexer.matchLongestPrefix(hashes).get(0), 5);
  // prompts shorter than one block are not hashed (score 0 for all)
  assert.deepEqual(g.hashes(req('short')), []);
});

test('GIE admission: a sheddable request gets 429 only when no instance has waiting <= 5 and KV <= 0.8', () => {
  const g = new GieScheduler();
  g.init(ctx4());
  for (let i = 0; i < 4; i++) g.onScrape(0, i, scraped({ numRequestsWaiting: 6, kvCacheUsagePerc: 0.1 }));
  assert.equal(g.route(0, req('x', 'sheddable')), -1);
  assert.ok(g.route(0, req('x', 'standard')) >= 0);
  assert.ok(g.route(0, req('x', 'critical')) >= 0);
  g.onScrape(0, 2, scraped({ numRequestsWaiting: 5, kvCacheUsagePerc: 0.8 })); // good capacity (≤, ≤)
  assert.equal(g.route(0, req('x', 'sheddable')), 2);
  assert.equal(g.shed, 1);
});

test('prefix-only affinity sends a repeated prefix to the instance that got it first', () => {
  const p = prefixOnly();
  assert.equal(p.scrapeMs, 0);
  p.init(ctx4(9));
  const rng = mulberry32(4);
  const sys = randomText(rng, 512);
  const first = p.route(0, req(sys + randomText(rng, 40)));
  for (let k = 0; k < 30; k++) assert.equal(p.route(k, req(sys + randomText(rng, 40))), first);
  // another model does not match (model hashed into block 0)
  const other = new Set(Array.from({ length: 30 }, () => p.route(0, req(randomText(rng, 512)))));
  assert.ok(other.size > 1, 'unrelated prompts spread (random tie-break)');
});

test('block hashes: chained (equal prefix -> equal leading hashes), seeded by the model, partial block ignored', () => {
  const a = hashPromptBlocks('m', 'a'.repeat(64) + 'b'.repeat(64) + 'c'.repeat(63));
  const b = hashPromptBlocks('m', 'a'.repeat(64) + 'x'.repeat(64) + 'c'.repeat(64));
  assert.equal(a.length, 2);
  assert.equal(b.length, 3);
  assert.equal(a[0], b[0]);
  assert.notEqual(a[1], b[1]);
  assert.notEqual(hashPromptBlocks('other', 'a'.repeat(64))[0], a[0]);
  assert.equal(hashPromptBlocks('m', 'a'.repeat(64 * 300)).length, 256);
});

test('indexes are bounded: GIE per-server LRU, the filter-style index by entries and age', () => {
  const g = new GieIndexer(10);
  g.add(Array.from({ length: 25 }, (_, i) => `h${i}`), 1);
  assert.equal(g.entries(1), 10);
  assert.equal(g.matchLongestPrefix(['h0']).size, 0, 'oldest evicted');
  assert.equal(g.matchLongestPrefix(['h24']).get(1), 1);
  const s = new SlotIndex(8, 1000);
  s.record(['a', 'b', 'c'], 1, 0);
  s.record(['a', 'b'], 2, 10);
  assert.deepEqual([...s.lookup(['a', 'b', 'c'], 20).entries()].sort(), [[1, 3], [2, 2]]);
  assert.equal(s.lookup(['a'], 2000).size, 0, 'aged');
  for (let i = 0; i < 20; i++) s.record([`x${i}`], 0, 3000);
  assert.equal(s.size, 8, 'one set of 8, full');
  assert.equal(s.evictions + s.expirations, 3 + 20 - 8, 'every entry gone is counted once');
  // within a set the least recently recorded way goes
  const one = new SlotIndex(8, 1e9);
  for (const [i, h] of ['p', 'q', 'r', 's', 'u', 'v', 'w', 'y'].entries()) one.record([h], 1, i);
  one.record(['p'], 1, 10);
  one.record(['t'], 1, 11);
  assert.equal(one.lookup(['q'], 12).size, 0, 'q, recorded at 1, evicted');
  assert.equal(one.size, 8);
  assert.equal(one.lookup(['p'], 12).get(1), 1, 'p, recorded again, kept');
});

test('prototype: a cached prefix is priced as prefill saved; KV pressure fades the credit; unknown adapter costs its load', () => {
  const p = new RequestAwarePrototype({ scrapeMs: 250 });
  p.init(ctx4());
  const rng = mulberry32(2);
  const text = randomText(rng, 1024); // 4096 bytes, 1024 tokens, 64 blocks
  const r0 = req(text);
  const i0 = p.route(0, r0);
  const t = p.terms.find((x) => x.instance === i0)!;
  assert.equal(t.cachedTokens, 0);
  assert.ok(Math.abs(t.prefillMs - DEFAULT_PROTOTYPE.priorPrefillMsPerToken * 1024) < 1e-9);
  // the same prompt again: the holder is priced with 64 blocks × 16 tokens cached (capped at P − 1)
  p.onFirstToken(1, i0, r0);
  p.prefillDoneAt[i0] = 0;
  p.route(1000, req(text));
  const h = p.terms.find((x) => x.instance === i0)!;
  assert.equal(h.cachedTokens, 1023);
  assert.ok(h.prefillMs < 0.2);
  // KV usage at kvLow + half the band: half the credit
  p.onScrape(2000, i0, scraped({ kvCacheUsagePerc: (DEFAULT_PROTOTYPE.kvLow + DEFAULT_PROTOTYPE.kvHigh) / 2 }));
  assert.ok(Math.abs(p.price(2000, i0, req(text), 64).cachedTokens - 1023 / 2) < 1e-9);
  // adapters: hot when running there, load time when a slot is free, + drain when all slots pinned
  const q = new RequestAwarePrototype();
  q.init({ instances: [{ name: 'a', cfg: { models: [LLAMA], adapters: { x: LLAMA, y: LLAMA, z: LLAMA } } }], candidates: () => [0], seed: 1 });
  q.onScrape(0, 0, scraped({ runningLoraAdapters: ['x'], numRequestsRunning: 4 }));
  assert.equal(q.loraCostMs(0, 'x'), 0);
  assert.equal(q.loraCostMs(0, LLAMA), 0);
  assert.equal(q.loraCostMs(0, 'y'), DEFAULT_PROTOTYPE.loraLoadMs);
  q.onScrape(250, 0, scraped({ runningLoraAdapters: ['x', 'y'], numRequestsRunning: 4 }));
  assert.ok(q.loraCostMs(0, 'z') > DEFAULT_PROTOTYPE.loraLoadMs);
});

test('prototype shedding: sheddable first, then standard; critical always placed on the cheapest of all instances', () => {
  const p = new RequestAwarePrototype({ scrapeMs: 250 });
  p.init(ctx4());
  // KV between the sheddable (0.7) and standard (0.8) thresholds everywhere
  for (let i = 0; i < 4; i++) p.onScrape(0, i, scraped({ kvCacheUsagePerc: 0.75 }));
  assert.equal(p.route(1, req('q', 'sheddable')), -1);
  assert.ok(p.route(1, req('q', 'standard')) >= 0);
  for (let i = 0; i < 4; i++) p.onScrape(2, i, scraped({ kvCacheUsagePerc: 0.85 }));
  assert.equal(p.route(3, req('q', 'standard')), -1);
  // critical: every instance priced, the cheapest wins (instance 2 has no queue)
  for (let i = 0; i < 4; i++) p.onScrape(4, i, scraped({ kvCacheUsagePerc: 0.99, numRequestsWaiting: i === 2 ? 0 : 9, numRequestsRunning: 8 }));
  for (let k = 0; k < 5; k++) assert.equal(p.route(5, req('q', 'critical')), 2);
  assert.deepEqual(p.shed, { critical: 0, standard: 1, sheddable: 1 });
});

test('switchyard-filter: the compiled filter routes every request once the agent has data; before, the degraded route', { timeout: 60_000 }, () => {
  const sc = prefixHeavy({ seed: 5, durationMs: 8_000, warmupMs: 2_000, ratePerS: 30 });
  const p = new SwitchyardFilterPolicy({ agent: { scrapeIntervalMs: 250 } });
  const r = runFleet(fleet(), sc.requests, p, 5);
  const st = p.stats;
  assert.equal(st.vmFailures, 0);
  // at 0.6 of capacity nothing is shed once the agent has inferred the slots (the first second it
  // knows 1-2 per instance, and a standard request to an instance with 2 per slot is shed)
  const shedLate = r.outcomes.filter((o) => o.shed && o.arrivalMs >= 2_000).length;
  assert.equal(shedLate, 0, 'no shedding at 0.6 of capacity after the first 2 s');
  assert.equal(r.outcomes.filter((o) => o.shed).length, st.shed429);
  assert.equal(st.routed + st.degraded + st.shed429, sc.requests.length);
  // the agent needs two scrapes per instance before an instance is healthy: the first requests
  // take the regular cluster (x-degraded), every later one is the filter's choice
  assert.ok(st.degraded > 0 && st.degraded < 40, `degraded ${st.degraded}`);
  const firstRouted = r.outcomes.findIndex((o, i) => i > 0 && o.instance >= 0) >= 0;
  assert.ok(firstRouted);
  assert.equal(st.metrics['switchyard.request.parsed.llm'], sc.requests.length, 'every body parsed by the filter');
  assert.equal(st.metrics['switchyard.request.invalid.llm'], 0);
  assert.ok(st.metrics['switchyard.request.prefix_hit.llm'] > sc.requests.length / 10, `prefix hits ${st.metrics['switchyard.request.prefix_hit.llm']}`);
  // the long-poll is answered at publications, not by timeouts: about one poll per publication
  assert.ok(st.publications > 8_000 / 250 - 2, `publications ${st.publications}`);
  assert.ok(st.polls <= st.publications + 3 && st.polls >= st.publications - 3, `polls ${st.polls} publications ${st.publications}`);
});

test('switchyard-filter agent: the real estimators on the simulator\'s /metrics give the LLM section the filter reads', () => {
  const specs = fleet().slice(0, 2);
  const engines = specs.map((s) => new LlmEngine(s.cfg));
  const a = new LlmAgentModel(DEFAULT_LLM_AGENT, ['10.0.0.1:8000', '10.0.0.2:8000'], engines.map(modelsAnswer), 1_700_000_000_000);
  const rng = mulberry32(9);
  let t = 0;
  for (let k = 0; k < 40; k++) {
    t += 100;
    for (const e of engines) {
      advanceTo(e, t);
      e.submit({ model: k % 4 === 0 ? 'sql-lora' : LLAMA, promptTokens: tokenize(randomText(rng, 400 * 4)), maxTokens: 20 }, t);
    }
    if (k % 5 === 4) engines.forEach((e, i) => a.scrape(i, t, renderLlmVllm({ engine: e, modelName: e.cfg.models[0], nowS: t / 1000 })));
  }
  const doc = decodeSnapshot(a.publish(t).binary);
  assert.equal(doc.instances?.length, 2);
  assert.ok(doc.instances!.every((r) => r.healthy), 'healthy after two scrapes');
  const l = doc.llm!;
  assert.equal(l.length, 2);
  for (const r of l) {
    // learned, finite, and at least the engine's own cost: 0.08 ms per prompt token (the step
    // overhead and the batch's decode folded in), a step of >= 6 ms per output token
    assert.ok(r.prefillMsPerToken > 0.05 && r.prefillMsPerToken < 5, `prefill ${r.prefillMsPerToken}`);
    assert.ok(r.decodeMsPerToken >= 6 && r.decodeMsPerToken < 1000, `decode ${r.decodeMsPerToken}`);
    assert.ok(r.kvCacheUsage >= 0 && r.kvCacheUsage <= 1);
    assert.equal(r.maxLoras, 2);
    assert.deepEqual(r.models.filter((m) => m.flags & MODEL_BASE).map((m) => m.name), [LLAMA]);
    assert.deepEqual(r.models.map((m) => m.name).sort(), [LLAMA, 'chat-lora', 'code-lora', 'sql-lora'].sort());
  }
});
