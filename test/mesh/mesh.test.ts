// Pool collectors end to end (docs/mesh.md): a real etcd and a real NATS server on random loopback
// ports, three vLLM simulators, two collector agents and three subscriber agents, each subscriber
// serving the real filter in the embedded host. Shipped mesh and scrape defaults (scrape 1 s,
// fallbackAfterMs 3 s, lease TTL 1 s); etcd runs with --election-timeout 500, as docs/mesh.md asks.
//  1. the pool state reaches every filter, and only the collectors scrape;
//  2. the leader crashes: the standby, hearing no heartbeat for the takeover window (3 x 100 ms),
//     takes the pool over through etcd ahead of the lease expiry and every subscriber is on it
//     within 1 s, once (no flap), and none falls back; a graceful stop hands over within 1 s
//     (the old leader's goodbye: no window to wait); /status and the metrics say why each leads;
//  2b. the leader hangs (alive in etcd, its keepalives going on, silent on NATS): the same
//     takeover within 1 s; resumed, the old leader does not take the pool back (it finds its key
//     taken and queues behind), no subscriber takes its late messages;
//  2c. the leader's NATS link is cut (etcd fine): the same takeover within 1 s; reconnected, it
//     queues behind (no flap);
//  3. NATS dies: every subscriber scrapes itself (status, metrics), filters keep routing; NATS
//     back: the subscribers return to the mesh and stop scraping;
//  4. one subscriber cut off from NATS: it alone scrapes, its filter routes on its own scrapes;
//     when that agent is gone too its filter's data goes stale and the fail mode applies.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { connect } from 'nats';
import { startAgent, type AgentHandle } from '../../agent/src';
import type { ProxyWasmHost } from '../../host/src';
import { header, pluginConfig, sleep, startHost, until } from '../integration/helpers';
import { startCountedInstance, startMeshEtcd, startNats, startRelay, type CountedInstance, type NatsServer, type Relay } from './servers';
import type { EtcdServer } from '../rules/etcd-server';

const AUTH = 'inference.example';
type PoolStatus = { pool: string; source: string; leaderId?: number; leaderChanges: number; messageAgeMs?: number; rejected: number; followed?: { id: number; reason: string }; leading?: boolean; leadReason?: string };
type MeshStatus = { mode: string; id: number; nats: { connected: boolean }; localScraping: boolean; fallback: boolean; election?: { leading: string[]; leaseId?: string }; pools: PoolStatus[]; takeoverWindowMs: number };

let etcd: EtcdServer;
let nats: NatsServer;
let relay: Relay;
let leaderRelay: Relay;
let insts: CountedInstance[];
let collectors: AgentHandle[] = [];
let subs: AgentHandle[] = [];
let hosts: ProxyWasmHost[] = [];
const log = pino({ level: 'silent' });

const mesh = (a: AgentHandle): MeshStatus => a.mesh!.status() as unknown as MeshStatus;
async function statusJson(a: AgentHandle): Promise<MeshStatus> {
  return ((await (await fetch(`${a.url}/status?format=json`)).json()) as { mesh: MeshStatus }).mesh;
}
async function metric(a: AgentHandle, name: string): Promise<number> {
  const text = await (await fetch(`${a.url}/metrics`)).text();
  const m = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : NaN;
}
function agentConfig(mode: 'collector' | 'subscriber', natsUrl: string): Record<string, unknown> {
  return {
    listen: { host: '127.0.0.1', port: 0 },
    link: { peers: [] },
    inference: { services: [{ name: 'llm', kind: 'vllm', fetchModels: false, models: ['llama'], instances: { static: insts.map((i) => i.addr) } }] },
    mesh: { mode, nats: { servers: [natsUrl] }, ...(mode === 'collector' ? { etcd: { endpoints: [etcd.clientUrl] } } : {}) },
  };
}
async function route(h: ProxyWasmHost): Promise<string | undefined> {
  const r = await h.request({ ':method': 'POST', ':path': '/v1/completions', ':authority': AUTH, ':scheme': 'http' });
  assert.equal(r.localReply, undefined);
  return header(r.upstreamHeaders, 'x-switchyard-endpoint')[0];
}
/** every filter routes to a live instance */
async function allRoute(what: string): Promise<void> {
  const addrs = new Set(insts.map((i) => i.addr));
  for (const [k, h] of hosts.entries()) {
    const e = await route(h);
    assert.ok(e !== undefined && addrs.has(e), `${what}: filter ${k} should route to an instance, got ${e}`);
  }
}
function leaderOf(): AgentHandle | undefined {
  return collectors.find((c) => (mesh(c).election?.leading ?? []).includes('_/llm'));
}

before(async () => {
  [etcd, nats] = await Promise.all([startMeshEtcd(), startNats()]);
  relay = await startRelay(nats.port);
  leaderRelay = await startRelay(nats.port);
  insts = await Promise.all([1, 2, 3].map((s) => startCountedInstance(s)));
  for (let i = 0; i < 2; i++) collectors.push(await startAgent(agentConfig('collector', nats.url) as never, { logger: log, defaultMetrics: false }));
  for (let i = 0; i < 3; i++) subs.push(await startAgent(agentConfig('subscriber', i === 2 ? relay.url : nats.url) as never, { logger: log, defaultMetrics: false }));
  for (const s of subs) {
    hosts.push(await startHost(pluginConfig({ loadAware: { services: [{ authorities: [AUTH], service: 'llm', debug: true }] } }, { services: [] }), s.port, { workers: 1 }));
  }
});

/** a step of the teardown that hangs fails the file with its name instead of timing out silently */
async function bounded(what: string, p: Promise<unknown> | undefined): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([p, new Promise((_, rej) => { timer = setTimeout(() => rej(new Error(`teardown: ${what} did not finish within 10 s`)), 10_000); })]).finally(() => clearTimeout(timer));
}

after(async () => {
  for (const [k, h] of hosts.entries()) await bounded(`host ${k}`, h.close());
  for (const [k, a] of subs.entries()) await bounded(`subscriber ${k}`, a.stop());
  for (const [k, a] of collectors.entries()) await bounded(`collector ${k}`, a.stop());
  for (const i of insts ?? []) await bounded('instance', i.stop());
  await bounded('relay', relay?.close());
  await bounded('leader relay', leaderRelay?.close());
  await bounded('nats', nats?.dispose());
  await bounded('etcd', etcd?.dispose());
});

test('the leader\'s pool state reaches every filter; only the two collectors scrape', async () => {
  await until(() => subs.every((s) => {
    const st = mesh(s);
    const recs = s.snapshot().snapshot.instances ?? [];
    // a subscriber that heard nothing for fallbackAfterMs after its start scrapes until the pool has
    // been fresh for fallbackAfterMs (a slow first election on a loaded machine): wait for that too
    return st.pools[0].source === 'mesh' && !st.fallback && recs.length === 3 && recs.every((r) => r.healthy);
  }), 20_000, 'every subscriber serving the healthy pool from the mesh, not scraping');
  const found = leaderOf();
  assert.ok(found, 'one collector leads');
  const leader: AgentHandle = found;
  assert.equal(collectors.filter((c) => (mesh(c).election?.leading ?? []).length > 0).length, 1, 'exactly one leader');
  for (const [k, s] of subs.entries()) {
    const st = await statusJson(s);
    assert.equal(st.mode, 'subscriber');
    assert.equal(st.nats.connected, true);
    assert.equal(st.fallback, false, `subscriber ${k} must not scrape`);
    assert.equal(st.pools[0].leaderId, leader.mesh!.id, `subscriber ${k} serves the leader's messages`);
    // the same records as the leader's own scrapes (dataAgeMs apart), including the LLM section
    const mine = s.snapshot().snapshot;
    const theirs = leader.snapshot().snapshot;
    assert.deepEqual(mine.instances!.map((r) => [r.addr, r.reason, r.slots]), theirs.instances!.map((r) => [r.addr, r.reason, r.slots]));
    assert.deepEqual(mine.llm!.map((l) => [l.addr, l.models.map((m) => m.name)]), insts.map((i) => i.addr).sort().map((a) => [a, ['llama']]));
    assert.equal(await metric(s, 'switchyard_mesh_local_scraping'), 0);
    assert.equal(await metric(s, 'switchyard_mesh_nats_connected'), 1);
  }
  await until(async () => {
    for (const h of hosts) if ((await route(h)) === undefined) return false;
    return true;
  }, 10_000, 'every filter routing on the pool state');
  await allRoute('steady state');
  // a malformed message and another pool's records on the subject: rejected, counted, the last good state kept
  const nc = await connect({ servers: [nats.url] });
  nc.publish('switchyard.pool._.llm', Buffer.from('not a pool message'));
  await nc.flush();
  await nc.close();
  await until(() => subs.every((s) => mesh(s).pools[0].rejected === 1), 3000, 'the malformed message counted by every subscriber');
  for (const s of subs) {
    assert.equal(await metric(s, 'switchyard_mesh_messages_total\\{direction="received",result="rejected"\\}'), 1);
    assert.equal((s.snapshot().snapshot.instances ?? []).filter((r) => r.healthy).length, 3, 'the last good pool state stays in force');
  }
  // scrape load: the two collectors' 1/s each, whatever the number of subscribers
  const before = insts.map((i) => i.scrapes());
  const t0 = performance.now();
  await sleep(3000);
  const secs = (performance.now() - t0) / 1000;
  for (const [k, i] of insts.entries()) {
    const rate = (i.scrapes() - before[k]) / secs;
    assert.ok(rate <= 2 * 1.25 && rate >= 2 * 0.6, `instance ${k}: ${rate.toFixed(2)} scrapes/s, expected ~2 (2 collectors x 1/s; 5 agents in mode local would be 5)`);
  }
});

test('leader crash: the standby takes over by silence within 1 s, once, with no subscriber falling back', async (t) => {
  const old = leaderOf()!;
  const standby = collectors.find((c) => c !== old)!;
  const t0 = performance.now();
  await old.mesh!.crash(); // no lease revocation: the lease would expire only after 1-1.5 s
  await until(() => subs.every((s) => mesh(s).pools[0].leaderId === standby.mesh!.id), 5000, 'every subscriber on the new leader');
  const ms = performance.now() - t0; // from the crash call: its heartbeats stop at once, its connections close within it
  // the takeover window (300 ms after the last heartbeat, <= 100 ms before the crash) + a quarter
  // heartbeat of check + a NATS flush + one etcd transaction and read; the lease expiry (1 s after
  // the last keepalive + etcd's 500 ms sweep) is not waited for
  t.diagnostic(`crash failover ${ms.toFixed(0)} ms`);
  assert.ok(ms <= 1000, `failover took ${ms.toFixed(0)} ms`);
  assert.equal(mesh(standby).takeoverWindowMs, 300, 'shipped: 3 heartbeats of 100 ms');
  // who leads and why: the standby took the silent leader over; the subscribers followed it for
  // the old one's silence (status and metrics)
  const sst = await statusJson(standby);
  assert.deepEqual([sst.pools[0].leading, sst.pools[0].leadReason], [true, 'silence']);
  assert.equal(await metric(standby, 'switchyard_mesh_leaderships_total\\{pool="_/llm",reason="silence"\\}'), 1);
  for (const [k, s] of subs.entries()) {
    const st = await statusJson(s);
    assert.deepEqual(st.pools[0].followed, { ...st.pools[0].followed, id: standby.mesh!.id, reason: 'silence' }, `subscriber ${k} follows the standby for the old leader's silence`);
    assert.equal(await metric(s, 'switchyard_mesh_leader_changes_total\\{pool="_/llm",reason="silence"\\}'), 1);
  }
  // no flap: over three more seconds the new leader stays, no second change, nobody falls back
  for (let t = 0; t < 6; t++) {
    await sleep(500);
    for (const [k, s] of subs.entries()) {
      const st = mesh(s);
      assert.equal(st.pools[0].leaderId, standby.mesh!.id, `subscriber ${k}: leader flapped`);
      assert.equal(st.pools[0].leaderChanges, 1, `subscriber ${k}: exactly one leader change`);
      assert.equal(st.fallback, false, `subscriber ${k} fell back during the failover`);
    }
    await allRoute('after the failover');
  }
  await old.stop();
  // a fresh collector joins behind the current leader, then the leader stops gracefully: handover < 1 s
  collectors = [standby, await startAgent(agentConfig('collector', nats.url) as never, { logger: log, defaultMetrics: false })];
  for (let t = 0; t < 3; t++) {
    await sleep(500);
    for (const [k, s] of subs.entries()) assert.equal(mesh(s).pools[0].leaderId, standby.mesh!.id, `subscriber ${k}: a new collector queues behind the leader (no flap)`);
  }
  const next = collectors[1];
  const t1 = performance.now();
  await standby.stop();
  await until(() => subs.every((s) => mesh(s).pools[0].leaderId === next.mesh!.id), 5000, 'handover after a graceful stop');
  const graceful = performance.now() - t1;
  t.diagnostic(`graceful handover ${graceful.toFixed(0)} ms`);
  assert.ok(graceful <= 1000, `graceful handover took ${graceful.toFixed(0)} ms`);
  // the revoked lease made etcd name the next leader; the subscribers followed it at once on the old one's goodbye
  assert.equal(mesh(next).pools[0].leadReason, 'etcd');
  for (const s of subs) assert.deepEqual([mesh(s).pools[0].followed?.reason, mesh(s).pools[0].leaderChanges], ['resigned', 2]);
  collectors = [next, await startAgent(agentConfig('collector', nats.url) as never, { logger: log, defaultMetrics: false })];
});

test('hung leader (alive in etcd, silent on NATS): the standby takes over within 1 s; resumed, the old leader does not take the pool back', async (t) => {
  const [hung, standby] = collectors;
  // the fresh standby has its key in etcd and hears the leader's heartbeats
  await until(() => mesh(standby).election?.leaseId !== undefined && mesh(standby).nats.connected && mesh(hung).pools[0].leading === true, 10_000, 'a standby queued behind the leader');
  await sleep(1000);
  const changes = subs.map((s) => mesh(s).pools[0].leaderChanges);
  assert.deepEqual(subs.map((s) => mesh(s).pools[0].leaderId), subs.map(() => hung.mesh!.id), 'the subscribers are on the leader');
  const t0 = performance.now();
  hung.mesh!.pauseForTest(true); // its etcd keepalives go on: the lease would never expire
  await until(() => subs.every((s) => mesh(s).pools[0].leaderId === standby.mesh!.id), 5000, 'every subscriber on the standby');
  const ms = performance.now() - t0;
  t.diagnostic(`hung leader failover ${ms.toFixed(0)} ms`);
  assert.ok(ms <= 1000, `failover took ${ms.toFixed(0)} ms`);
  assert.equal(mesh(standby).pools[0].leadReason, 'silence');
  assert.ok(mesh(hung).election!.leaseId !== undefined, 'the hung leader\'s lease is alive: only the silence made the takeover');
  // resumed after 1.5 s: it finds its key taken, queues behind and publishes nothing (no flap)
  await sleep(500);
  hung.mesh!.pauseForTest(false);
  for (let i = 0; i < 6; i++) {
    await sleep(500);
    assert.equal(mesh(hung).pools[0].leading, false, 'the resumed leader does not lead');
    for (const [k, s] of subs.entries()) {
      const st = mesh(s);
      assert.equal(st.pools[0].leaderId, standby.mesh!.id, `subscriber ${k}: leader flapped`);
      assert.equal(st.pools[0].leaderChanges, changes[k] + 1, `subscriber ${k}: exactly one leader change`);
      assert.equal(st.fallback, false, `subscriber ${k} fell back`);
    }
    await allRoute('after the hung leader\'s takeover');
  }
  // it queued behind: a graceful stop of the new leader hands the pool back to it
  const t1 = performance.now();
  await standby.stop();
  await until(() => subs.every((s) => mesh(s).pools[0].leaderId === hung.mesh!.id), 5000, 'the resumed collector leads after the handover');
  t.diagnostic(`graceful handover back to the resumed collector ${(performance.now() - t1).toFixed(0)} ms`);
  collectors = [hung, await startAgent(agentConfig('collector', nats.url) as never, { logger: log, defaultMetrics: false })];
});

test('leader cut off from NATS (etcd fine): the standby takes over within 1 s; reconnected, the old leader queues behind (no flap)', async (t) => {
  // a leader whose NATS link goes through a relay we can cut: stop the two collectors gracefully
  // so that it leads, with a fresh standby behind it
  const cutLeader = await startAgent(agentConfig('collector', leaderRelay.url) as never, { logger: log, defaultMetrics: false });
  await until(() => mesh(cutLeader).election?.leaseId !== undefined && mesh(cutLeader).nats.connected, 10_000, 'the relayed collector queued');
  for (const c of collectors) await c.stop();
  await until(() => subs.every((s) => mesh(s).pools[0].leaderId === cutLeader.mesh!.id), 5000, 'the relayed collector leads');
  const standby = await startAgent(agentConfig('collector', nats.url) as never, { logger: log, defaultMetrics: false });
  collectors = [cutLeader, standby];
  await until(() => mesh(standby).election?.leaseId !== undefined && mesh(standby).nats.connected, 10_000, 'a standby queued');
  await sleep(1000);
  const changes = subs.map((s) => mesh(s).pools[0].leaderChanges);
  const t0 = performance.now();
  leaderRelay.cut(); // the leader's NATS connection drops; its etcd lease lives
  await until(() => subs.every((s) => mesh(s).pools[0].leaderId === standby.mesh!.id), 5000, 'every subscriber on the standby');
  const ms = performance.now() - t0;
  t.diagnostic(`NATS-cut leader failover ${ms.toFixed(0)} ms`);
  assert.ok(ms <= 1000, `failover took ${ms.toFixed(0)} ms`);
  assert.equal(mesh(standby).pools[0].leadReason, 'silence');
  // the link back: the old leader reconnects, finds its key taken, queues behind; nobody flaps
  await sleep(300);
  leaderRelay.restore();
  await until(() => mesh(cutLeader).nats.connected, 5000, 'the old leader reconnected');
  for (let i = 0; i < 6; i++) {
    await sleep(500);
    assert.equal(mesh(cutLeader).pools[0].leading, false, 'the reconnected leader does not lead');
    for (const [k, s] of subs.entries()) {
      const st = mesh(s);
      assert.equal(st.pools[0].leaderId, standby.mesh!.id, `subscriber ${k}: leader flapped`);
      assert.equal(st.pools[0].leaderChanges, changes[k] + 1, `subscriber ${k}: exactly one leader change`);
      assert.equal(st.fallback, false, `subscriber ${k} fell back`);
    }
  }
});

test('NATS down: subscribers scrape themselves and say so; NATS back: they return to the mesh', async () => {
  await nats.kill();
  await until(() => subs.every((s) => mesh(s).fallback && !mesh(s).nats.connected), 5000, 'every subscriber in fallback');
  for (const s of subs) {
    assert.equal(await metric(s, 'switchyard_mesh_local_scraping'), 1);
    assert.equal(await metric(s, 'switchyard_mesh_nats_connected'), 0);
  }
  // the last pool state is served until the own scrapes are warm, then the own scrapes
  await until(() => subs.every((s) => mesh(s).pools[0].source === 'local'), 6000, 'every subscriber serving its own scrapes');
  for (const s of subs) assert.ok((s.snapshot().snapshot.instances ?? []).every((r) => r.healthy), 'own scrapes healthy');
  await allRoute('NATS down');
  await nats.restart();
  await until(() => subs.every((s) => mesh(s).nats.connected && mesh(s).pools[0].source === 'mesh'), 8000, 'every subscriber back on the mesh');
  await allRoute('NATS back');
  // after fallbackAfterMs of fresh messages the local scraping stops
  await until(() => subs.every((s) => !mesh(s).fallback), 8000, 'local scraping stopped');
  for (const s of subs) assert.equal(await metric(s, 'switchyard_mesh_local_scraping'), 0);
});

test('one agent cut off from NATS routes on its own scrapes; when it is gone too its filter applies the fail mode', async () => {
  const cut = subs[2];
  relay.cut();
  await until(() => mesh(cut).fallback && mesh(cut).pools[0].source === 'local', 8000, 'the cut-off agent on its own scrapes');
  assert.equal(mesh(subs[0]).fallback, false, 'the others stay on the mesh');
  assert.equal(mesh(subs[1]).pools[0].source, 'mesh');
  await allRoute('one agent cut off');
  // the agent goes too: its filter's data ages past stalenessMs (5 s) and forward-degraded applies
  await cut.stop();
  const ms = await until(async () => (await route(hosts[2])) === undefined, 12_000, 'the fail mode on stale data', 100);
  assert.ok(ms >= 1000, `the last data stays in force for a while (${ms.toFixed(0)} ms)`);
  assert.ok((await route(hosts[0])) !== undefined, 'the other filters keep routing');
});
