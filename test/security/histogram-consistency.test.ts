// Issue 24 #6: an exporter whose histogram `_count` is 3x its `+Inf` bucket stayed healthy with
// E[S] 16.7 ms instead of 50 ms and λ 59.9 instead of 19.9 (3x under-priced). `_count` must equal
// the +Inf bucket within a scrape's race (1 %, at least 1: agent/src/inference/estimator.ts
// inconsistentHistogram), else the scrape is rejected: the instance is unhealthy with the reason
// and the last good values are kept. Real exposition parser, vLLM mapping, estimator, record.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { InstanceEstimator } from '../../agent/src/inference/estimator';
import { extractSignals, resolveMappings } from '../../agent/src/inference/mappings';
import { parseExposition } from '../../agent/src/inference/exposition';
import { buildInstanceRecord } from '../../agent/src/inference/collector';

/** A vLLM page: `n` requests of 50 ms each completed (e2e histogram), `_count` as given. */
function page(n: number, count: number) {
  const text = [
    '# TYPE vllm:num_requests_waiting gauge', 'vllm:num_requests_waiting{model_name="m"} 0',
    '# TYPE vllm:num_requests_running gauge', 'vllm:num_requests_running{model_name="m"} 1',
    '# TYPE vllm:e2e_request_latency_seconds histogram',
    `vllm:e2e_request_latency_seconds_bucket{le="0.025",model_name="m"} 0`,
    `vllm:e2e_request_latency_seconds_bucket{le="0.05",model_name="m"} ${n}`,
    `vllm:e2e_request_latency_seconds_bucket{le="0.1",model_name="m"} ${n}`,
    `vllm:e2e_request_latency_seconds_bucket{le="+Inf",model_name="m"} ${n}`,
    `vllm:e2e_request_latency_seconds_count{model_name="m"} ${count}`,
    `vllm:e2e_request_latency_seconds_sum{model_name="m"} ${(n * 0.05).toFixed(3)}`,
  ].join('\n');
  return extractSignals(parseExposition(text + '\n'), resolveMappings('vllm'));
}

const recordOf = (st: ReturnType<InstanceEstimator['observe']>) =>
  buildInstanceRecord({ service: 'llm', addr: '10.0.0.1:80', peer: '', reason: 'ok', state: st, imputed: () => ({ es: NaN, es2: NaN }), baselineMs: NaN, lastOkAt: 0, now: 0, concurrency: undefined }).record;

test('issue 24 #6: _count 3x the +Inf bucket -> scrape rejected, unhealthy with the reason, never 3x cheaper', () => {
  const e = new InstanceEstimator({ windowMs: 10_000 });
  e.observe(0, page(1000, 1000));
  const good = e.observe(1000, page(1020, 1020)); // 20/s of 50 ms
  assert.equal(good.invalid, undefined);
  assert.ok(Math.abs(good.esMs - 50) < 1, `E[S] ${good.esMs}`);
  const st = e.observe(2000, page(1040, 3 * 1040));
  assert.match(st.invalid ?? '', /_count 3120 differs from its \+Inf bucket 1040.*inconsistent histogram/);
  const r = recordOf(st);
  assert.equal(r.healthy, false);
  assert.equal(r.reason, 'parse_error');
  assert.ok(!(r.esMs < good.esMs * 0.99), `E[S] ${r.esMs} after the broken page (good ${good.esMs})`);
  assert.ok(!(r.lambdaPerS > good.lambdaPerS * 1.01), `λ ${r.lambdaPerS} after the broken page (good ${good.lambdaPerS})`);
  // an exporter that is broken on every scrape stays unhealthy
  const again = e.observe(3000, page(1060, 3 * 1060));
  assert.equal(recordOf(again).healthy, false);
});

test('issue 24 #6: the tolerance: within 1 % (a scrape\'s race) accepted, beyond it refused, also below +Inf', () => {
  for (const [count, ok] of [[1040, true], [1050, true], [1051, false], [1030, true], [1029, false], [0, false]] as const) {
    const e = new InstanceEstimator({ windowMs: 10_000 });
    e.observe(0, page(1000, 1000));
    const st = e.observe(1000, page(1040, count));
    assert.equal(st.invalid === undefined, ok, `_count ${count} vs +Inf 1040: ${st.invalid}`);
  }
  // small histograms: a difference of 1 is a race
  const e = new InstanceEstimator({ windowMs: 10_000 });
  assert.equal(e.observe(0, page(3, 4)).invalid, undefined);
  assert.match(e.observe(1000, page(3, 5)).invalid ?? '', /inconsistent histogram/);
});
