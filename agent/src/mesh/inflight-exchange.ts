// Mesh-wide in-flight across agents (docs/mesh.md "Mesh-wide in-flight"): every agent publishes
// its own proxies' in-flight sums per pool on NATS and adds the other agents' into the answers it
// gives its filters (agent/src/mesh/inflight.ts). Nothing per request: one message per pool per
// exchangeMs at most, only when the sums changed (and every agentExpireMs / 3 as a keepalive, so a
// quiet agent is not expired), carrying only the non-zero counts; an agent ignores its own
// messages; another agent's sums expire agentExpireMs after its last message (a crashed agent),
// and a graceful stop says goodbye with an empty message.
//
// Subject per pool: <nats.subjectPrefix>.<peer or _>.<service>.inflight (5 tokens: never a pool
// state subject, which has 4). Message: the in-flight document (inflight.ts format), kind
// KIND_AGENT, proxyId = the agent's mesh id, intervalMs = the age of its sums (ms, the weighted
// mean age of its proxies' last reports; an agent before round 7 wrote exchangeMs there, the same
// order).
import type { NatsConnection, Subscription } from 'nats';
import * as promClient from 'prom-client';
import type { Registry } from 'prom-client';
import { decodeInflight, encodeInflight, KIND_AGENT, type InflightAggregator } from './inflight';
import type { InflightConfig } from './inflight-schema';
import { poolSubject } from './schema';

export { KIND_AGENT };

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
  registry?: Registry;
  now?: () => number;
}

const poolKeyOf = (peer: string, service: string): string => `${peer === '' ? '_' : peer}/${service}`;

export class InflightExchange {
  private timer?: NodeJS.Timeout;
  private nc?: NatsConnection;
  private subs: Subscription[] = [];
  private dirty = true;
  private lastSentAt = -Infinity;
  /** what was last sent per pool (JSON of the counts): a pool is sent only when it changed */
  private sent = new Map<string, string>();
  private readonly subjects: Map<string, string>;
  private readonly now: () => number;
  readonly stats = { published: 0, received: 0, rejected: 0, own: 0, bytesOut: 0, bytesIn: 0 };
  private readonly m?: { messages: promClient.Counter<'direction' | 'result'>; bytes: promClient.Counter<'direction'> };

  constructor(private readonly agg: InflightAggregator, private readonly cfg: InflightConfig, private readonly deps: ExchangeDeps) {
    this.now = deps.now ?? Date.now;
    this.subjects = new Map(deps.pools.map((p) => [poolKeyOf(p.peer, p.service), `${poolSubject(deps.subjectPrefix, p.peer, p.service)}.inflight`]));
    agg.onLocalChange = () => { this.dirty = true; };
    if (deps.registry) {
      const r = [deps.registry];
      this.m = {
        messages: new promClient.Counter({ name: 'switchyard_inflight_exchange_messages_total', help: 'Mesh in-flight sums exchanged with the other agents over NATS, by direction and result (ok, rejected).', labelNames: ['direction', 'result'], registers: r }),
        bytes: new promClient.Counter({ name: 'switchyard_inflight_exchange_bytes_total', help: 'Bytes of the mesh in-flight sums exchanged over NATS.', labelNames: ['direction'], registers: r }),
      };
    }
  }

  start(): void {
    this.timer = setInterval(() => this.tick(), this.cfg.exchangeMs);
    this.timer.unref?.();
  }

  /** every exchangeMs: (re)subscribe on a new connection; publish the pools whose sums changed */
  tick(): void {
    const nc = this.deps.connection();
    if (nc !== this.nc) {
      for (const s of this.subs) s.unsubscribe();
      this.subs = [];
      this.nc = nc;
      this.sent.clear(); // a new connection: everything goes out again
      this.dirty = true;
      if (nc) for (const [pool, subject] of this.subjects) this.subs.push(nc.subscribe(subject, { callback: (err, msg) => { if (!err) this.onMessage(pool, msg.data); } }));
    }
    this.agg.sweep();
    if (!nc) return;
    const now = this.now();
    const keepalive = now - this.lastSentAt >= this.cfg.agentExpireMs / 3;
    if (!this.dirty && !keepalive) return;
    this.dirty = false;
    this.lastSentAt = now;
    this.publish(nc, keepalive);
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
    for (const [pool, counts] of byPool) {
      counts.sort((a, b) => (a[0] < b[0] ? -1 : 1));
      const key = JSON.stringify(counts);
      if (!force && !goodbye && this.sent.get(pool) === key) continue;
      this.sent.set(pool, key);
      const data = encodeInflight(KIND_AGENT, this.agg.localAgeMs(this.now()), this.deps.id, this.now(), counts);
      try {
        nc.publish(this.subjects.get(pool)!, data);
      } catch {
        continue; // closed under us: the next connection sends everything again
      }
      this.stats.published++;
      this.stats.bytesOut += data.length;
      this.m?.messages.inc({ direction: 'published', result: 'ok' });
      this.m?.bytes.inc({ direction: 'published' }, data.length);
    }
  }

  private onMessage(pool: string, data: Uint8Array): void {
    this.stats.bytesIn += data.length;
    this.m?.bytes.inc({ direction: 'received' }, data.length);
    let doc;
    try {
      doc = decodeInflight(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
      if (doc.kind !== KIND_AGENT) throw new Error(`kind ${doc.kind}`);
    } catch {
      this.stats.rejected++;
      this.m?.messages.inc({ direction: 'received', result: 'rejected' });
      return;
    }
    if (doc.proxyId === this.deps.id) { this.stats.own++; return; }
    // only this pool's instances count from this pool's subject
    const counts = new Map<string, number>();
    for (const [a, n] of doc.counts) if (this.deps.poolOf(a) === pool) counts.set(a, n);
    const key = `${doc.proxyId}/${pool}`;
    if (counts.size === 0) this.agg.dropAgent(key);
    else if (!this.agg.agentTotals(key, counts, this.cfg.agentExpireMs, this.cfg.maxAgents, doc.intervalMs)) {
      this.stats.rejected++;
      this.m?.messages.inc({ direction: 'received', result: 'rejected' });
      return;
    }
    this.stats.received++;
    this.m?.messages.inc({ direction: 'received', result: 'ok' });
  }

  /** graceful stop: an empty message per pool (the others drop this agent's sums at once) */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    const nc = this.deps.connection();
    if (nc) {
      this.publish(nc, true, true);
      await Promise.race([nc.flush().catch(() => undefined), new Promise((r) => setTimeout(r, 200).unref?.())]);
    }
    for (const s of this.subs) s.unsubscribe();
    this.subs = [];
  }
}
