// Cold start and the LLM section end to end: the real agent scrapes two live LLM simulators
// (sim/inference-server.ts --mode llm) that have served nothing yet, publishes E[S] from the
// configured prior (esSource 'prior') and the LLM section; the real filter in the embedded host,
// with allIneligible reject-503, adopts the document (no decode error) and routes to them. After
// one instance has served, the other one is published with the service median.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { startAgent } from '../../agent/src';
import { decodeSnapshot } from '../../agent/src/snapshot/codec';
import { MODEL_BASE } from '../../agent/src/snapshot/llm';
import { complete, startLlmSim } from '../inference/llm-sim-helpers';
import { header, llmAgentConfig, pluginConfig, startHost, until } from './helpers';

const AUTH = 'inference.example';

test('a fresh LLM fleet with allIneligible reject-503 gets traffic (prior E[S]), and the filter adopts the LLM section', async () => {
  const sims = [await startLlmSim(['--model-name', 'llama-3-8b', '--adapters', 'sql-lora:llama-3-8b']), await startLlmSim(['--model-name', 'llama-3-8b', '--adapters', 'sql-lora:llama-3-8b'])];
  const agent = await startAgent(llmAgentConfig(sims.map((s) => s.addr)) as any, { logger: pino({ level: 'silent' }), defaultMetrics: false });
  const host = await startHost(pluginConfig({
    loadAware: { services: [{ authorities: [AUTH], service: 'llm', allIneligible: 'reject-503', debug: true }] },
  }, { services: [] }), agent.port, { workers: 1 });
  try {
    const doc = async () => decodeSnapshot(Buffer.from(await (await fetch(`${agent.url}/v1/snapshot`)).arrayBuffer()));
    await until(async () => {
      const s = await doc();
      return (s.instances ?? []).length === 2 && s.instances!.every((r) => r.healthy) && (s.llm ?? []).every((l) => l.models.length === 2);
    }, 15_000, 'both instances healthy with their model lists');
    const s = await doc();
    for (const r of s.instances!) {
      assert.equal(r.esSource, 'prior', `${r.addr}: no instance has served, so the configured prior`);
      assert.equal(r.esMs, 1000, 'the shipped default priorServiceMs');
      assert.equal(r.reason, 'ok');
    }
    assert.deepEqual(s.llm!.map((l) => l.addr), sims.map((x) => x.addr).sort());
    for (const l of s.llm!) {
      assert.deepEqual(l.models, [{ name: 'llama-3-8b', flags: MODEL_BASE }, { name: 'sql-lora', flags: 0 }]);
      assert.equal(l.kvCacheUsage, 0);
      assert.ok(Number.isNaN(l.kvSeqs), 'no sequence running yet: the KV capacity is unknown');
      assert.ok(Number.isNaN(l.prefillMsPerToken), 'nothing served yet: unknown');
    }
    const json = await (await fetch(`${agent.url}/v1/snapshot?format=json`)).json() as { instances: Array<{ esSource: string }>; llm: unknown[] };
    assert.deepEqual(json.instances.map((i) => i.esSource), ['prior', 'prior']);
    assert.equal(json.llm.length, 2);

    // the filter: adopts the document with the LLM section and routes (reject-503 would answer 503 if nothing were priced)
    let chosen: string[] = [];
    await until(async () => {
      const r = await host.request({ ':method': 'POST', ':path': '/v1/completions', ':authority': AUTH, ':scheme': 'http' });
      chosen = header(r.upstreamHeaders, 'x-switchyard-endpoint');
      return !r.localReply && chosen.length === 1;
    }, 10_000, 'the filter routes to a cold instance');
    assert.ok(sims.some((x) => x.addr === chosen[0]), chosen[0]);
    assert.equal(host.metric('switchyard.snapshot.decode_errors') ?? 0, 0);

    // one instance serves: the other is published with the service median
    for (let i = 0; i < 3; i++) await complete(sims[0].url, 'llama-3-8b', 64, 8, i);
    await until(async () => {
      const d = await doc();
      const a = d.instances!.find((r) => r.addr === sims[0].addr)!;
      const b = d.instances!.find((r) => r.addr === sims[1].addr)!;
      return a.esSource === 'measured' && b.esSource === 'service-median' && Math.fround(b.esMs) === Math.fround(a.esMs);
    }, 15_000, 'measured E[S] on the served instance, the service median on the other');
    const l = (await doc()).llm!.find((x) => x.addr === sims[0].addr)!;
    assert.ok(l.prefillMsPerToken > 0 && l.decodeMsPerToken > 0, `terms learned: ${l.prefillMsPerToken} / ${l.decodeMsPerToken}`);
  } finally {
    await host.close();
    await agent.stop();
    for (const x of sims) await x.stop();
  }
});
