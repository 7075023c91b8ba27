// Mesh-wide in-flight across agents (docs/mesh.md "Mesh-wide in-flight"): every agent publishes
// its own proxies' in-flight sums per pool on NATS and adds the rest of the mesh's into the answers
// it gives its filters (agent/src/mesh/inflight.ts). Nothing per request: at most one message per
// pool per exchangeMs, only when the sums changed (and every agentExpireMs / 3 as a keepalive, so
// a quiet agent is not expired), carrying only the non-zero counts.
//
// inflight.exchange `leader` (default; linear in the agents):
//   every agent  -> <pool subject>.inflight.up     its sums (KIND_AGENT), when changed
//   pool leader  -> <pool subject>.inflight.total  Σ over the agents' last sums (KIND_TOTAL), at
//                   most every exchangeMs, when changed (keepalive agentExpireMs / 3)
//   Only the collectors subscribe to `.up` (each sums as a hot standby), only the one leading the
//   pool (the etcd election, mesh/election.ts) publishes: NATS delivers each agent's message to the
//   collectors alone, and the one total to every agent. An agent's
//   remote counts = the total − its own sums as the leader summed them: per address the least of
//   its messages sent within the last `guard` before the total came and the newest one sent
//   before that -- the leader had that one (guard = 2 × the measured round trip to NATS + 1 ms,
//   nc.rtt() every keepalive; exchangeMs until measured, at most exchangeMs): whichever of them
//   the total holds, the rest of the mesh is never counted short, so never cheaper, and it is
//   counted long only when a message went out within the guard, and then the agent re-sends its
//   sums at its next tick so that the next total settles it (at most OWN_VERSIONS kept). A total
//   delayed beyond the guard (an event loop late by more than 2 round trips) can count the rest
//   short by the agent's own change of that interval, until the next total.
//   Information delay: the agent's coalescing + one hop +
//   the leader's tick + one hop (the DES models exactly that, bench/routing/agent-model.ts).
//   Failure: NATS lost -> the total is dropped at once (answers carry no remote counts: the price
//   without mesh); the leader gone -> no totals -> the last expires agentExpireMs after it came; a
//   new leader publishes at once if it summed as a standby for a keepalive period, else only after
//   one (every live agent has sent it its sums within a keepalive period: a partial total would be
//   cheaper than the truth); an agent takes totals only
//   once its first message since it connected is SETTLE_INTERVALS exchange intervals old (the
//   leader has it: otherwise subtracting its own sums would count the rest short).
// inflight.exchange `all` (N²: a few node agents): every agent subscribes to every other agent's
//   sums on <pool subject>.inflight; an agent ignores its own; another agent's sums expire
//   agentExpireMs after its last message (a crashed agent), a graceful stop says goodbye with an
//   empty message.
//
// Message: the in-flight document (inflight.ts format), proxyId = the sender's mesh id, intervalMs
// = the age (ms) of the counts it sums (their weighted mean; 0 = none stated).
//
// Prefix placements (docs/mesh.md "Prefix placements"): the records this agent's proxies reported
// (inflight.ts onLocalPrefix) go out per pool at most once per exchangeMs, at most prefixRecords
// per message (the rest waits for the next tick; beyond PREFIX_PENDING_FACTOR × that it is
// dropped and counted), as a KIND_PREFIX document (no counts, the prefix trailer):
//   leader mode: every agent -> <pool subject>.inflight.prefix.up; the pool leader merges them and
//     publishes <pool subject>.inflight.prefix once per exchangeMs (bounded the same way): every
//     agent receives one message per pool and interval, whatever the number of agents. An agent's
//     own records come back in it once (its proxies find them known: 1/agents of the relay).
//   all mode: every agent -> <pool subject>.inflight.prefix, every other agent takes it.
// Nothing waits for them: a lost message only costs hits (they are hints; the next placement of
// a prefix is reported again).
import type { NatsConnection, Subscription } from 'nats';
import * as promClient from 'prom-client';
import type { Registry } from 'prom-client';
import { decodeInflight, encodeAgeMs, encodeInflight, KIND_AGENT, KIND_PREFIX, KIND_TOTAL, PREFIX_DEFAULT_RECORDS, type InflightAggregator } from './inflight';
import type { PrefixRecord } from './prefix-records';
import type { InflightConfig } from './inflight-schema';
import { poolSubject } from './schema';

export { KIND_AGENT, KIND_PREFIX, KIND_TOTAL };
/** records waiting to go out (per pool) at most this many messages' worth; older ones are dropped */
export const PREFIX_PENDING_FACTOR = 4;

/** An agent's last messages per pool remembered for the subtraction (leader mode). */
export const OWN_VERSIONS = 3;
/** Exchange intervals after an agent's first message (since it connected) before it takes totals. */
export const SETTLE_INTERVALS = 3;

export interface ExchangeDeps {
  /** the agent's mesh id (MeshRuntime.id) */
  id: number;
  subjectPrefix: string;
  /** the live NATS connection, or undefined while there is none (MeshRuntime.natsConnection) */
  connection: () => NatsConnection | undefined;
  /** the pools (peer, service) of the agent's inference services */
  pools: Array<{ peer: string; service: string }>;
  /** the pool of an instance address (undefined: not an instance of the agent's pools) */
  poolOf: (addr: string) => string | undefined;
  /** leader mode: whether this agent leads the pool (`_/llm`; a collector's election; undefined: never) */
  isLeader?: (pool: string) => boolean;
  /**
   * leader mode: whether this agent may lead the pool (a collector): it then sums the agents' sums
   * as a hot standby, so that it publishes complete totals the moment the election makes it the
   * leader (no warm-up after a failover); undefined: only while leading
   */
  isCandidate?: (pool: string) => boolean;
  /**
   * leader mode: the mesh id of the pool leader this agent follows (MeshRuntime.leaderOf, from the
   * leaders' heartbeats): only its totals are taken, so that a paused old leader's totals never
   * interleave with its successor's; undefined (no leader heard yet, or not given): any total
   */
  leaderOf?: (pool: string) => number | undefined;
  registry?: Registry;
  now?: () => number;
}

const poolKeyOf = (peer: string, service: string): string => `${peer === '' ? '_' : peer}/${service}`;

/** The leader's sum of one pool: every agent's last sums (bounded by maxAgents), their total. */
class LeaderPool {
  readonly agents = new Map<number, { counts: Map<string, number>; expiresAt: number; receivedAt: number; statedAge: number; weight: number }>();
  readonly total = new Map<string, number>();
  dirty = true;
  lastSentAt = -Infinity;
  constructor(readonly since: number) {}

  put(id: number, counts: Map<string, number>, now: number, ageMs: number, expireMs: number): void {
    this.drop(id);
    let weight = 1;
    for (const [a, n] of counts) {
      this.total.set(a, (this.total.get(a) ?? 0) + n);
      weight += n;
    }
    this.agents.set(id, { counts, expiresAt: now + expireMs, receivedAt: now, statedAge: ageMs > 0 ? ageMs : 0, weight });
    this.dirty = true;
  }

  drop(id: number): void {
    const h = this.agents.get(id);
    if (!h) return;
    for (const [a, n] of h.counts) {
      const v = (this.total.get(a) ?? 0) - n;
      if (v > 0) this.total.set(a, v);
      else this.total.delete(a);
    }
    this.agents.delete(id);
    this.dirty = true;
  }

  /**
   * Expired agents out; the weighted mean age of the sums (ms): an agent's stated age plus the time
   * since its message, at most `freshMs` (an agent publishes every change within its exchangeMs:
   * an unchanged sum is not re-sent, and is not older for that).
   */
  sweep(now: number, freshMs: number): number {
    let w = 0;
    let wa = 0;
    for (const [id, h] of this.agents) {
      if (h.expiresAt <= now) { this.drop(id); continue; }
      w += h.weight;
      wa += h.weight * (h.statedAge + Math.min(now - h.receivedAt, freshMs));
    }
    return w > 0 ? wa / w : 0;
  }
}

export class InflightExchange {
  private timer?: NodeJS.Timeout;
  private nc?: NatsConnection;
  private subs: Subscription[] = [];
  private dirty = true;
  private lastSentAt = -Infinity;
  /** when the first message since the connection went out (leader mode: totals are taken after SETTLE_INTERVALS) */
  private firstSentAt?: number;
  /** what was last sent per pool (JSON of the counts): a pool is sent only when it changed */
  private sent = new Map<string, string>();
  /** leader mode: this agent's last OWN_VERSIONS messages per pool and when they went, newest first */
  private ownSent = new Map<string, Array<{ at: number; counts: Map<string, number> }>>();
  /** leader mode: the round trip to NATS (ms, nc.rtt(), smoothed; undefined: not measured yet) */
  private rttMs?: number;
  private rttPending = false;
  private lastRttAt = -Infinity;
  /** leader mode: the pools this agent leads, and their `.up` subscriptions */
  private leading = new Map<string, { sum: LeaderPool; sub: Subscription }>();
  private readonly subjects: Map<string, string>;
  /** leader mode: per pool, the mesh id of the leader whose total was last taken (status) */
  readonly totalFrom = new Map<string, number>();
  /** prefix placements of this agent's proxies waiting to go out, per pool */
  private prefixPending = new Map<string, PrefixRecord[]>();
  /** leader mode: the pools whose agents' placements this agent relays, and what waits */
  private relaying = new Map<string, { sub: Subscription; pending: PrefixRecord[] }>();
  private readonly now: () => number;
  readonly stats = {
    published: 0, received: 0, rejected: 0, own: 0, bytesOut: 0, bytesIn: 0,
    /** leader mode: totals published (as leader) and taken (as agent); agents' sums received as leader */
    totalsPublished: 0, totalsReceived: 0, totalsIgnored: 0, upReceived: 0,
    /** leader mode: totals refused, from a sender other than the followed leader */
    totalsNotLeader: 0,
    /** prefix placements: records published / relayed (leader) / taken / dropped (over the pending bound) */
    prefixOut: 0, prefixRelayed: 0, prefixIn: 0, prefixDropped: 0,
  };
  private readonly m?: { messages: promClient.Counter<'direction' | 'result'>; bytes: promClient.Counter<'direction'> };

  constructor(private readonly agg: InflightAggregator, private readonly cfg: InflightConfig, private readonly deps: ExchangeDeps) {
    this.now = deps.now ?? Date.now;
    this.subjects = new Map(deps.pools.map((p) => [poolKeyOf(p.peer, p.service), `${poolSubject(deps.subjectPrefix, p.peer, p.service)}.inflight`]));
    agg.onLocalChange = () => { this.dirty = true; };
    agg.onLocalPrefix = (records) => {
      const touched = new Set<PrefixRecord[]>();
      for (const r of records) {
        const pool = this.deps.poolOf(r.addr);
        if (pool === undefined || !this.subjects.has(pool)) continue;
        let q = this.prefixPending.get(pool);
        if (!q) this.prefixPending.set(pool, (q = []));
        q.push(r);
        touched.add(q);
      }
      // NATS away: what waits stays bounded (the oldest go first), trimmed once per report
      for (const q of touched) this.trimPending(q);
    };
    // leader mode: without a current total for every pool the rest of the mesh is unknown, and the
    // answers say so (the filters price without mesh in-flight: never cheaper than that)
    if (this.mode === 'leader') agg.remoteKnown = () => this.knowsRemote();
    if (deps.registry) {
      const r = [deps.registry];
      this.m = {
        messages: new promClient.Counter({ name: 'switchyard_inflight_exchange_messages_total', help: 'Mesh in-flight sums exchanged with the other agents over NATS (leader mode: an agent\'s sums to the leader, the leader\'s totals), by direction and result (ok, rejected).', labelNames: ['direction', 'result'], registers: r }),
        bytes: new promClient.Counter({ name: 'switchyard_inflight_exchange_bytes_total', help: 'Bytes of the mesh in-flight sums exchanged over NATS.', labelNames: ['direction'], registers: r }),
      };
      if (this.mode === 'leader') {
        const self = this;
        new promClient.Gauge({
          name: 'switchyard_inflight_remote_known', help: 'Leader exchange: 1 while a current total of every pool is held (0: the answers say "unknown", the filters price without mesh in-flight).', registers: r,
          collect() { this.set(self.knowsRemote() ? 1 : 0); },
        });
      }
    }
  }

  get mode(): 'leader' | 'all' { return this.cfg.exchange ?? 'leader'; }

  /** leader mode: connected, and a total (not expired) of every pool is held */
  knowsRemote(): boolean {
    if (!this.nc || this.deps.connection() !== this.nc) return false;
    this.agg.sweep();
    for (const pool of this.subjects.keys()) if (!this.agg.hasAgent(this.totalKey(pool))) return false;
    return true;
  }

  /** how recent (ms) a message of ours may be and still be missing from a total we receive: 2 round trips to NATS + 1 ms */
  guardMs(): number {
    return this.rttMs === undefined ? this.cfg.exchangeMs : Math.min(this.cfg.exchangeMs, 2 * this.rttMs + 1);
  }

  /** for /status (mesh.inflight): the mode, whether the rest of the mesh is known (leader mode), the pools led, the counters */
  status(): Record<string, unknown> {
    return {
      exchange: this.mode,
      remoteKnown: this.mode === 'leader' ? this.knowsRemote() : undefined,
      leading: this.leadingPools(),
      totalsFrom: this.mode === 'leader' ? Object.fromEntries(this.totalFrom) : undefined,
      rttMs: this.rttMs,
      ...this.stats,
    };
  }

  /** the pools this agent leads the exchange of (leader mode; not the ones it only sums as a standby) */
  leadingPools(): string[] { return [...this.leading.keys()].filter((p) => this.deps.isLeader?.(p) ?? false); }

  start(): void {
    this.timer = setInterval(() => this.tick(), this.cfg.exchangeMs);
    this.timer.unref?.();
  }

  /** every exchangeMs: (re)subscribe on a new connection; publish the pools whose sums changed; lead */
  tick(): void {
    const nc = this.deps.connection();
    if (nc !== this.nc) {
      for (const s of this.subs) s.unsubscribe();
      for (const l of this.leading.values()) l.sub.unsubscribe();
      for (const r of this.relaying.values()) r.sub.unsubscribe();
      this.subs = [];
      this.leading.clear();
      this.relaying.clear();
      this.nc = nc;
      this.sent.clear(); // a new connection: everything goes out again
      this.ownSent.clear();
      this.firstSentAt = undefined;
      this.rttMs = undefined;
      this.lastRttAt = -Infinity;
      this.dirty = true;
      // NATS gone (or a new connection): the remote counts held are no longer known
      for (const pool of this.subjects.keys()) this.agg.dropAgent(this.totalKey(pool));
      if (nc) {
        for (const [pool, subject] of this.subjects) {
          const s = this.mode === 'leader' ? `${subject}.total` : subject;
          this.subs.push(nc.subscribe(s, { callback: (err, msg) => { if (!err) this.onMessage(pool, msg.data); } }));
          this.subs.push(nc.subscribe(`${subject}.prefix`, { callback: (err, msg) => { if (!err) this.onPrefix(pool, msg.data); } }));
        }
      }
    }
    this.agg.sweep();
    if (!nc) return;
    const now = this.now();
    if (this.mode === 'leader') {
      this.lead(nc, now);
      if (!this.rttPending && now - this.lastRttAt >= this.cfg.agentExpireMs / 3 && typeof nc.rtt === 'function') {
        this.rttPending = true;
        this.lastRttAt = now;
        nc.rtt().then((ms) => {
          if (nc === this.nc && Number.isFinite(ms) && ms >= 0) this.rttMs = this.rttMs === undefined ? ms : this.rttMs + 0.25 * (ms - this.rttMs);
        }, () => undefined).finally(() => { this.rttPending = false; });
      }
    }
    this.publishPrefix(nc, now);
    const keepalive = now - this.lastSentAt >= this.cfg.agentExpireMs / 3;
    if (!this.dirty && !keepalive) return;
    this.dirty = false;
    this.lastSentAt = now;
    this.publish(nc, keepalive);
  }

  private totalKey(pool: string): string { return `total/${pool}`; }

  /** leader mode: follow the election (subscribe to `.up` while leading), publish the totals */
  private lead(nc: NatsConnection, now: number): void {
    for (const [pool, subject] of this.subjects) {
      const leads = this.deps.isLeader?.(pool) ?? false;
      const should = leads || (this.deps.isCandidate?.(pool) ?? false);
      let l = this.leading.get(pool);
      if (should && !l) {
        const sum = new LeaderPool(now);
        const sub = nc.subscribe(`${subject}.up`, { callback: (err, msg) => { if (!err) this.onUp(pool, sum, msg.data); } });
        l = { sum, sub };
        this.leading.set(pool, l);
      } else if (!should && l) {
        l.sub.unsubscribe();
        this.leading.delete(pool);
        l = undefined;
      }
      if (!l) continue;
      const sum = l.sum;
      const ageMs = sum.sweep(now, this.cfg.exchangeMs);
      if (!leads) continue; // a standby sums, only the leader publishes
      // a new leader waits until every live agent has sent it its sums (keepalive period + one
      // interval): a total short of an agent would price the instances cheaper than they are
      if (now - sum.since < this.cfg.agentExpireMs / 3 + this.cfg.exchangeMs) continue;
      if (!sum.dirty && now - sum.lastSentAt < this.cfg.agentExpireMs / 3) continue;
      sum.dirty = false;
      sum.lastSentAt = now;
      const data = encodeInflight(KIND_TOTAL, encodeAgeMs(ageMs), this.deps.id, now, [...sum.total].sort((a, b) => (a[0] < b[0] ? -1 : 1)));
      if (this.send(nc, `${subject}.total`, data)) this.stats.totalsPublished++;
    }
  }

  private get prefixRecords(): number { return this.agg.opts.prefixRecords ?? PREFIX_DEFAULT_RECORDS; }

  /** Drops the oldest records of `q` beyond PREFIX_PENDING_FACTOR messages' worth (counted). */
  private trimPending(q: PrefixRecord[]): void {
    const drop = q.length - PREFIX_PENDING_FACTOR * this.prefixRecords;
    if (drop <= 0) return;
    q.splice(0, drop);
    this.stats.prefixDropped += drop;
  }

  /** At most prefixRecords of `q` as one KIND_PREFIX message on `subject` (the rest waits); over the pending bound the oldest are dropped. */
  private sendPrefix(nc: NatsConnection, subject: string, q: PrefixRecord[], now: number): number {
    const max = this.prefixRecords;
    this.trimPending(q);
    if (!q.length) return 0;
    const take = q.splice(0, Math.min(max, q.length));
    return this.send(nc, subject, encodeInflight(KIND_PREFIX, 0, this.deps.id, now, [], take)) ? take.length : 0;
  }

  /** every tick: this agent's proxies' placements out; leader mode: follow the election, relay the agents' */
  private publishPrefix(nc: NatsConnection, now: number): void {
    for (const [pool, q] of this.prefixPending) {
      const subject = this.subjects.get(pool)!;
      this.stats.prefixOut += this.sendPrefix(nc, this.mode === 'leader' ? `${subject}.prefix.up` : `${subject}.prefix`, q, now);
    }
    if (this.mode !== 'leader') return;
    for (const [pool, subject] of this.subjects) {
      const leads = this.deps.isLeader?.(pool) ?? false;
      let r = this.relaying.get(pool);
      if (leads && !r) {
        const pending: PrefixRecord[] = [];
        const sub = nc.subscribe(`${subject}.prefix.up`, { callback: (err, msg) => { if (!err) this.onPrefixUp(pool, pending, msg.data); } });
        this.relaying.set(pool, (r = { sub, pending }));
      } else if (!leads && r) {
        r.sub.unsubscribe();
        this.relaying.delete(pool);
        r = undefined;
      }
      if (r) this.stats.prefixRelayed += this.sendPrefix(nc, `${subject}.prefix`, r.pending, now);
    }
  }

  /** a pool's placements (of the pool's instances only) */
  private prefixOfPool(pool: string, records: PrefixRecord[] | undefined): PrefixRecord[] {
    return (records ?? []).filter((r) => this.deps.poolOf(r.addr) === pool);
  }

  /** the leader: an agent's placements, merged into the next relay */
  private onPrefixUp(pool: string, pending: PrefixRecord[], data: Uint8Array): void {
    const doc = this.decode(data, KIND_PREFIX);
    if (!doc) return;
    for (const r of this.prefixOfPool(pool, doc.prefix)) pending.push(r);
    this.trimPending(pending); // bounded between two relays, whatever the number of agents
    this.stats.received++;
  }

  /** every agent: the other agents' placements (leader mode: the leader's relay, our own among them) */
  private onPrefix(pool: string, data: Uint8Array): void {
    const doc = this.decode(data, KIND_PREFIX);
    if (!doc) return;
    if (this.mode !== 'leader' && doc.proxyId === this.deps.id) { this.stats.own++; return; }
    const recs = this.prefixOfPool(pool, doc.prefix);
    this.agg.agentPrefix(recs);
    this.stats.prefixIn += recs.length;
    this.stats.received++;
  }

  private send(nc: NatsConnection, subject: string, data: Buffer): boolean {
    try {
      nc.publish(subject, data);
    } catch {
      return false; // closed under us: the next connection sends everything again
    }
    this.stats.published++;
    this.stats.bytesOut += data.length;
    this.m?.messages.inc({ direction: 'published', result: 'ok' });
    this.m?.bytes.inc({ direction: 'published' }, data.length);
    return true;
  }

  private publish(nc: NatsConnection, force: boolean, goodbye = false): void {
    const byPool = new Map<string, Array<[string, number]>>();
    for (const k of this.subjects.keys()) byPool.set(k, []);
    if (!goodbye) {
      for (const [addr, n] of this.agg.localTotals()) {
        const pool = this.deps.poolOf(addr);
        const list = pool !== undefined ? byPool.get(pool) : undefined;
        if (list) list.push([addr, n]);
      }
    }
    const now = this.now();
    const age = this.agg.localAgeMs(now);
    for (const [pool, counts] of byPool) {
      counts.sort((a, b) => (a[0] < b[0] ? -1 : 1));
      const key = JSON.stringify(counts);
      if (!force && !goodbye && this.sent.get(pool) === key) continue;
      this.sent.set(pool, key);
      const data = encodeInflight(KIND_AGENT, age, this.deps.id, now, counts);
      const subject = this.mode === 'leader' ? `${this.subjects.get(pool)!}.up` : this.subjects.get(pool)!;
      if (!this.send(nc, subject, data)) continue;
      if (this.mode === 'leader') {
        const versions = this.ownSent.get(pool) ?? [];
        versions.unshift({ at: now, counts: new Map(counts) });
        if (versions.length > OWN_VERSIONS) versions.length = OWN_VERSIONS;
        this.ownSent.set(pool, versions);
        this.firstSentAt ??= now;
      }
    }
  }

  private decode(data: Uint8Array, kind: number): ReturnType<typeof decodeInflight> | undefined {
    this.stats.bytesIn += data.length;
    this.m?.bytes.inc({ direction: 'received' }, data.length);
    try {
      const doc = decodeInflight(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
      if (doc.kind !== kind) throw new Error(`kind ${doc.kind}`);
      return doc;
    } catch {
      this.stats.rejected++;
      this.m?.messages.inc({ direction: 'received', result: 'rejected' });
      return undefined;
    }
  }

  /** this pool's instances only (a message on a pool's subject speaks for that pool) */
  private ofPool(pool: string, counts: Map<string, number>): Map<string, number> {
    const out = new Map<string, number>();
    for (const [a, n] of counts) if (this.deps.poolOf(a) === pool) out.set(a, n);
    return out;
  }

  /** the leader: an agent's sums (an empty message: its goodbye) */
  private onUp(pool: string, sum: LeaderPool, data: Uint8Array): void {
    const doc = this.decode(data, KIND_AGENT);
    if (!doc) return;
    const counts = this.ofPool(pool, doc.counts);
    if (counts.size === 0) sum.drop(doc.proxyId);
    else if (!sum.agents.has(doc.proxyId) && sum.agents.size >= this.cfg.maxAgents) {
      this.stats.rejected++;
      this.m?.messages.inc({ direction: 'received', result: 'rejected' });
      return;
    } else sum.put(doc.proxyId, counts, this.now(), doc.intervalMs, this.cfg.agentExpireMs);
    this.stats.upReceived++;
    this.stats.received++;
    this.m?.messages.inc({ direction: 'received', result: 'ok' });
  }

  private onMessage(pool: string, data: Uint8Array): void {
    if (this.mode === 'leader') { this.onTotal(pool, data); return; }
    const doc = this.decode(data, KIND_AGENT);
    if (!doc) return;
    if (doc.proxyId === this.deps.id) { this.stats.own++; return; }
    const counts = this.ofPool(pool, doc.counts);
    const key = `${doc.proxyId}/${pool}`;
    if (counts.size === 0) this.agg.dropAgent(key);
    else if (!this.agg.agentTotals(key, counts, this.cfg.agentExpireMs, this.cfg.maxAgents, doc.intervalMs, this.cfg.exchangeMs)) {
      this.stats.rejected++;
      this.m?.messages.inc({ direction: 'received', result: 'rejected' });
      return;
    }
    this.stats.received++;
    this.m?.messages.inc({ direction: 'received', result: 'ok' });
  }

  /** leader mode: the mesh-wide totals; the remote counts are the total less this agent's own sums */
  private onTotal(pool: string, data: Uint8Array): void {
    const doc = this.decode(data, KIND_TOTAL);
    if (!doc) return;
    const leader = this.deps.leaderOf?.(pool);
    if (leader !== undefined && doc.proxyId !== leader) {
      this.stats.totalsNotLeader++;
      return;
    }
    const now = this.now();
    // until the leader surely holds our sums, subtracting them would count the others short
    if (this.firstSentAt === undefined || now - this.firstSentAt < SETTLE_INTERVALS * this.cfg.exchangeMs) {
      this.stats.totalsIgnored++;
      return;
    }
    // the messages the total may hold: those of the last guard, and the newest before them
    const guard = this.guardMs();
    const all = this.ownSent.get(pool) ?? [];
    const versions: Array<Map<string, number>> = [];
    for (const v of all) {
      versions.push(v.counts);
      if (v.at <= now - guard) break;
    }
    // ambiguous (a message of ours went out within the guard): the least is taken for now, and our
    // sums go out again at the next tick, so that the leader's next total is unambiguous
    if (versions.length > 1) this.lastSentAt = -Infinity;
    const remote = new Map<string, number>();
    for (const [a, n] of this.ofPool(pool, doc.counts)) {
      // the least of them: whichever the leader summed, the others are not counted short
      let own = Infinity;
      for (const v of versions) own = Math.min(own, v.get(a) ?? 0);
      const r = n - (own === Infinity ? 0 : own);
      if (r > 0) remote.set(a, r);
    }
    const key = this.totalKey(pool);
    // an empty remainder is a known zero (the others have nothing in flight), not "unknown"
    if (!this.agg.agentTotals(key, remote, this.cfg.agentExpireMs, this.cfg.maxAgents, doc.intervalMs, this.cfg.exchangeMs)) {
      this.stats.rejected++;
      this.m?.messages.inc({ direction: 'received', result: 'rejected' });
      return;
    }
    this.totalFrom.set(pool, doc.proxyId);
    this.stats.totalsReceived++;
    this.stats.received++;
    this.m?.messages.inc({ direction: 'received', result: 'ok' });
  }

  /** graceful stop: an empty message per pool (the leader, or every agent, drops this agent's sums at once) */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    const nc = this.deps.connection();
    if (nc) {
      this.publish(nc, true, true);
      await Promise.race([nc.flush().catch(() => undefined), new Promise((r) => setTimeout(r, 200).unref?.())]);
    }
    for (const s of this.subs) s.unsubscribe();
    for (const l of this.leading.values()) l.sub.unsubscribe();
    for (const r of this.relaying.values()) r.sub.unsubscribe();
    this.subs = [];
    this.leading.clear();
    this.relaying.clear();
  }
}
