// Issue 11 #5 end to end with real agents: one snapshot source whose clock is a year ahead must
// not pin the workers. Agent A (right clock) says "degraded"; it is replaced by agent F, the same
// CLI with its wall clock +1 year, whose link is healthy ("normal"): the filter refuses every F
// snapshot (counted, logged), the last good one ages out and the fail mode (degraded) applies —
// never "normal". Agent B (right clock, new boot, seq far below F's) then takes over at once, and
// when B stops the fail mode comes back after stalenessMs (before the fix: 120 s with no fail mode).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { startAgent, type AgentHandle } from '../../agent/src';
import { spawnAgent, type SpawnedAgent } from '../../agent/src/spawn';
import { pluginConfig, startHost, statusAll, sleep, until } from '../integration/helpers';

const YEAR_MS = 365 * 24 * 3600 * 1000;

function server(status: number): Promise<http.Server> {
  const s = http.createServer((_req, res) => { res.statusCode = status; res.end(); });
  return new Promise((resolve) => s.listen(0, '127.0.0.1', () => resolve(s)));
}
const port = (s: http.Server): number => (s.address() as AddressInfo).port;

const peerConfig = (probePort: number, initialState: 'normal' | 'degraded') => ({
  name: 'cloud-b', probe: { kind: 'http', url: `http://127.0.0.1:${probePort}/healthz` }, intervalMs: 50, timeoutMs: 1000,
  degradeThresholdMs: 500, degradeAfter: 1, recoverThresholdMs: 400, recoverAfter: 1, initialState,
});

test('issue 11 #5: a real agent with its clock +1 year never pins the workers; a restarted agent takes over at once', async () => {
  const up = await server(200);
  const down = await server(503);
  const probe = await server(200);
  const agentPort = port(probe);
  await new Promise<void>((r) => probe.close(() => r())); // a free port every agent in turn listens on
  const dir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-future-'));
  let a: AgentHandle | undefined;
  let f: SpawnedAgent | undefined;
  let b: AgentHandle | undefined;
  const inProcess = (probePort: number, initial: 'normal' | 'degraded') => startAgent({
    listen: { host: '127.0.0.1', port: agentPort }, publishIntervalMs: 100, link: { peers: [peerConfig(probePort, initial)] },
  } as never, { logger: pino({ level: 'silent' }), defaultMetrics: false });
  const host = await startHost(pluginConfig(), agentPort); // shipped link settings: stalenessMs 1000, failMode degraded
  try {
    a = await inProcess(port(down), 'degraded');
    await until(async () => (host.metric('switchyard.snapshot.updates') ?? 0) > 0 && (await statusAll(host)) === 'degraded', 3000, 'agent A adopted');
    await a.stop();
    a = undefined;

    const cfg = path.join(dir, 'agent.yaml');
    writeFileSync(cfg, JSON.stringify({ listen: { host: '127.0.0.1', port: agentPort }, publishIntervalMs: 100, log: { level: 'info' },
      link: { peers: [peerConfig(port(up), 'normal')] } }));
    const errors = host.metric('switchyard.snapshot.decode_errors') ?? 0;
    f = await spawnAgent({ configPath: cfg, env: { NODE_OPTIONS: `--require ${path.join(__dirname, 'clock-shift.cjs')}`, SWITCHYARD_TEST_CLOCK_OFFSET_MS: String(YEAR_MS) } });
    const seen = new Set<string>();
    const t0 = Date.now();
    while (Date.now() - t0 < 2000) { seen.add(await statusAll(host)); await sleep(25); }
    assert.deepEqual([...seen], ['degraded'], 'the +1 year "normal" was never served');
    assert.ok((host.metric('switchyard.snapshot.decode_errors') ?? 0) > errors, 'F\'s snapshots were refused and counted');
    assert.ok(host.logs().some((l) => /ahead of this proxy's clock/.test(l.message)), 'the refusal says why');
    await f.stop();
    f = undefined;

    b = await inProcess(port(up), 'normal');
    const takeover = await until(async () => (await statusAll(host)) === 'normal', 3000, 'agent B (new boot, lower seq) adopted');
    assert.ok(takeover < 1500, `restarted agent took over after ${takeover.toFixed(0)} ms`);
    await b.stop();
    b = undefined;
    const failMode = await until(async () => (await statusAll(host)) === 'degraded', 4000, 'fail mode with no agent');
    assert.ok(failMode < 2500, `fail mode ${failMode.toFixed(0)} ms after the agent stopped (stalenessMs 1000)`);
    assert.deepEqual(host.failures, []);
  } finally {
    await host.close();
    await a?.stop();
    await f?.stop();
    await b?.stop();
    for (const s of [up, down]) await new Promise<void>((r) => s.close(() => r()));
    rmSync(dir, { recursive: true, force: true });
  }
});
