// The agent's side of the mesh (docs/mesh.md): per pool (an inference service of one peer),
//   collector   scrapes as in mode local and serves its own filters from its scrapes; for the
//               pools it leads (etcd lease, election.ts) it publishes the pool's records on NATS
//               at every scrape interval, and at once when an instance's health flips;
//   subscriber  serves the records the leaders publish. A pool without a message for
//               fallbackAfterMs, or every pool while NATS is disconnected, is scraped by the agent
//               itself (a local collector, started then); the last received records are served
//               until the local scrapes are warm (their dataAgeMs grows, so the filter's
//               stalenessMs retires them as it would a silent agent). When every pool has had
//               fresh messages for fallbackAfterMs the local scraping stops again.
// Leadership (docs/mesh.md "Leader election"): the leader also publishes a heartbeat per pool on
// <pool subject>.leader every mesh.heartbeatMs. A standby collector that hears none from the
// pool's etcd leader for the takeover window (3 heartbeats), after a NATS flush has shown it
// everything the server had for it, takes the pool over through etcd (election.takeOver: the
// silent leader's key deleted, etcd's order makes the standby the leader) and publishes at once
// from its own hot scrapes -- a crashed, hung or NATS-cut leader is replaced in about the window,
// not the lease TTL + etcd's sweep. Every agent follows one leader per pool (follow.ts): another
// sender's messages are refused until the followed leader has been silent for 2 heartbeats or
// said goodbye, so no subscriber interleaves two leaders' states (nor their in-flight totals).
// Nothing on the request path waits on NATS or etcd: the snapshot publisher reads records() and
// llmRecords(), which only read memory.
import { randomInt } from 'node:crypto';
import * as fs from 'node:fs';
import type { Logger } from 'pino';
import * as promClient from 'prom-client';
import { connect, Events, type NatsConnection, type Subscription } from 'nats';
import type { InstanceRecord } from '../snapshot/codec';
import type { InstanceLlmRecord } from '../snapshot/llm';
import type { InstanceSource } from '../wiring/instances';
import { resolveInferenceConfig, type InferenceConfig } from '../inference/schema';
import { PoolElection, type LeadReason } from './election';
import { followWindowMs, LeaderFollow, takeoverWindowMs } from './follow';
import { decodeHeartbeat, decodePoolMessage, encodeHeartbeat, encodePoolMessage, type PoolMessage } from './message';
import { poolKey, poolSubject, type MeshConfig } from './schema';

export interface MeshDeps {
  registry: promClient.Registry;
  logger: Logger;
  /** starts the agent's own scraping (wiring/instances.ts) */
  startSource(): Promise<InstanceSource | undefined>;
  /** publish a snapshot now: the served records changed */
  onChange(): void;
  now?: () => number;
}

interface Pool {
  key: string;
  peer: string;
  service: string;
  llm: boolean;
  subject: string;
  msg?: PoolMessage;
  receivedAt?: number;
  source: 'mesh' | 'local' | 'none';
  rejected: number;
  lastRejected?: string;
  sub?: Subscription;
  /** <subject>.leader: the leader's heartbeats */
  beatSubject: string;
  beatSub?: Subscription;
  /** the one leader this agent listens to (pool states, in-flight totals) */
  follow: LeaderFollow;
  /** collector: when each sender's last heartbeat came (the leader's silence clock; bounded by the live collectors, pruned) */
  heard: Map<number, number>;
  /** collector, leading: when it last sent a heartbeat (its own silence: suspect() past the follow window) */
  lastBeatAt?: number;
  takingOver: boolean;
}

const U32_MAX = 0xffffffff;

function getOrCreate<T extends promClient.Metric<string>>(reg: promClient.Registry, name: string, make: () => T): T {
  return (reg.getSingleMetric(name) as T | undefined) ?? make();
}

function byServiceAddr(a: { service: string; addr: string }, b: { service: string; addr: string }): number {
  return a.service === b.service ? (a.addr < b.addr ? -1 : a.addr > b.addr ? 1 : 0) : a.service < b.service ? -1 : 1;
}

export class MeshRuntime {
  /** this agent's id on the mesh: the leaderId of the messages it publishes */
  readonly id = randomInt(1, U32_MAX);
  private readonly inference: InferenceConfig;
  private readonly pools: Pool[];
  private readonly now: () => number;
  private nc?: NatsConnection;
  private connected = false;
  private everConnected = false;
  private natsError?: string;
  private election?: PoolElection;
  private local?: InstanceSource;
  private localStarting = false;
  private localSince?: number;
  private allFreshSince?: number;
  private readonly startedAt: number;
  private timers: NodeJS.Timeout[] = [];
  private stopped = false;
  private seq: number;
  private changeTimer?: NodeJS.Timeout;
  private readonly m: {
    connected: promClient.Gauge;
    localScraping: promClient.Gauge;
    pools: promClient.Gauge<'source'>;
    messages: promClient.Counter<'direction' | 'result'>;
    bytes: promClient.Counter<'direction'>;
    leader: promClient.Gauge<'pool'>;
    leaderChanges: promClient.Counter<'pool' | 'reason'>;
    leaderships: promClient.Counter<'pool' | 'reason'>;
    beats: promClient.Counter<'direction' | 'result'>;
  };
  /** when NATS last (re)connected: a standby's silence clock starts no earlier */
  private connectedAt = -Infinity;
  private lastCheckAt?: number;
  private lagUntil = -Infinity;

  constructor(private readonly cfg: MeshConfig, inference: Record<string, unknown> | undefined, private readonly deps: MeshDeps) {
    this.now = deps.now ?? Date.now;
    this.startedAt = this.now();
    this.seq = this.startedAt * 1000;
    this.inference = resolveInferenceConfig(inference ?? {});
    const prefix = cfg.nats?.subjectPrefix ?? 'switchyard.pool';
    this.pools = this.inference.services.map((s) => ({
      key: poolKey(s.peer, s.name), peer: s.peer, service: s.name,
      llm: s.llm ?? (s.kind === 'vllm' || (s.models?.length ?? 0) > 0),
      subject: poolSubject(prefix, s.peer, s.name), source: 'none' as const, rejected: 0,
      beatSubject: `${poolSubject(prefix, s.peer, s.name)}.leader`, follow: new LeaderFollow(cfg.heartbeatMs), heard: new Map<number, number>(), takingOver: false,
    }));
    const reg = deps.registry;
    const r = [reg];
    this.m = {
      connected: getOrCreate(reg, 'switchyard_mesh_nats_connected', () => new promClient.Gauge({ name: 'switchyard_mesh_nats_connected', help: '1 while the agent is connected to NATS.', registers: r })),
      localScraping: getOrCreate(reg, 'switchyard_mesh_local_scraping', () => new promClient.Gauge({ name: 'switchyard_mesh_local_scraping', help: '1 while the agent scrapes the instances itself (always on a collector; on a subscriber: the mesh is unavailable, fallback).', registers: r })),
      pools: getOrCreate(reg, 'switchyard_mesh_pools', () => new promClient.Gauge({ name: 'switchyard_mesh_pools', help: 'Pools by the source of the records served (mesh: the leader\'s messages, local: own scrapes, none: nothing yet).', labelNames: ['source'], registers: r })),
      messages: getOrCreate(reg, 'switchyard_mesh_messages_total', () => new promClient.Counter({ name: 'switchyard_mesh_messages_total', help: 'Pool messages published or received, by result (ok, rejected: malformed or of another pool, old: an older seq of the same leader).', labelNames: ['direction', 'result'], registers: r })),
      bytes: getOrCreate(reg, 'switchyard_mesh_message_bytes_total', () => new promClient.Counter({ name: 'switchyard_mesh_message_bytes_total', help: 'Bytes of pool messages published or received.', labelNames: ['direction'], registers: r })),
      leader: getOrCreate(reg, 'switchyard_mesh_leader', () => new promClient.Gauge({ name: 'switchyard_mesh_leader', help: '1 while this collector leads the pool (publishes it).', labelNames: ['pool'], registers: r })),
      leaderChanges: getOrCreate(reg, 'switchyard_mesh_leader_changes_total', () => new promClient.Counter({ name: 'switchyard_mesh_leader_changes_total', help: 'The leader this agent follows for the pool changed (a failover), by reason: silence (the old one silent for 2 heartbeats) or resigned (its goodbye at a graceful stop).', labelNames: ['pool', 'reason'], registers: r })),
      leaderships: getOrCreate(reg, 'switchyard_mesh_leaderships_total', () => new promClient.Counter({ name: 'switchyard_mesh_leaderships_total', help: 'Collector: leaderships of the pool begun, by reason: etcd (its key became the oldest: first campaign, the old lease expired or was revoked) or silence (it took over a leader silent for 3 heartbeats).', labelNames: ['pool', 'reason'], registers: r })),
      beats: getOrCreate(reg, 'switchyard_mesh_heartbeats_total', () => new promClient.Counter({ name: 'switchyard_mesh_heartbeats_total', help: 'Leader heartbeats published or received, by result (ok, rejected: malformed, not_leader: a sender other than the followed leader, refused).', labelNames: ['direction', 'result'], registers: r })),
    };
    for (const d of ['published', 'received']) {
      this.m.bytes.inc({ direction: d }, 0);
      for (const res of ['ok', 'rejected', 'old', 'not_leader']) this.m.messages.inc({ direction: d, result: res }, 0);
    }
  }

  get mode(): 'collector' | 'subscriber' {
    return this.cfg.mode === 'collector' ? 'collector' : 'subscriber';
  }

  /** Whether this collector leads the pool now (`_/llm`; the mesh in-flight exchange's leader mode follows it). */
  isLeader(pool: string): boolean {
    if (this.stopped || this.paused || !(this.election?.isLeader(pool) ?? false)) return false;
    // and only while its own heartbeat is current: a leader that was silent (paused, NATS lost)
    // publishes nothing -- neither pool states nor in-flight totals -- until beat() has asked etcd
    const p = this.pools.find((x) => x.key === pool);
    return p?.lastBeatAt !== undefined && this.now() - p.lastBeatAt < followWindowMs(this.cfg.heartbeatMs);
  }

  private paused = false;
  /**
   * Tests: a hung collector -- alive in etcd (its keepalives go on) but silent on NATS: no
   * heartbeat, no pool state, no takeover check while paused; resumed, it carries on from where
   * it stopped, as a process whose event loop was stalled would.
   */
  pauseForTest(paused: boolean): void {
    this.paused = paused;
  }

  /**
   * The mesh id of the leader this agent follows for the pool (its pool states and in-flight
   * totals are the only ones taken; undefined: none heard yet).
   */
  leaderOf(pool: string): number | undefined {
    return this.pools.find((p) => p.key === pool)?.follow.id;
  }

  /** The NATS connection while connected (the mesh in-flight exchange shares it), else undefined. */
  natsConnection(): NatsConnection | undefined {
    return this.connected && !this.stopped ? this.nc : undefined;
  }

  async start(): Promise<void> {
    if (this.mode === 'collector') {
      await this.startLocal();
      const e = this.cfg.etcd!;
      this.election = new PoolElection({ endpoints: e.endpoints, prefix: e.prefix, leaseTtlS: e.leaseTtlS, dialTimeoutMs: e.dialTimeoutMs, id: this.id, now: this.now });
      this.election.on('leader', (pool, leading, reason) => {
        this.m.leader.set({ pool }, leading ? 1 : 0);
        this.deps.logger.info({ pool, leading, reason, id: this.id }, leading ? 'mesh: leading the pool' : 'mesh: no longer leading the pool');
        const p = this.pools.find((x) => x.key === pool);
        if (leading) this.m.leaderships.inc({ pool, reason });
        if (leading && p) { this.beat(p); this.publishPool(p); }
        if (!leading && p) p.lastBeatAt = undefined;
      });
      this.election.on('error', (err) => this.deps.logger.warn({ err: err.message }, 'mesh: etcd election'));
      this.election.start(this.pools.map((p) => p.key));
      this.every(this.inference.scrapeIntervalMs, () => { for (const p of this.pools) this.publishPool(p); });
      this.every(this.cfg.heartbeatMs, () => { for (const p of this.pools) this.beat(p); });
      // the standby's silence check, a quarter heartbeat apart (the takeover lands within that of the window)
      this.every(Math.max(5, Math.floor(this.cfg.heartbeatMs / 4)), () => this.watchLeaders());
    }
    this.connectNats();
    this.every(Math.max(25, Math.min(250, Math.floor(this.cfg.fallbackAfterMs / 8))), () => this.housekeep());
    this.housekeep();
  }

  private every(ms: number, fn: () => void): void {
    const t = setInterval(fn, ms);
    t.unref?.();
    this.timers.push(t);
  }

  private connectNats(): void {
    const n = this.cfg.nats!;
    let token: string | undefined;
    try {
      token = n.tokenFile ? fs.readFileSync(n.tokenFile, 'utf8').trim() : undefined;
    } catch (err) {
      this.natsError = `nats.tokenFile: ${(err as Error).message}`;
    }
    connect({
      servers: n.servers, name: `switchyard-agent-${this.mode}-${this.id}`, token,
      tls: n.tls ? { caFile: n.tls.caFile, certFile: n.tls.certFile, keyFile: n.tls.keyFile } : undefined,
      reconnect: true, maxReconnectAttempts: -1, waitOnFirstConnect: true,
      reconnectTimeWait: n.reconnectWaitMs, reconnectJitter: Math.floor(n.reconnectWaitMs / 2),
      pingInterval: n.pingIntervalMs, maxPingOut: 2, timeout: 1000,
    }).then((nc) => {
      if (this.stopped) { void nc.close(); return; }
      this.nc = nc;
      this.setConnected(true);
      for (const p of this.pools) p.beatSub = nc.subscribe(p.beatSubject, { callback: (err, msg) => { if (!err) this.onHeartbeat(p, msg.data); } });
      if (this.mode === 'subscriber') {
        for (const p of this.pools) p.sub = nc.subscribe(p.subject, { callback: (err, msg) => { if (!err) this.onMessage(p, msg.data); } });
      }
      void (async () => {
        for await (const s of nc.status()) {
          if (s.type === Events.Disconnect) { this.natsError = `disconnected from ${String(s.data)}`; this.setConnected(false); }
          else if (s.type === Events.Reconnect) this.setConnected(true);
          else if (s.type === Events.Error) this.natsError = String(s.data);
        }
      })().catch(() => undefined);
      void nc.closed().then(() => this.setConnected(false));
    }).catch((err: Error) => {
      this.natsError = err.message;
      this.deps.logger.warn({ err: err.message }, 'mesh: NATS connection failed');
    });
  }

  private setConnected(c: boolean): void {
    if (c === this.connected) return;
    this.connected = c;
    if (c) { this.everConnected = true; this.natsError = undefined; this.connectedAt = this.now(); }
    this.m.connected.set(c ? 1 : 0);
    this.deps.logger[c ? 'info' : 'warn']({ mode: this.mode }, c ? 'mesh: NATS connected' : 'mesh: NATS disconnected');
    this.housekeep();
  }

  // ------------------------------------------------------------ collector

  private poolRecords(p: Pool, src: InstanceSource): { instances: InstanceRecord[]; llm?: InstanceLlmRecord[] } {
    const instances = src.records().filter((r) => r.service === p.service && r.peer === p.peer);
    if (!p.llm) return { instances };
    const addrs = new Set(instances.map((r) => r.addr));
    return { instances, llm: (src.llmRecords?.() ?? []).filter((l) => l.service === p.service && addrs.has(l.addr)) };
  }

  /** nothing is published while disconnected: a late pool state is worth nothing, the next scrape replaces it */
  private publishPool(p: Pool | undefined): void {
    if (!p || !this.nc || !this.connected || !this.local || !this.isLeader(p.key)) return;
    const { instances, llm } = this.poolRecords(p, this.local);
    let data: Buffer;
    try {
      data = encodePoolMessage({ leaderId: this.id, seq: ++this.seq, generatedAtMs: this.now(), peer: p.peer, service: p.service, instances, llm });
    } catch (err) {
      this.m.messages.inc({ direction: 'published', result: 'rejected' });
      this.deps.logger.warn({ pool: p.key, err: (err as Error).message }, 'mesh: pool message not encodable');
      return;
    }
    try {
      this.nc.publish(p.subject, data);
      this.m.messages.inc({ direction: 'published', result: 'ok' });
      this.m.bytes.inc({ direction: 'published' }, data.length);
    } catch (err) {
      this.natsError = (err as Error).message;
    }
  }

  /** the leader's heartbeat of a pool (every heartbeatMs while it leads); a leader late by the follow window suspects it was replaced */
  private beat(p: Pool, resigned = false): void {
    if (!this.nc || !this.connected || !this.election || this.paused) return;
    const now = this.now();
    if (!resigned) {
      if (!this.election.isLeader(p.key)) return;
      // silent for the follow window itself (event loop paused, NATS lost): a standby may hold the
      // pool now; nothing more is published until etcd confirms (no two leaders talking)
      if (p.lastBeatAt !== undefined && now - p.lastBeatAt >= followWindowMs(this.cfg.heartbeatMs)) {
        p.lastBeatAt = undefined;
        this.election.suspect(p.key);
        return;
      }
    }
    try {
      this.nc.publish(p.beatSubject, encodeHeartbeat({ leaderId: this.id, heartbeatMs: this.cfg.heartbeatMs, resigned }));
      this.m.beats.inc({ direction: 'published', result: 'ok' });
      p.lastBeatAt = now;
    } catch (err) {
      this.natsError = (err as Error).message;
    }
  }

  private onHeartbeat(p: Pool, data: Uint8Array): void {
    let hb;
    try {
      hb = decodeHeartbeat(data);
    } catch {
      this.m.beats.inc({ direction: 'received', result: 'rejected' });
      return;
    }
    const now = this.now();
    if (this.mode === 'collector') p.heard.set(hb.leaderId, now); // pruned by watchLeaders
    // a leader that hears another leader of its pool re-reads etcd before it publishes again
    if (hb.leaderId !== this.id && this.election?.isLeader(p.key)) this.election.suspect(p.key);
    const r = this.follow(p, hb.leaderId, now, hb);
    this.m.beats.inc({ direction: 'received', result: r === 'not_leader' ? 'not_leader' : 'ok' });
  }

  /** every agent: the followed leader of the pool hears a message of `sender` (follow.ts) */
  private follow(p: Pool, sender: number, now: number, beat?: { heartbeatMs: number; resigned: boolean }): ReturnType<LeaderFollow['hear']> {
    const before = p.follow.id;
    const r = p.follow.hear(sender, now, beat);
    if (r === 'switched' && before !== undefined) {
      this.m.leaderChanges.inc({ pool: p.key, reason: p.follow.reason ?? 'silence' });
      this.deps.logger.info({ pool: p.key, from: before, to: sender, reason: p.follow.reason }, 'mesh: following a new leader');
    }
    return r;
  }

  /**
   * Standby: a pool whose etcd leader has sent no heartbeat for the takeover window is taken over.
   * The window counts from the last heartbeat heard, and no earlier than this collector learned of
   * that leader or (re)connected to NATS. Before deciding, a NATS flush (PING/PONG) shows every
   * message the server had for us -- an event loop that was late has not read them yet -- and
   * proves our own link; a check that itself ran late waits a heartbeat (the leader's timer was
   * as late as ours if we share a machine).
   */
  private watchLeaders(): void {
    const now = this.now();
    const period = Math.max(5, Math.floor(this.cfg.heartbeatMs / 4));
    if (this.lastCheckAt !== undefined && now - this.lastCheckAt > period + this.cfg.heartbeatMs / 2) this.lagUntil = now + this.cfg.heartbeatMs;
    this.lastCheckAt = now;
    if (this.stopped || this.paused || !this.nc || !this.connected || !this.election || now < this.lagUntil) return;
    const window = takeoverWindowMs(this.cfg.heartbeatMs);
    for (const p of this.pools) {
      for (const [id, at] of p.heard) if (now - at > 10 * window) p.heard.delete(id);
      if (p.takingOver || this.election.isLeader(p.key)) continue;
      const lead = this.election.leaderOf(p.key);
      if (lead.id === undefined || lead.id === this.id) continue;
      // after its own (re)connection a standby gives the leader a reconnection wait more (with its
      // jitter): an outage of the server cut both, and the leader may reconnect a little later
      const silentSince = (): number => Math.max(p.heard.get(lead.id!) ?? -Infinity, lead.since, this.connectedAt + 1.5 * this.cfg.nats!.reconnectWaitMs);
      if (now - silentSince() < window) continue;
      p.takingOver = true;
      const nc = this.nc;
      void (async () => {
        try {
          const flushed = await Promise.race([nc.flush().then(() => true, () => false), new Promise<boolean>((r) => setTimeout(() => r(false), this.cfg.heartbeatMs).unref?.())]);
          const t = this.now();
          if (!flushed || this.stopped || !this.connected || t < this.lagUntil || t - silentSince() < window) return;
          if (await this.election!.takeOver(p.key, lead.id!)) {
            this.deps.logger.warn({ pool: p.key, silent: lead.id, silentMs: Math.round(t - silentSince()), id: this.id }, 'mesh: took the pool over from a silent leader');
          }
        } finally {
          p.takingOver = false;
        }
      })();
    }
  }

  // ------------------------------------------------------------ subscriber

  private onMessage(p: Pool, data: Uint8Array): void {
    this.m.bytes.inc({ direction: 'received' }, data.length);
    let msg: PoolMessage;
    try {
      msg = decodePoolMessage(data, p.peer, p.service);
    } catch (err) {
      p.rejected++;
      p.lastRejected = (err as Error).message;
      this.m.messages.inc({ direction: 'received', result: 'rejected' });
      return; // the last good message stays in force
    }
    const prev = p.msg;
    if (prev && prev.leaderId === msg.leaderId && msg.seq <= prev.seq) {
      this.m.messages.inc({ direction: 'received', result: 'old' });
      return;
    }
    // one leader at a time: another sender's state is refused while the followed leader talks
    if (this.follow(p, msg.leaderId, this.now()) === 'not_leader') {
      this.m.messages.inc({ direction: 'received', result: 'not_leader' });
      return;
    }
    this.m.messages.inc({ direction: 'received', result: 'ok' });
    p.msg = msg;
    p.receivedAt = this.now();
    if (p.source === 'mesh') this.changed();
    else this.housekeep();
  }

  /** coalesce the messages of many pools into one snapshot publication */
  private changed(): void {
    if (this.changeTimer) return;
    this.changeTimer = setTimeout(() => {
      this.changeTimer = undefined;
      if (!this.stopped) this.deps.onChange();
    }, 10);
    this.changeTimer.unref?.();
  }

  private fresh(p: Pool, now: number): boolean {
    return this.connected && p.receivedAt !== undefined && now - p.receivedAt <= this.cfg.fallbackAfterMs;
  }

  /** the pool has no working mesh feed: no message for fallbackAfterMs (from start, if none yet), or NATS lost */
  private unavailable(p: Pool, now: number): boolean {
    if (this.everConnected && !this.connected) return true;
    return now - (p.receivedAt ?? this.startedAt) > this.cfg.fallbackAfterMs;
  }

  /**
   * The local scrapes replace the last message once they have something to say about every
   * instance (past no_data: two good scrapes, or a failure), or once that message is older than the
   * scrapes' own staleAfterMs (it would be retired as stale anyway).
   */
  private localWarm(p: Pool, now: number): boolean {
    if (!this.local) return false;
    if (p.receivedAt === undefined || now - p.receivedAt > this.inference.staleAfterMs) return true;
    const recs = this.local.records().filter((r) => r.service === p.service && r.peer === p.peer);
    return recs.length > 0 && recs.every((r) => r.reason !== 'no_data');
  }

  private housekeep(): void {
    if (this.stopped) return;
    const now = this.now();
    let changed = false;
    const counts = { mesh: 0, local: 0, none: 0 };
    if (this.mode === 'collector') {
      for (const p of this.pools) { p.source = 'local'; counts.local++; }
    } else {
      const wantLocal = this.pools.some((p) => this.unavailable(p, now));
      if (wantLocal && !this.local) void this.startLocal();
      const allFresh = this.pools.every((p) => this.fresh(p, now));
      this.allFreshSince = allFresh ? (this.allFreshSince ?? now) : undefined;
      if (this.local && !this.localStarting && this.allFreshSince !== undefined && now - this.allFreshSince >= this.cfg.fallbackAfterMs) void this.stopLocal();
      for (const p of this.pools) {
        let src: Pool['source'];
        if (this.fresh(p, now) && !(this.everConnected && !this.connected)) src = 'mesh';
        else if (this.local && (this.localWarm(p, now) || !p.msg)) src = 'local';
        else src = p.msg ? 'mesh' : 'none';
        if (src !== p.source) {
          this.deps.logger.info({ pool: p.key, from: p.source, to: src }, 'mesh: pool source');
          p.source = src;
          changed = true;
        }
        counts[src]++;
      }
    }
    for (const s of ['mesh', 'local', 'none'] as const) this.m.pools.set({ source: s }, counts[s]);
    if (changed) this.changed();
  }

  private async startLocal(): Promise<void> {
    if (this.local || this.localStarting) return;
    this.localStarting = true;
    try {
      this.local = await this.deps.startSource();
      this.localSince = this.now();
      this.m.localScraping.set(this.local ? 1 : 0);
      if (this.mode === 'subscriber') this.deps.logger.warn({}, 'mesh: unavailable, scraping the instances itself');
    } finally {
      this.localStarting = false;
    }
    if (this.stopped) await this.stopLocal();
  }

  private async stopLocal(): Promise<void> {
    const l = this.local;
    if (!l) return;
    this.local = undefined;
    this.localSince = undefined;
    this.m.localScraping.set(0);
    for (const p of this.pools) if (p.source === 'local') p.source = 'none';
    if (!this.stopped) this.deps.logger.info({}, 'mesh: back, local scraping stopped');
    this.housekeep();
    await l.stop();
  }

  /** a health flip at a local scrape: a collector publishes the pool at once */
  localHealthChanged(): void {
    if (this.mode === 'collector') for (const p of this.pools) this.publishPool(p);
  }

  // ------------------------------------------------------------ served records

  /** INSTANCES records of every pool from its current source, sorted by service then address */
  records(): InstanceRecord[] | undefined {
    if (this.mode === 'collector') return this.local?.records();
    const now = this.now();
    const out: InstanceRecord[] = [];
    for (const p of this.pools) {
      if (p.source === 'local' && this.local) out.push(...this.local.records().filter((r) => r.service === p.service && r.peer === p.peer));
      else if (p.source === 'mesh' && p.msg) {
        const age = now - (p.receivedAt ?? now);
        for (const r of p.msg.instances) out.push({ ...r, dataAgeMs: r.dataAgeMs >= U32_MAX ? U32_MAX : Math.min(U32_MAX, r.dataAgeMs + age) });
      }
    }
    return out.sort(byServiceAddr);
  }

  /** LLM records (undefined when no pool publishes them) */
  llmRecords(): InstanceLlmRecord[] | undefined {
    if (!this.pools.some((p) => p.llm)) return undefined;
    if (this.mode === 'collector') return this.local?.llmRecords?.() ?? [];
    const out: InstanceLlmRecord[] = [];
    for (const p of this.pools) {
      if (!p.llm) continue;
      if (p.source === 'local' && this.local) out.push(...this.poolRecords(p, this.local).llm!);
      else if (p.source === 'mesh' && p.msg) out.push(...(p.msg.llm ?? []));
    }
    return out.sort(byServiceAddr);
  }

  status(): Record<string, unknown> {
    const now = this.now();
    return {
      mode: this.mode,
      id: this.id,
      nats: { connected: this.connected, lastError: this.natsError },
      localScraping: this.local !== undefined,
      fallback: this.mode === 'subscriber' && this.local !== undefined,
      election: this.election?.status(),
      pools: this.pools.map((p) => ({
        pool: p.key, subject: p.subject, source: p.source,
        leaderId: p.msg?.leaderId, seq: p.msg?.seq, messageAgeMs: p.receivedAt === undefined ? undefined : now - p.receivedAt,
        // the leader followed (pool states and in-flight totals taken from it alone), and why
        followed: p.follow.id === undefined ? undefined : { id: p.follow.id, reason: p.follow.reason, sinceMs: now - (p.follow.since ?? now), silentMs: now - p.follow.lastAt },
        leaderChanges: p.follow.changes, rejected: p.rejected, lastRejected: p.lastRejected,
        leading: this.election ? this.isLeader(p.key) : undefined,
        // collector: why it leads (etcd: its key became the oldest; silence: it took over a silent leader)
        leadReason: this.election?.reasonOf(p.key),
      })),
      heartbeatMs: this.cfg.heartbeatMs,
      takeoverWindowMs: takeoverWindowMs(this.cfg.heartbeatMs),
    };
  }

  /** graceful: the lease is revoked (the next collector leads at once) */
  async stop(): Promise<void> {
    await this.end(true);
  }

  /** a crash, for tests: no lease revocation, connections dropped */
  async crash(): Promise<void> {
    await this.end(false);
  }

  private async end(graceful: boolean): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    for (const t of this.timers) clearInterval(t);
    if (this.changeTimer) clearTimeout(this.changeTimer);
    // graceful: a goodbye heartbeat per pool led, so that every agent follows the next leader at once
    if (graceful && this.election) {
      for (const p of this.pools) if (this.election.isLeader(p.key)) this.beat(p, true);
    }
    if (this.election) await (graceful ? this.election.stop() : this.election.abandon());
    const nc = this.nc;
    this.nc = undefined;
    if (nc) {
      // drain only a live connection, and not for long: a reconnecting one would wait for ever
      if (graceful && this.connected) await Promise.race([nc.drain().catch(() => undefined), new Promise((r) => setTimeout(r, 500).unref?.())]);
      // close() of a connection that is reconnecting to a dead server can take until the next
      // attempt fails; the agent's stop does not wait for it
      await Promise.race([nc.close().catch(() => undefined), new Promise((r) => setTimeout(r, 500).unref?.())]);
    }
    await this.stopLocal();
  }
}
