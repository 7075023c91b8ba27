import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runVirtual } from '../../sim/inference/llm/virtual';
import { tokenize } from '../../sim/inference/llm/tokens';
import { merge, mixedLengths, promptText, sharedSystemPrompts } from '../../sim/inference/llm/workloads';

test('shared system prompts: requests of a group share the prefix, the engine hits the cache for all but the first of each group', () => {
  const w = sharedSystemPrompts({ seed: 5, n: 40, prefixes: 3, prefixTokens: 512, ratePerS: 20 });
  assert.equal(w.length, 40);
  const groups = new Set(w.map((r) => r.group));
  assert.equal(groups.size, 3);
  const r = runVirtual({}, w.map((q) => ({ atMs: q.atMs, spec: { model: q.model, promptTokens: tokenize(promptText(q)), maxTokens: q.maxTokens } })));
  const firstOfGroup = new Set<string>();
  let misses = 0;
  r.requests.forEach((q, i) => {
    const g = w[i].group;
    if (!firstOfGroup.has(g)) firstOfGroup.add(g);
    else if (q.cachedTokens < 512) misses++;
  });
  assert.equal(misses, 0);
  assert.ok(r.engine.stats.prefixHits / r.engine.stats.prefixQueries > 0.7);
});

test('mixed lengths: both classes present with their token ranges; merge keeps time order', () => {
  const w = mixedLengths({ seed: 2, n: 200, longFraction: 0.25, shortTokens: [10, 20], longTokens: [1000, 1100] });
  const long = w.filter((r) => r.group === 'long');
  assert.ok(long.length > 30 && long.length < 70, String(long.length));
  for (const r of w) {
    const t = tokenize(r.prompt as string).length;
    if (r.group === 'long') assert.ok(t >= 1000 && t <= 1100);
    else assert.ok(t >= 10 && t <= 20);
  }
  const m = merge(w, sharedSystemPrompts({ seed: 1, n: 10 }));
  assert.equal(m.length, 210);
  for (let i = 1; i < m.length; i++) assert.ok(m[i].atMs >= m[i - 1].atMs);
});
