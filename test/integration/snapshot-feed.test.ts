// The filter's snapshot feed against a misbehaving agent (an in-process cluster handler that
// answers what the test says): bad answers are rejected and counted, the last good snapshot stays
// in force, nothing traps. Also: a snapshot is decoded once per version per VM.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeSnapshot, type Snapshot } from '../../agent/src/snapshot/codec';
import type { ClusterResponse } from '../../host/src';
import { pluginConfig, startHost, statusAll, until } from './helpers';

let seq = 1000;
function snapshot(state: 'normal' | 'degraded'): Buffer {
  const s: Snapshot = {
    seq: ++seq, generatedAtMs: Date.now(),
    peers: [{ name: 'cloud-b', state, lastRttMs: 12, avgRttMs: 12, recoverStreak: 10, lastSampleAtMs: Date.now() }],
  } as Snapshot;
  return encodeSnapshot(s);
}

test('garbage, truncated, corrupted and oversized answers keep the last good snapshot', async () => {
  const first = snapshot('degraded');
  let answer: () => ClusterResponse = () => ({ status: 200, body: first });
  const host = await startHost(pluginConfig({ agent: { cluster: 'switchyard_agent', pollMs: 10, longPollMs: 0, timeoutMs: 500 } },
    { stalenessMs: 60000 }), undefined, { clusters: { switchyard_agent: { handler: () => answer() } } });
  try {
    await until(async () => (await statusAll(host)) === 'degraded', 2000, 'first snapshot');
    const normal = snapshot('normal');
    answer = () => ({ status: 200, body: normal });
    await until(async () => (await statusAll(host)) === 'normal', 2000, 'good snapshot adopted');
    // every VM (workers and the main-thread VM) picks it up from shared data within a few ticks
    await new Promise((r) => setTimeout(r, 200));
    const updates = host.metric('switchyard.snapshot.updates')!;

    const good = snapshot('degraded');
    const bad: [string, Buffer][] = [
      ['html error page', Buffer.from('<html><body>502 Bad Gateway</body></html>')],
      ['truncated', good.subarray(0, good.length - 7)],
      ['bit flip', Buffer.from(good.map((b, i) => (i === 60 ? b ^ 0x40 : b)))],
      ['empty', Buffer.alloc(0)],
      ['oversized (2 MiB)', Buffer.concat([good, Buffer.alloc(2 * 1024 * 1024)])],
    ];
    for (const [what, body] of bad) {
      const before = host.metric('switchyard.snapshot.decode_errors') ?? 0;
      answer = () => ({ status: 200, body });
      await until(() => (host.metric('switchyard.snapshot.decode_errors') ?? 0) > before, 2000, `${what} counted`);
      assert.equal(await statusAll(host), 'normal', `${what}: the last good snapshot stays`);
    }
    // non-200 answers are poll errors, not decode errors
    const pollErrors = host.metric('switchyard.agent.poll_errors') ?? 0;
    answer = () => ({ status: 503, body: 'agent overloaded' });
    await until(() => (host.metric('switchyard.agent.poll_errors') ?? 0) > pollErrors, 2000, 'poll error counted');
    answer = () => ({ status: 200, reset: true });
    await until(() => (host.metric('switchyard.agent.poll_errors') ?? 0) > pollErrors + 1, 2000, 'reset counted');
    assert.equal(await statusAll(host), 'normal');
    assert.equal(host.metric('switchyard.snapshot.updates'), updates, 'no bad document was adopted');
    assert.deepEqual(host.failures, [], 'no VM trapped');
    // and a good answer is taken again
    const later = snapshot('degraded');
    answer = () => ({ status: 200, body: later });
    await until(async () => (await statusAll(host)) === 'degraded', 2000, 'recovered');
    // one error log line per failure streak, not one per bad answer
    const rejections = host.logs().filter((l) => /rejected agent snapshot/.test(l.message)).length;
    assert.ok(rejections >= 1 && rejections <= bad.length, `rejection log lines: ${rejections}`);
  } finally {
    await host.close();
  }
});

test('each VM decodes a snapshot version once, however often the agent repeats it', async () => {
  const body = snapshot('normal');
  let polls = 0;
  const host = await startHost(pluginConfig({ agent: { cluster: 'switchyard_agent', pollMs: 10, longPollMs: 0, timeoutMs: 500 } }, { stalenessMs: 60000 }),
    undefined, { workers: 2, clusters: { switchyard_agent: { handler: () => { polls++; return { status: 200, body }; } } } });
  try {
    await until(async () => (await statusAll(host)) === 'normal', 2000, 'adopted');
    await until(() => polls > 20, 3000, 'repeated polls');
    // every VM (2 workers, main thread, canary) adopts seq once: never once per poll
    const updates = host.metric('switchyard.snapshot.updates')!;
    assert.ok(updates >= 1 && updates <= host.vms.length, `updates ${updates} for ${polls} polls and ${host.vms.length} VMs`);
  } finally {
    await host.close();
  }
});
