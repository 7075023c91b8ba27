// Issue 24 #7: a /metrics page under the 8 MiB cap with one 100,000-bucket histogram was stored
// whole (every bucket a sample, then grouped, sorted and summed): event-loop lag p99 96 ms, RSS
// 314 MiB, and the instance priced from it. Buckets per family and mapped samples per page are
// bounded (agent/src/inference/exposition.ts); what is dropped is counted
// (switchyard_inference_dropped_samples_total) and the scrape is refused with the reason.
// Long run with lag and RSS: bench/agent-scrape-load.ts --hostile.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Registry } from 'prom-client';
import { ExpositionParser, MAX_BUCKETS_PER_FAMILY, MAX_KEPT_SAMPLES } from '../../agent/src/inference/exposition';
import { extractSignals, mappedSampleFilter, resolveMappings } from '../../agent/src/inference/mappings';
import { InferenceCollector } from '../../agent/src/inference/collector';

function bucketPage(buckets: number, models = 1): string {
  const parts = ['# TYPE vllm:num_requests_running gauge', 'vllm:num_requests_running{model_name="m0"} 3', '# TYPE vllm:e2e_request_latency_seconds histogram'];
  for (let m = 0; m < models; m++) {
    for (let i = 1; i < buckets; i++) parts.push(`vllm:e2e_request_latency_seconds_bucket{le="${(i / 1000).toFixed(3)}",model_name="m${m}"} ${i}`);
    parts.push(`vllm:e2e_request_latency_seconds_bucket{le="+Inf",model_name="m${m}"} ${buckets}`,
      `vllm:e2e_request_latency_seconds_sum{model_name="m${m}"} ${buckets}`, `vllm:e2e_request_latency_seconds_count{model_name="m${m}"} ${buckets}`);
  }
  return parts.join('\n') + '\n';
}

function parse(text: string) {
  const m = resolveMappings('vllm');
  const p = new ExpositionParser({ keep: mappedSampleFilter(m) });
  for (let i = 0; i < text.length; i += 65536) p.push(text.slice(i, i + 65536));
  return { exp: p.end(), m };
}

const stored = (exp: ReturnType<typeof parse>['exp']): number => [...exp.samples.values()].reduce((a, s) => a + s.length, 0);

test('issue 24 #7: a 100,000-bucket histogram is not stored: bounded, counted, refused with the reason', () => {
  const text = bucketPage(100_000);
  assert.ok(text.length < 8 * 1024 * 1024, 'under the shipped 8 MiB cap');
  const { exp, m } = parse(text);
  assert.ok(stored(exp) <= MAX_BUCKETS_PER_FAMILY + 3, `${stored(exp)} samples stored`);
  assert.equal(exp.dropped, 100_000 - MAX_BUCKETS_PER_FAMILY);
  assert.throws(() => extractSignals(exp, m), /histogram vllm:e2e_request_latency_seconds has more than 2048 buckets \(97952 samples dropped\)/);
  // a real ladder (vLLM's, 20 models) is kept whole and priced
  const ok = parse(bucketPage(30, 20));
  assert.equal(ok.exp.dropped, undefined);
  assert.equal(extractSignals(ok.exp, ok.m).latencyHist?.count, 30 * 20);
});

test('issue 24 #7: mapped samples per page are bounded (30,000 series of a mapped gauge)', () => {
  const lines = ['# TYPE vllm:num_requests_waiting gauge'];
  for (let i = 0; i < 30_000; i++) lines.push(`vllm:num_requests_waiting{model_name="m${i}"} 1`);
  const { exp, m } = parse(lines.join('\n') + '\n');
  assert.ok(stored(exp) <= MAX_KEPT_SAMPLES, `${stored(exp)} samples stored`);
  assert.ok((exp.dropped ?? 0) > 0);
  assert.throws(() => extractSignals(exp, m), /more than 20000 mapped samples on the page/);
});

test('issue 24 #7: through the collector: the instance is unhealthy with the reason and the drop is counted', async () => {
  const body = bucketPage(100_000);
  const s = http.createServer((_q, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end(body));
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const addr = `127.0.0.1:${(s.address() as AddressInfo).port}`;
  const registry = new Registry();
  const col = new InferenceCollector({ scrapeIntervalMs: 600_000, scrapeTimeoutMs: 30_000 /* a loaded test machine */, services: [{ name: 'llm', kind: 'vllm', llm: false, fetchModels: false, instances: { static: [addr] } }] }, { registry });
  try {
    await col.start();
    const until = Date.now() + 15_000; // the scrape the start schedules
    while (col.details()[0].scrapesFailed + col.details()[0].scrapesOk === 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    const rec = col.snapshot().find((r) => r.addr === addr)!;
    assert.equal(rec.healthy, false);
    assert.equal(rec.reason, 'parse_error');
    assert.match(col.details()[0].lastError ?? '', /more than 2048 buckets/);
    const dropped = (await registry.getSingleMetric('switchyard_inference_dropped_samples_total')!.get()).values.find((v) => v.labels.service === 'llm');
    assert.ok((dropped?.value ?? 0) >= 1, JSON.stringify(dropped));
    // the rest of a page over a bound is not read: the scraper stopped at the chunk that crossed it
    assert.ok((dropped?.value ?? 0) < 100_000 - MAX_BUCKETS_PER_FAMILY, `stopped reading: ${JSON.stringify(dropped)}`);
  } finally {
    await col.stop();
    s.closeAllConnections();
    await new Promise<void>((r) => s.close(() => r()));
  }
});
