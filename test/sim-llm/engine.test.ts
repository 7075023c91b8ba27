import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LlmEngine, DEFAULT_LLM_CONFIG } from '../../sim/inference/llm/engine';
import { blockHashes, tokenize } from '../../sim/inference/llm/tokens';
import { runVirtual, advanceTo } from '../../sim/inference/llm/virtual';
import { randomText } from '../../sim/inference/llm/workloads';
import { mulberry32 } from '../../sim/inference/prng';

const rng = mulberry32(7);
const text = (tokens: number): string => randomText(rng, tokens);

test('tokenize: fixed bytes per token, deterministic; block hashes chain the whole prefix', () => {
  assert.equal(tokenize('abcdefgh').length, 2);
  assert.equal(tokenize('abcdefghi').length, 3);
  assert.deepEqual(tokenize('hello world'), tokenize('hello world'));
  const a = tokenize(text(64));
  const b = a.slice();
  b[0] ^= 1; // differ in the first block only
  const ha = blockHashes(a, 16);
  const hb = blockHashes(b, 16);
  assert.equal(ha.length, 4);
  for (let i = 0; i < 4; i++) assert.notEqual(ha[i], hb[i], `block ${i} hash must cover the prefix before it`);
  assert.deepEqual(blockHashes(a.slice(0, 40), 16), ha.slice(0, 2));
  assert.notEqual(blockHashes(a, 16, 'lora-x')[0], ha[0], 'the adapter is part of the hash');
});

test('prefix hit: the second request sharing a 2048-token system prompt gets TTFT lower by about the cached fraction of prefill', () => {
  const sys = text(2048);
  const a = tokenize(sys + text(64));
  const b = tokenize(sys + text(64));
  const cold = runVirtual({}, [{ atMs: 0, spec: { model: 'sim-llm', promptTokens: b, maxTokens: 4 } }]).requests[0];
  const r = runVirtual({}, [
    { atMs: 0, spec: { model: 'sim-llm', promptTokens: a, maxTokens: 4 } },
    { atMs: 5000, spec: { model: 'sim-llm', promptTokens: b, maxTokens: 4 } },
  ]);
  const warm = r.requests[1];
  assert.equal(cold.cachedTokens, 0);
  assert.equal(warm.cachedTokens, 2048);
  const ttftCold = (cold.firstTokenMs as number) - cold.arrivalMs;
  const ttftWarm = (warm.firstTokenMs as number) - warm.arrivalMs;
  const c = DEFAULT_LLM_CONFIG;
  // cold: 2112 prefill tokens over two steps (budget 2048); warm: 64 tokens, one step
  const near = (x: number, y: number): boolean => Math.abs(x - y) < 1e-9;
  assert.ok(near(ttftCold, 2 * c.stepBaseMs + 2112 * c.prefillMsPerToken), String(ttftCold));
  assert.ok(near(ttftWarm, c.stepBaseMs + 64 * c.prefillMsPerToken), String(ttftWarm));
  const cachedFraction = 2048 / 2112;
  const prefillSaved = 1 - (ttftWarm - c.stepBaseMs) / (ttftCold - 2 * c.stepBaseMs);
  assert.ok(Math.abs(prefillSaved - cachedFraction) < 1e-9);
  assert.ok(ttftWarm < 0.1 * ttftCold);
  assert.equal(r.engine.stats.prefixHits, 2048);
  assert.equal(r.engine.stats.prefixQueries, 2 * 2112);
  // prefix caching off: no hit
  const off = runVirtual({ enablePrefixCaching: false }, [
    { atMs: 0, spec: { model: 'sim-llm', promptTokens: a, maxTokens: 4 } },
    { atMs: 5000, spec: { model: 'sim-llm', promptTokens: b, maxTokens: 4 } },
  ]);
  assert.equal(off.requests[1].cachedTokens, 0);
});

test('same step: a request scheduled after its twin in one step reuses the full blocks the twin computes in it (vLLM V1 caches a full block at allocation)', () => {
  // vLLM docs/design/prefix_caching.md, "Block Allocation": an allocated block already full of
  // tokens is added to the cache at once "so that the block can be reused by other requests in the
  // same batch" — two requests of one group arriving together compute the shared blocks once
  const sys = text(1024);
  const a = tokenize(sys + text(64));
  const b = tokenize(sys + text(64));
  const r = runVirtual({ maxNumBatchedTokens: 8192 }, [
    { atMs: 0, spec: { model: 'sim-llm', promptTokens: a, maxTokens: 4 } },
    { atMs: 0, spec: { model: 'sim-llm', promptTokens: b, maxTokens: 4 } },
  ]);
  const [x, y] = r.requests;
  assert.equal(x.cachedTokens, 0);
  assert.equal(y.cachedTokens, 1024);
  // one step computes both: the first's 1088 tokens and the second's 64
  assert.equal(x.firstTokenMs, y.firstTokenMs);
  const c = DEFAULT_LLM_CONFIG;
  assert.ok(Math.abs((y.firstTokenMs as number) - (c.stepBaseMs + (1088 + 64) * c.prefillMsPerToken)) < 1e-9, String(y.firstTokenMs));
  assert.equal(r.engine.stats.prefixHits, 1024);
  // a block only partly scheduled in the step is not findable: the budget ends inside the prefix
  const cut = runVirtual({ maxNumBatchedTokens: 1000 }, [
    { atMs: 0, spec: { model: 'sim-llm', promptTokens: a, maxTokens: 4 } },
    { atMs: 0, spec: { model: 'sim-llm', promptTokens: b, maxTokens: 4 } },
  ]);
  // step 1: a's first 1000 tokens (62 full blocks); step 2: a's last 88 and b, which finds a's 64 full prefix blocks
  assert.equal(cut.requests[1].cachedTokens, 1024);
});

test('a fully cached prompt still computes its last block (logits for the first token)', () => {
  const p = tokenize(text(64));
  const r = runVirtual({}, [
    { atMs: 0, spec: { model: 'sim-llm', promptTokens: p, maxTokens: 2 } },
    { atMs: 1000, spec: { model: 'sim-llm', promptTokens: p, maxTokens: 2 } },
  ]);
  assert.equal(r.requests[1].cachedTokens, 48);
});

test('LRU eviction: with a full cache the least recently used prefix is evicted, the recently used one kept', () => {
  // 40 blocks of 16 tokens; each prompt 256 tokens + 8 output = 17 blocks; two fit, three do not
  const cfg = { numBlocks: 40, blockSize: 16 };
  const A = tokenize(text(256));
  const B = tokenize(text(256));
  const C = tokenize(text(256));
  const spec = (p: number[]): { model: string; promptTokens: number[]; maxTokens: number } => ({ model: 'sim-llm', promptTokens: p, maxTokens: 8 });
  const r = runVirtual(cfg, [
    { atMs: 0, spec: spec(A) },
    { atMs: 1000, spec: spec(B) },
    { atMs: 2000, spec: spec(A) }, // A used again: B is now the least recently used
    { atMs: 3000, spec: spec(C) }, // needs 17 blocks: evicts B's, not A's
    { atMs: 4000, spec: spec(A) },
    { atMs: 5000, spec: spec(B) },
  ]);
  const cached = r.requests.map((q) => q.cachedTokens);
  // C takes the 8 never-hashed blocks, then the 9 least recently used cached ones: A's 16th
  // block (not re-hit: the last block is always recomputed) and B's tail B15..B8 (a request's
  // blocks are freed tail first, so a prefix loses its tail before its head). A's 4th run takes
  // one more (B7); B keeps B0..B6 = 112 tokens; A, used most recently, keeps all it can hit.
  assert.deepEqual(cached, [0, 0, 240, 0, 240, 112]);
  assert.ok(r.engine.stats.evictedBlocks > 0);
  assert.ok(r.engine.cachedBlocks() <= cfg.numBlocks);
  // nothing is referenced once all finished
  assert.equal(r.engine.kvUsage(), 0);
});

test('batching: every step stays within max_num_batched_tokens and max_num_seqs; long prompts are chunked', () => {
  const cfg = { maxNumBatchedTokens: 512, maxNumSeqs: 4 };
  const arrivals = Array.from({ length: 12 }, (_, i) => ({ atMs: i * 3, spec: { model: 'sim-llm', promptTokens: tokenize(text(100 + 150 * (i % 5))), maxTokens: 20 } }));
  const r = runVirtual(cfg, arrivals, true);
  let maxRunningSeen = 0;
  let chunked = false;
  for (const s of r.steps) {
    assert.ok(s.prefillTokens + s.decodeSeqs <= 512, `step at ${s.startMs}: ${s.prefillTokens} + ${s.decodeSeqs} > 512`);
    maxRunningSeen = Math.max(maxRunningSeen, s.decodeSeqs);
    if (s.prefillTokens > 0 && s.prefillTokens + s.decodeSeqs === 512) chunked = true;
  }
  assert.ok(maxRunningSeen <= 4);
  assert.ok(chunked, 'a step filled its whole budget with prefill');
  assert.equal(r.engine.stats.finished, 12);
  assert.equal(r.engine.stats.generationTokens, 12 * 20);
  // as vLLM: prompt_tokens counts whole prompts; the prefix-cache counters tell the computed share
  const prompts = arrivals.reduce((a, x) => a + x.spec.promptTokens.length, 0);
  assert.equal(r.engine.stats.promptTokens, prompts);
  assert.equal(r.steps.reduce((a, s) => a + s.prefillTokens, 0), prompts - r.engine.stats.prefixHits);
});

test('decode time per output token grows with the batch size', () => {
  const tpot = (n: number): number => {
    const r = runVirtual({}, Array.from({ length: n }, () => ({ atMs: 0, spec: { model: 'sim-llm', promptTokens: tokenize(text(32)), maxTokens: 64 } })));
    return r.engine.stats.tpot.sum / r.engine.stats.tpot.count;
  };
  const t1 = tpot(1);
  const t32 = tpot(32);
  assert.ok(Math.abs(t1 * 1000 - (DEFAULT_LLM_CONFIG.stepBaseMs + DEFAULT_LLM_CONFIG.decodeMsPerSeq)) < 1e-6);
  assert.ok(t32 > 1.5 * t1, `tpot(32)=${t32} vs tpot(1)=${t1}`);
});

test('LoRA: loading costs loraLoadMs once; max_loras caps the adapters resident, a third adapter waits for a free slot', () => {
  const cfg = { adapters: { x: 'sim-llm', y: 'sim-llm', z: 'sim-llm' }, maxLoras: 2, loraLoadMs: 40 };
  const p = (): number[] => tokenize(text(32));
  const base = runVirtual(cfg, [{ atMs: 0, spec: { model: 'sim-llm', promptTokens: p(), maxTokens: 4 } }]).requests[0];
  const withX = runVirtual(cfg, [{ atMs: 0, spec: { model: 'x', promptTokens: p(), maxTokens: 4 } }]).requests[0];
  assert.equal((withX.firstTokenMs as number) - ((base.firstTokenMs as number) - base.arrivalMs), 40);
  // x, y, z at once with 2 slots: z waits until x or y finishes
  const r = runVirtual(cfg, [
    { atMs: 0, spec: { model: 'x', promptTokens: p(), maxTokens: 50 } },
    { atMs: 0, spec: { model: 'y', promptTokens: p(), maxTokens: 50 } },
    { atMs: 0, spec: { model: 'z', promptTokens: p(), maxTokens: 4 } },
    { atMs: 0, spec: { model: 'sim-llm', promptTokens: p(), maxTokens: 4 } },
  ]);
  const [x, y, z, b] = r.requests;
  assert.equal(x.firstScheduledMs, 0);
  assert.equal(y.firstScheduledMs, 0);
  assert.equal(b.firstScheduledMs, 0, 'a base-model request is not held up behind an adapter without a slot');
  assert.ok((z.firstScheduledMs as number) >= Math.min(x.finishedMs as number, y.finishedMs as number));
  assert.equal(r.engine.stats.adapterLoads, 3);
  assert.equal(r.engine.loadedAdapters().length, 2);
  // a loaded adapter is reused without a load
  const again = runVirtual(cfg, [
    { atMs: 0, spec: { model: 'x', promptTokens: p(), maxTokens: 2 } },
    { atMs: 1000, spec: { model: 'x', promptTokens: p(), maxTokens: 2 } },
  ]);
  assert.equal(again.engine.stats.adapterLoads, 1);
});

test('KV exhaustion preempts the newest running request (recompute) and every request still completes', () => {
  const cfg = { numBlocks: 24, blockSize: 16, maxNumSeqs: 8 };
  const arr = Array.from({ length: 4 }, () => ({ atMs: 0, spec: { model: 'sim-llm', promptTokens: tokenize(text(64)), maxTokens: 80 } }));
  const r = runVirtual(cfg, arr);
  assert.ok(r.engine.stats.preemptions > 0);
  assert.equal(r.engine.stats.finished, 4);
  for (const q of r.requests) assert.equal(q.generated, 80);
  assert.equal(r.engine.kvUsage(), 0);
});

test('bad requests: unknown model, empty prompt, too large for the cache, bad config', () => {
  const e = new LlmEngine({ numBlocks: 4, blockSize: 16 });
  assert.throws(() => e.submit({ model: 'nope', promptTokens: [1], maxTokens: 1 }), /model "nope" is not served/);
  assert.throws(() => e.submit({ model: 'sim-llm', promptTokens: [], maxTokens: 1 }), /at least one token/);
  assert.throws(() => e.submit({ model: 'sim-llm', promptTokens: new Array(60).fill(1), maxTokens: 10 }), /needs 5 KV blocks, the cache has 4/);
  assert.throws(() => new LlmEngine({ maxNumSeqs: 0 }), /maxNumSeqs must be an integer >= 1/);
  assert.throws(() => new LlmEngine({ adapters: { a: 'other' } }), /adapter a: unknown base model other/);
});

test('advanceTo drives several engines in virtual time to the same result as runVirtual', () => {
  const specs = Array.from({ length: 6 }, (_, i) => ({ atMs: i * 7, spec: { model: 'sim-llm', promptTokens: tokenize(text(200)), maxTokens: 10 } }));
  const ref = runVirtual({}, specs).requests.map((q) => q.finishedMs);
  const e = new LlmEngine({});
  const reqs = [];
  for (const s of specs) {
    advanceTo(e, s.atMs);
    reqs.push(e.submit(s.spec, s.atMs));
  }
  advanceTo(e, Infinity);
  assert.deepEqual(reqs.map((q) => q.finishedMs), ref);
});

test('priority scheduling (vLLM --scheduling-policy priority): waiting requests by (priority, arrival); KV pressure preempts the lowest priority', () => {
  const p = (): number[] => tokenize(text(64));
  // 2 sequences at a time: 6 low-priority requests arrive, then a high-priority one; it runs next
  const arrivals = [
    ...Array.from({ length: 6 }, (_, i) => ({ atMs: i, spec: { model: 'sim-llm', promptTokens: p(), maxTokens: 30, priority: 1 } })),
    { atMs: 10, spec: { model: 'sim-llm', promptTokens: p(), maxTokens: 30, priority: -1 } },
  ];
  const fcfs = runVirtual({ maxNumSeqs: 2 }, arrivals);
  const prio = runVirtual({ maxNumSeqs: 2, schedulingPolicy: 'priority' }, arrivals);
  const order = (r: typeof fcfs) => r.requests.map((q, i) => ({ i, t: q.firstScheduledMs as number })).sort((a, b) => a.t - b.t || a.i - b.i).map((x) => x.i);
  assert.equal(order(fcfs).indexOf(6), 6, 'fcfs: the last arrival is scheduled last');
  // request 0 alone is running after the first step; requests 1-5 and 6 wait: 6 takes the free sequence
  assert.equal(order(prio).indexOf(6), 1, 'priority: scheduled as soon as a sequence is free, before the earlier low-priority ones');
  assert.equal(prio.engine.stats.finished, 7);
  // KV pressure: fcfs preempts the newest running request, priority the lowest-priority one
  const kv = [
    { atMs: 0, spec: { model: 'sim-llm', promptTokens: p(), maxTokens: 80, priority: 5 } },
    { atMs: 0.5, spec: { model: 'sim-llm', promptTokens: p(), maxTokens: 80, priority: 0 } },
    { atMs: 1, spec: { model: 'sim-llm', promptTokens: p(), maxTokens: 80, priority: 0 } },
  ];
  const f = runVirtual({ numBlocks: 20, blockSize: 16, maxNumSeqs: 8 }, kv);
  const q = runVirtual({ numBlocks: 20, blockSize: 16, maxNumSeqs: 8, schedulingPolicy: 'priority' }, kv);
  assert.ok(f.requests[2].preemptions > 0 && f.requests[0].preemptions === 0, `fcfs preemptions ${f.requests.map((x) => x.preemptions)}`);
  assert.ok(q.requests[0].preemptions > 0 && q.requests[1].preemptions === 0 && q.requests[2].preemptions === 0, `priority preemptions ${q.requests.map((x) => x.preemptions)}`);
  for (const r of [f, q]) assert.equal(r.engine.stats.finished, 3);
  assert.throws(() => new LlmEngine({ schedulingPolicy: 'lifo' as 'fcfs' }), /schedulingPolicy must be 'fcfs' or 'priority'/);
  assert.throws(() => new LlmEngine().submit({ model: 'sim-llm', promptTokens: [1], maxTokens: 1, priority: 0.5 }), /priority must be an integer/);
});
