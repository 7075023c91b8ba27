// LLM signal edges: windows without the counts a term needs stay unknown (never 0 or Infinity),
// the LoRA gauge's adapter lists, the older per-token series, the window's minimum of requests.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseExposition } from '../../agent/src/inference/exposition';
import { extractLlmSignals, LlmTermEstimator, loraInfo, type LlmSignals } from '../../agent/src/inference/llm';

const close = (a: number, b: number): void => assert.ok(Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(b)), `${a} != ${b}`);

/** cumulative signals after n requests of P prompt tokens, prefill f ms (TTFT - queue), queue q ms */
const cum = (n: number, promptPerReq: number, f: number, q: number, withPrefill = false): LlmSignals => ({
  promptTokens: n * promptPerReq,
  ttft: { sumMs: n * (q + f), count: n },
  queueTime: { sumMs: n * q, count: n },
  ...(withPrefill ? { prefillTime: { sumMs: n * f, count: n } } : {}),
});

test('prefill term: unknown while no prompt tokens were counted (not Infinity), and while no first token was (not 0)', () => {
  // first tokens but a prompt-token counter that does not move
  const a = new LlmTermEstimator();
  a.observe(0, cum(0, 100, 10, 5));
  let r = a.observe(1000, { ...cum(20, 100, 10, 5), promptTokens: 0 });
  assert.ok(Number.isNaN(r.prefillMsPerToken), `prefill ${r.prefillMsPerToken}`);
  assert.equal(r.prefillSource, 'none');
  assert.equal(r.prefillRequests, 0);
  // prompt tokens and prefill time but no first token counted (TTFT count steady)
  const b = new LlmTermEstimator();
  b.observe(0, cum(0, 100, 10, 5, true));
  r = b.observe(1000, { ...cum(20, 100, 10, 5, true), ttft: { sumMs: 0, count: 0 } });
  assert.ok(Number.isNaN(r.prefillMsPerToken), `prefill ${r.prefillMsPerToken}`);
  // both present: known, with the requests it rests on
  const c = new LlmTermEstimator();
  c.observe(0, cum(0, 100, 10, 5));
  r = c.observe(1000, cum(20, 100, 10, 5));
  close(r.prefillMsPerToken, 0.1);
  assert.equal(r.prefillRequests, 20);
  assert.equal(r.prefillSource, 'ttft-minus-queue');
});

test('prefill term: TTFT below the queue time reads as no prefill information (the last terms are kept)', () => {
  const e = new LlmTermEstimator();
  e.observe(0, cum(0, 100, 10, 5));
  let r = e.observe(1000, cum(30, 100, 10, 5));
  close(r.prefillMsPerToken, 0.1);
  // a broken window: TTFT sum smaller than the queue sum -> max(0, ...) = 0 -> not used
  const e2 = new LlmTermEstimator();
  e2.observe(0, { promptTokens: 0, ttft: { sumMs: 0, count: 0 }, queueTime: { sumMs: 0, count: 0 } });
  r = e2.observe(1000, { promptTokens: 1000, ttft: { sumMs: 100, count: 10 }, queueTime: { sumMs: 500, count: 10 } });
  assert.ok(Number.isNaN(r.prefillMsPerToken));
  // no queue histogram and no prefill histogram: no source
  const e3 = new LlmTermEstimator();
  e3.observe(0, { promptTokens: 0, ttft: { sumMs: 0, count: 0 } });
  r = e3.observe(1000, { promptTokens: 1000, ttft: { sumMs: 100, count: 10 } });
  assert.ok(Number.isNaN(r.prefillMsPerToken));
  assert.equal(r.prefillSource, 'none');
});

test('decode term: needs a positive inter-token sum and count; decodeTokens counts the gaps', () => {
  const e = new LlmTermEstimator();
  e.observe(0, { itl: { sumMs: 0, count: 0 } });
  let r = e.observe(1000, { itl: { sumMs: 0, count: 40 } });
  assert.ok(Number.isNaN(r.decodeMsPerToken), 'a zero ITL sum is no measurement');
  assert.equal(r.decodeTokens, 0);
  r = e.observe(2000, { itl: { sumMs: 200, count: 80 } });
  close(r.decodeMsPerToken, 200 / 80);
  assert.equal(r.decodeTokens, 80);
  // current() is a copy of the last terms
  const cur = e.current();
  cur.decodeMsPerToken = 1;
  close(e.current().decodeMsPerToken, 2.5);
});

test('window: intervals older than windowS are dropped once the newer ones hold minRequests first tokens', () => {
  const e = new LlmTermEstimator({ windowS: 2, minRequests: 10 });
  e.observe(0, cum(0, 100, 10, 0));
  e.observe(1000, cum(10, 100, 10, 0)); // 10 requests of 0.1 ms/token
  // later requests with a 0.3 ms/token prefill, 10 per second
  let n = 10;
  let ms = 10 * 10;
  const at = (t: number, k: number): ReturnType<LlmTermEstimator['observe']> => {
    n += k;
    ms += k * 30;
    return e.observe(t, { promptTokens: n * 100, ttft: { sumMs: ms, count: n }, queueTime: { sumMs: 0, count: n } });
  };
  let r = at(2000, 5); // window [0, 2 s] holds both: (100 + 150) / 15 per request
  close(r.prefillMsPerToken, 250 / 15 / 100);
  r = at(5000, 10); // the first intervals are > 2 s old and the newest holds 10 first tokens
  close(r.prefillMsPerToken, 0.3);
  // a window with too few requests reaches back: 2 new requests at 60 ms, much later
  n += 2;
  ms += 2 * 60;
  r = e.observe(60_000, { promptTokens: n * 100, ttft: { sumMs: ms, count: n }, queueTime: { sumMs: 0, count: n } });
  close(r.prefillMsPerToken, (300 + 120) / 12 / 100);
});

test('loraInfo: adapter lists split on commas, blanks and empty entries dropped; max_lora not a number is NaN', () => {
  const exp = parseExposition('vllm:lora_requests_info{max_lora="x",running_lora_adapters=" a , b,,",waiting_lora_adapters=","} 5\n');
  assert.deepEqual(loraInfo(exp), { running: ['a', 'b'], waiting: [], maxLora: NaN });
  assert.equal(loraInfo(parseExposition('up 1\n')), undefined);
  const noLists = parseExposition('vllm:lora_requests_info{max_lora="4"} 5\n');
  assert.deepEqual(loraInfo(noLists), { running: [], waiting: [], maxLora: 4 });
});

test('extractLlmSignals: the older time_per_output_token series when inter_token_latency is absent; NaN KV samples skipped', () => {
  const exp = parseExposition(
    [
      '# TYPE vllm:time_per_output_token_seconds histogram',
      'vllm:time_per_output_token_seconds_bucket{le="+Inf"} 40',
      'vllm:time_per_output_token_seconds_sum 0.2',
      'vllm:time_per_output_token_seconds_count 40',
      'vllm:kv_cache_usage_perc{e="0"} NaN',
      'vllm:kv_cache_usage_perc{e="1"} 0.5',
      'vllm:prompt_tokens_total{model_name="a"} 10',
      'vllm:prompt_tokens_total{model_name="b"} 32',
    ].join('\n') + '\n',
  );
  const s = extractLlmSignals(exp);
  assert.deepEqual(s.itl, { sumMs: 200, count: 40 });
  assert.equal(s.kvCacheUsage, 0.5);
  assert.equal(s.promptTokens, 42);
  assert.equal(s.ttft, undefined, 'a histogram with no _sum/_count series is absent');
  const both = parseExposition(
    ['vllm:inter_token_latency_seconds_sum 0.1', 'vllm:inter_token_latency_seconds_count 10', 'vllm:time_per_output_token_seconds_sum 9', 'vllm:time_per_output_token_seconds_count 10'].join('\n') + '\n',
  );
  assert.deepEqual(extractLlmSignals(both).itl, { sumMs: 100, count: 10 });
  // _sum without _count: not a histogram reading
  assert.equal(extractLlmSignals(parseExposition('vllm:inter_token_latency_seconds_sum 0.1\n')).itl, undefined);
});
