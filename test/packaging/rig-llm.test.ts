// The rig's inference demo (rig/llm.ts) and its verdict (rig/verdict.ts judgeLlm, used by `npm start -- --once`).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { judgeLlm, MIN_LLM_ANSWERED } from '../../rig/verdict';

const p = (hitRate: number, over: Partial<{ sent: number; ok: number; errors: number }> = {}) => ({ sent: 60, ok: 60, errors: 0, hitRate, ...over });

test('llm verdict: passes when every policy answered and request-aware hits more than least-request', () => {
  assert.deepEqual(judgeLlm({ 'request-aware': p(0.55), 'body-blind': p(0.3), 'least-request': p(0.28) }), { ok: true, problems: [] });
});

test('llm verdict: fails when request-aware does not beat least-request, or is unknown', () => {
  const eq = judgeLlm({ 'request-aware': p(0.3), 'body-blind': p(0.3), 'least-request': p(0.3) });
  assert.equal(eq.ok, false);
  assert.match(eq.problems.join(), /request-aware prefix hit rate 30% is not above least-request's 30%/);
  assert.equal(judgeLlm({ 'request-aware': p(NaN), 'body-blind': p(0.3), 'least-request': p(0.1) }).ok, false);
});

test('llm verdict: fails when a policy answered too few requests or too many failed', () => {
  const few = judgeLlm({ 'request-aware': p(0.6), 'body-blind': p(0.3, { ok: MIN_LLM_ANSWERED - 1 }), 'least-request': p(0.2) });
  assert.deepEqual(few.problems, [`body-blind: only ${MIN_LLM_ANSWERED - 1} requests answered`]);
  const errs = judgeLlm({ 'request-aware': p(0.6, { errors: 4 }), 'body-blind': p(0.3, { errors: 3 }), 'least-request': p(0.2) });
  assert.deepEqual(errs.problems, ['request-aware: 4 of 60 requests failed']);
});

test('llm demo (rig/llm.ts): all three policies answer the same shared-prefix traffic through the shipped bootstraps; the request-aware filter reads the bodies and hits cached prefixes', { timeout: 60_000 }, async () => {
  const { startLlmDemo, summarize } = await import('../../rig/llm');
  const demo = await startLlmDemo({ rps: 12, instances: 2, families: 3, prefixTokens: 400 });
  try {
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline && Math.min(...Object.values(demo.totals()).map((s) => s.ok)) < 30) await new Promise((r) => setTimeout(r, 200));
    const t = summarize(demo.totals());
    for (const [p, s] of Object.entries(t)) {
      assert.ok(s.ok >= 30, `${p}: ${s.ok} answered`);
      assert.ok(s.errors <= 1, `${p}: ${s.errors} errors`);
      assert.ok(Number.isFinite(s.ttftP50) && s.ttftP50 > 0, `${p}: TTFT ${s.ttftP50}`);
    }
    assert.ok(t['request-aware'].hitRate > 0.3, `request-aware hit rate ${t['request-aware'].hitRate}`);
    // through the shipped bootstraps: envoy/envoy-inference.yaml reads the bodies, envoy/envoy.yaml does not
    assert.equal(demo.proxies['request-aware'].config.wasm?.allowOnHeadersStopIteration, true);
    assert.ok((demo.proxies['request-aware'].host!.metric('switchyard.request.parsed.llm') ?? 0) > 0, 'the filter parsed the bodies');
    assert.equal(demo.proxies['body-blind'].host!.metric('switchyard.request.parsed.llm') ?? 0, 0, 'the body-blind service does not read them');
    assert.ok((demo.proxies['request-aware'].host!.metric('switchyard.request.hold_timeout.llm') ?? 0) === 0, 'no request waited for the watchdog');
  } finally {
    await demo.stop();
  }
});
