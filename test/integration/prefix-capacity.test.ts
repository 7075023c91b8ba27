// The prefix index sized by the fleet's KV capacity, end to end (docs/benchmarks/llm-r8b.md): the
// real agent scrapes two live LLM simulators of different KV caches (vllm:cache_config_info
// num_gpu_blocks × block_size), publishes each instance's capacity in tokens (section type 6), and
// the real filter in the embedded host re-sizes its index to twice the fleet's capacity in index blocks
// (64-byte blocks at 4 bytes per token: 16 tokens), from the configured size while it is unknown.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { startAgent } from '../../agent/src';
import { decodeSnapshot } from '../../agent/src/snapshot/codec';
import { startLlmSim } from '../inference/llm-sim-helpers';
import { llmAgentConfig, pluginConfig, startHost, until } from './helpers';

const AUTH = 'inference.example';
const GAUGE = 'switchyard.request.prefix_entries.llm';

test('the agent publishes each instance\'s KV capacity and the filter sizes its prefix index to the fleet\'s', async () => {
  const sims = [await startLlmSim(['--model-name', 'llama-3-8b', '--num-blocks', '65536']), await startLlmSim(['--model-name', 'llama-3-8b', '--num-blocks', '32768'])];
  const agent = await startAgent(llmAgentConfig(sims.map((s) => s.addr)) as any, { logger: pino({ level: 'silent' }), defaultMetrics: false });
  const host = await startHost(pluginConfig({
    loadAware: { services: [{ authorities: [AUTH], service: 'llm', request: { allowOnHeadersStopIteration: true } }] },
  }, { services: [] }), agent.port, { workers: 1 });
  try {
    const want = new Map([[sims[0].addr, 65536 * 16], [sims[1].addr, 32768 * 16]]);
    await until(async () => {
      const s = decodeSnapshot(Buffer.from(await (await fetch(`${agent.url}/v1/snapshot`)).arrayBuffer()));
      return (s.llm ?? []).length === 2 && s.llm!.every((l) => l.kvTokens === want.get(l.addr));
    }, 15_000, 'the agent publishes both KV capacities in tokens');
    assert.ok(!decodeSnapshot(Buffer.from(await (await fetch(`${agent.url}/v1/snapshot`)).arrayBuffer())).unknownSections.includes(6));
    const json = await (await fetch(`${agent.url}/v1/snapshot?format=json`)).json() as { llm: Array<{ addr: string; kvTokens?: number }> };
    for (const l of json.llm) assert.equal(l.kvTokens, want.get(l.addr), `${l.addr} in the JSON view`);
    // 65,536 + 32,768 index blocks = 98,304, twice that (8-way sets' headroom) 196,608: the largest
    // power-of-two sets within it, 131,072 entries
    await until(() => host.metric(GAUGE) === 131072, 10_000, `the filter re-sizes its index (gauge ${host.metric(GAUGE)})`);
    assert.equal(host.metric('switchyard.snapshot.decode_errors') ?? 0, 0);
  } finally {
    await host.close();
    await agent.stop();
    for (const s of sims) await s.stop();
  }
});

test('without the capacity in the snapshot the index keeps the configured prefix.entries', async () => {
  const host = await startHost(pluginConfig({
    loadAware: { services: [{ authorities: [AUTH], service: 'llm', request: { allowOnHeadersStopIteration: true, prefix: { entries: 4096 } } }] },
  }, { services: [] }), undefined, { workers: 1 });
  try {
    await until(() => host.metric(GAUGE) !== undefined, 5_000, 'the gauge is defined');
    assert.equal(host.metric(GAUGE), 4096);
  } finally {
    await host.close();
  }
});
