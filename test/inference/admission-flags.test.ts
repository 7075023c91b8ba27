// What the agent publishes for admission (issue 20, cause 1): whether `slots` is only a floor
// (capacity unknown) and whether the server's own queue keeps growing (evidence for the filter's
// overload state), and that both survive the snapshot's INSTANCES flags (bits 5 and 6).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { InstanceEstimator, QUEUE_GROWTH_SCRAPES } from '../../agent/src/inference/estimator';
import { decodeSnapshot, encodeSnapshot, type InstanceRecord } from '../../agent/src/snapshot/codec';
import { extractLlmSignals, llmSampleFilter } from '../../agent/src/inference/llm';
import { parseExposition } from '../../agent/src/inference/exposition';

function feed(e: InstanceEstimator, seq: Array<[number, number]>, t0 = 0): ReturnType<InstanceEstimator['observe']> {
  let st = e.state();
  seq.forEach(([waiting, running], k) => { st = e.observe(t0 + (k + 1) * 1000, { matched: [], waiting, running, completions: 0, serviceSumMs: 0 }); });
  return st;
}

test('slotsFloor: set until the server has queued (no batch, or only batches seen without a queue); cleared by a queue on consecutive scrapes, or configured slots', () => {
  const e = new InstanceEstimator();
  assert.equal(feed(e, [[0, 0]]).slotsFloor, true);                   // default 1
  assert.equal(feed(e, [[0, 3]], 1000).slotsFloor, true);             // largest batch seen + margin: a floor
  assert.equal(feed(e, [[5, 8]], 2000).slotsFloor, true);             // one scrape's queue: a request between steps, no capacity
  const st = feed(e, [[4, 8]], 3000);                                 // 8 running while a queue stayed over two scrapes: a capacity
  assert.equal(st.slotsFloor, false);
  assert.equal(st.concurrency, 8);
  assert.equal(feed(new InstanceEstimator({ concurrency: 4 }), [[0, 0]]).slotsFloor, false);
});

test(`queueGrowing: the waiting count rose at each of ${QUEUE_GROWTH_SCRAPES} scrapes in a row; a burst that lands at once and drains never sets it`, () => {
  assert.equal(QUEUE_GROWTH_SCRAPES, 2);
  const grow = new InstanceEstimator();
  assert.equal(feed(grow, [[0, 8], [2, 8]]).queueGrowing, false);         // one rise
  assert.equal(feed(grow, [[5, 8]], 2000).queueGrowing, true);            // two
  assert.equal(feed(grow, [[9, 8]], 3000).queueGrowing, true);            // three
  assert.equal(feed(grow, [[9, 8]], 4000).queueGrowing, false);           // flat: over
  const burst = new InstanceEstimator();
  const states = [[0, 0], [500, 8], [470, 8], [430, 8], [380, 8], [300, 8]].map(([w, r], k) =>
    burst.observe((k + 1) * 1000, { matched: [], waiting: w, running: r, completions: 0, serviceSumMs: 0 }).queueGrowing);
  assert.deepEqual(states, [false, false, false, false, false, false]);
});

test('INSTANCES flags bits 5/6 round-trip; documents without them decode as before', () => {
  const base: InstanceRecord = {
    service: 's', addr: '10.0.0.1:80', peer: '', healthy: true, reason: 'ok', rho: 0.1, esMs: 10, es2Ms2: 200, lambdaPerS: 1,
    queueDepth: 0, p50Ms: 1, p99Ms: 2, baselineP99Ms: 2, gpuUtil: NaN, dataAgeMs: 0, slots: 1,
  };
  const doc = decodeSnapshot(encodeSnapshot({ seq: 1, generatedAtMs: 2, peers: [], instances: [
    base, { ...base, addr: '10.0.0.2:80', slotsFloor: true }, { ...base, addr: '10.0.0.3:80', queueGrowing: true },
  ] }));
  const [a, b, c] = doc.instances ?? [];
  assert.equal(a.slotsFloor, undefined);
  assert.equal(a.queueGrowing, undefined);
  assert.equal(b.slotsFloor, true);
  assert.equal(b.queueGrowing, undefined);
  assert.equal(c.queueGrowing, true);
  assert.equal(c.slotsFloor, undefined);
});

test('config info gauges: KV tokens from cache_config_info (else vllm_config_info), the sequence cap from vllm_config_info; malformed labels unknown', () => {
  const page = (lines: string[]): ReturnType<typeof parseExposition> => parseExposition(lines.join('\n') + '\n', { keep: llmSampleFilter });
  const a = extractLlmSignals(page(['vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="24188"} 1.0']));
  assert.equal(a.kvTokens, 24188 * 16);
  assert.equal(a.maxNumSeqs, undefined);
  const b = extractLlmSignals(page(['vllm:vllm_config_info{cache_config_block_size="16",cache_config_num_gpu_blocks="2048",scheduler_config_max_num_seqs="256"} 1.0']));
  assert.equal(b.kvTokens, 2048 * 16);
  assert.equal(b.maxNumSeqs, 256);
  const c = extractLlmSignals(page(['vllm:cache_config_info{block_size="16",num_gpu_blocks="None"} 1.0', 'vllm:vllm_config_info{scheduler_config_max_num_seqs="-3"} 1.0']));
  assert.equal(c.kvTokens, undefined);
  assert.equal(c.maxNumSeqs, undefined);
});

test('queueGrowing is measured in time, not in scrapes: at a 250 ms scrape, 0.5 s of rising queue is noise, 2 s of it is growth', () => {
  const at = (e: InstanceEstimator, t: number, waiting: number) => e.observe(t, { matched: [], waiting, running: 8, completions: 0, serviceSumMs: 0 }).queueGrowing;
  const noise = new InstanceEstimator();
  // a queue wandering around 3: rises at two scrapes in a row (3 -> 4), which counting scrapes called growth
  const seen = [2, 3, 2, 3, 4, 3, 2, 3, 2, 3, 2, 3].map((w, k) => at(noise, 1000 + k * 250, w));
  assert.deepEqual(seen, seen.map(() => false));
  const grow = new InstanceEstimator();
  let last = false;
  for (let k = 0; k <= 12; k++) last = at(grow, 1000 + k * 250, k); // +1 every 250 ms for 3 s
  assert.equal(last, true);
  // the same at the 1 s default: two rises of one step each
  const slow = new InstanceEstimator();
  assert.deepEqual([0, 2, 5].map((w, k) => at(slow, 1000 + k * 1000, w)), [false, false, true]);
});
