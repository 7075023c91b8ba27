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

/** A snapshot of one agent boot, dated `offsetMs` from now. */
function stamped(bootId: number, seqNo: number, state: 'normal' | 'degraded', offsetMs = 0): Buffer {
  const at = Date.now() + offsetMs;
  return encodeSnapshot({ seq: seqNo, generatedAtMs: at, bootId, peers: [{ name: 'cloud-b', state, lastRttMs: 12, avgRttMs: 12, recoverStreak: 10, lastSampleAtMs: at }] });
}

const YEAR_MS = 365 * 24 * 3600 * 1000;

test('a snapshot dated +1 year is refused: fresh snapshots keep being adopted and a dead agent still gives the fail mode', async () => {
  const boot = 0xa11ce;
  let n = 5_000_000;
  let answer: () => ClusterResponse = () => ({ status: 200, body: stamped(boot, ++n, 'degraded') });
  const host = await startHost(pluginConfig({ agent: { cluster: 'switchyard_agent', pollMs: 10, longPollMs: 0, timeoutMs: 500 } },
    { stalenessMs: 1000, failMode: 'degraded' }), undefined, { clusters: { switchyard_agent: { handler: () => answer() } } });
  try {
    await until(async () => (await statusAll(host)) === 'degraded', 2000, 'first snapshot');
    // the agent's clock jumps a year ahead for one answer, with a higher seq: refused and counted
    const errors = host.metric('switchyard.snapshot.decode_errors') ?? 0;
    const future = stamped(boot, ++n + 1000, 'normal', YEAR_MS);
    answer = () => ({ status: 200, body: future });
    await until(() => (host.metric('switchyard.snapshot.decode_errors') ?? 0) > errors, 2000, 'future-dated snapshot counted');
    assert.equal(await statusAll(host), 'degraded', 'the future-dated "normal" is not adopted');
    assert.ok(host.logs().some((l) => /ahead of this proxy's clock/.test(l.message)), 'the refusal says why');
    // fresh snapshots (seq below the refused one) are adopted at once
    answer = () => ({ status: 200, body: stamped(boot, ++n, 'normal') });
    await until(async () => (await statusAll(host)) === 'normal', 2000, 'fresh normal adopted');
    answer = () => ({ status: 200, body: stamped(boot, ++n, 'degraded') });
    await until(async () => (await statusAll(host)) === 'degraded', 2000, 'fresh degraded adopted after the refused +1 year');
    answer = () => ({ status: 200, body: stamped(boot, ++n, 'normal') });
    await until(async () => (await statusAll(host)) === 'normal', 2000, 'normal again');
    // one more +1 year answer, then the agent goes down: the fail mode comes after stalenessMs
    answer = () => ({ status: 200, body: stamped(boot, ++n + 1000, 'normal', YEAR_MS) });
    await new Promise((r) => setTimeout(r, 100));
    answer = () => ({ status: 503, body: 'agent down' });
    const t0 = Date.now();
    await until(async () => (await statusAll(host)) === 'degraded', 3000, 'fail mode with the agent down');
    assert.ok(Date.now() - t0 < 2500, `fail mode after ${Date.now() - t0} ms`);
    assert.deepEqual(host.failures, [], 'no VM trapped');
  } finally {
    await host.close();
  }
});

test('a restarted agent (new boot id, lower seq, clock 10 minutes earlier) takes over at once; older seqs of one boot are refused', async () => {
  const oldBoot = 0xb001;
  const newBoot = 0xb002;
  const oldSeq = Date.now() * 1000;
  let answer: () => ClusterResponse = () => ({ status: 200, body: stamped(oldBoot, oldSeq, 'degraded') });
  const host = await startHost(pluginConfig({ agent: { cluster: 'switchyard_agent', pollMs: 10, longPollMs: 0, timeoutMs: 500 } },
    { stalenessMs: 60000 }), undefined, { workers: 2, clusters: { switchyard_agent: { handler: () => answer() } } });
  try {
    await until(async () => (await statusAll(host)) === 'degraded', 2000, 'old boot adopted');
    // the new boot's seq starts at its boot time x 1000: 10 minutes earlier than the old one's
    let newSeq = (Date.now() - 600_000) * 1000;
    answer = () => ({ status: 200, body: stamped(newBoot, newSeq, 'normal', -500) });
    await until(async () => (await statusAll(host)) === 'normal', 2000, 'restarted agent adopted on every VM');
    // within the new boot, a lower seq is refused (counted), a higher one adopted
    const errors = host.metric('switchyard.snapshot.decode_errors') ?? 0;
    const older = stamped(newBoot, newSeq - 10, 'degraded');
    answer = () => ({ status: 200, body: older });
    await until(() => (host.metric('switchyard.snapshot.decode_errors') ?? 0) > errors, 2000, 'older seq refused');
    assert.equal(await statusAll(host), 'normal');
    newSeq += 1;
    answer = () => ({ status: 200, body: stamped(newBoot, newSeq, 'degraded') });
    await until(async () => (await statusAll(host)) === 'degraded', 2000, 'next seq of the new boot adopted');
    assert.deepEqual(host.failures, [], 'no VM trapped');
  } finally {
    await host.close();
  }
});
