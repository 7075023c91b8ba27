// Leader election per pool through one etcd lease per collector (etcd's documented election
// recipe: every candidate puts <prefix>pools/<pool>/<lease id> under its lease; the key with the
// lowest create revision is the leader; a candidate watches the prefix and re-reads on a change).
// One lease for all the pools of a collector keeps the keepalive traffic at 3 per TTL, whatever
// the number of pools.
//
// Safety: a collector leads only while its own last keepalive is younger than 0.8 x TTL, so it
// stops publishing before etcd can expire its lease and elect the next one (no two leaders; a
// leader cut off from etcd goes quiet instead of talking over its successor). A lost lease
// (expired, revoked, etcd gone > 2 TTL) is replaced by a new one, whose keys queue behind the
// current leader's: a recovered collector does not take the pool back (no flap).
// stop() revokes the lease: a graceful stop hands over at once, a crash after <= TTL (+ etcd's
// 500 ms expiry sweep).
import { EventEmitter } from 'node:events';
import { ConstantBackoff, noop } from 'cockatiel';
import { Etcd3, type Lease, type Watcher } from 'etcd3';

export interface ElectionOptions {
  endpoints: string[];
  prefix: string;
  leaseTtlS: number;
  dialTimeoutMs: number;
  /** this collector's id (the pool messages' leaderId), for the key's value and the logs */
  id: number;
  now?: () => number;
}

export interface ElectionEvents {
  /** the pool's leadership of this collector changed */
  leader: [pool: string, leading: boolean];
  error: [err: Error];
}

/** the share of the TTL after the last keepalive during which the lease is trusted to be alive */
const TRUST = 0.8;

interface PoolState {
  key?: string;
  first: boolean;
  /** etcd's answer: our key is the oldest */
  leading: boolean;
  /** what was last emitted (leading and trusted) */
  eff?: boolean;
}

export class PoolElection extends EventEmitter<ElectionEvents> {
  private readonly client: Etcd3;
  private lease?: Lease;
  private leaseId?: string;
  private lastKeepAliveAt = -Infinity;
  private readonly pools = new Map<string, PoolState>();
  private watcher?: Watcher;
  private timer?: NodeJS.Timeout;
  private stopped = false;
  private campaigning = false;
  private readonly now: () => number;
  lastError?: string;

  constructor(private readonly o: ElectionOptions) {
    super();
    this.now = o.now ?? Date.now;
    this.client = new Etcd3({
      hosts: o.endpoints,
      dialTimeout: o.dialTimeoutMs,
      faultHandling: { host: () => noop, global: noop, watchBackoff: new ConstantBackoff(100).next() },
      defaultCallOptions: (ctx) => (ctx.isStream ? {} : { deadline: Date.now() + o.dialTimeoutMs }),
    });
  }

  private prefixOf(pool: string): string {
    return `${this.o.prefix}pools/${pool}/`;
  }

  /** Campaign for every pool; returns at once (nothing waits on etcd). */
  start(pools: string[]): void {
    for (const p of pools) this.pools.set(p, { first: true, leading: false });
    void this.campaign();
    // re-reads and the trust deadline: leadership ends when keepalives stop, even with no event
    this.timer = setInterval(() => this.check(), Math.max(50, Math.floor((this.o.leaseTtlS * 1000) / 10)));
    this.timer.unref?.();
  }

  isLeader(pool: string): boolean {
    return (this.pools.get(pool)?.leading ?? false) && this.trusted();
  }

  private trusted(): boolean {
    return this.now() - this.lastKeepAliveAt < TRUST * this.o.leaseTtlS * 1000;
  }

  status(): { leaseId?: string; leaseTrusted: boolean; leading: string[]; lastError?: string } {
    return { leaseId: this.leaseId, leaseTrusted: this.trusted(), leading: [...this.pools].filter(([p]) => this.isLeader(p)).map(([p]) => p), lastError: this.lastError };
  }

  /** a new lease, our keys under it, then the watch; retried until it works */
  private async campaign(): Promise<void> {
    if (this.campaigning || this.stopped) return;
    this.campaigning = true;
    try {
      const lease = this.client.lease(this.o.leaseTtlS);
      this.lease = lease;
      lease.on('lost', (err) => {
        if (this.lease !== lease) return;
        this.lastError = `etcd lease lost: ${err.message}`;
        this.lease = undefined;
        this.leaseId = undefined;
        this.lastKeepAliveAt = -Infinity;
        for (const [p, s] of this.pools) { s.key = undefined; this.set(p, s, false); }
        if (!this.stopped) setTimeout(() => void this.campaign(), 100).unref?.();
      });
      lease.on('keepaliveSucceeded', () => {
        if (this.lease === lease) this.lastKeepAliveAt = this.now();
      });
      const id = await lease.grant();
      this.lastKeepAliveAt = this.now();
      this.leaseId = BigInt(id).toString(16);
      for (const [p, s] of this.pools) {
        const key = `${this.prefixOf(p)}${this.leaseId}`;
        await lease.put(key).value(String(this.o.id));
        s.key = key;
      }
      if (!this.watcher) {
        this.watcher = await this.client.watch().prefix(`${this.o.prefix}pools/`).create();
        this.watcher.on('data', () => void this.reread());
        this.watcher.on('error', () => undefined); // the watcher resumes by itself
      }
      this.lastError = undefined;
      await this.reread();
    } catch (err) {
      this.lastError = `etcd: ${(err as Error).message}`;
      this.emit('error', err as Error);
      const l = this.lease;
      this.lease = undefined;
      l?.release();
      if (!this.stopped) setTimeout(() => void this.campaign(), 250).unref?.();
    } finally {
      this.campaigning = false;
    }
  }

  private rereading = false;
  private rereadAgain = false;
  /** who leads each pool: the live key with the lowest create revision */
  private async reread(): Promise<void> {
    if (this.rereading) { this.rereadAgain = true; return; }
    this.rereading = true;
    try {
      do {
        this.rereadAgain = false;
        for (const [p, s] of this.pools) {
          if (!s.key) continue;
          const first = await this.client.getAll().prefix(this.prefixOf(p)).sort('Create', 'Ascend').limit(1).keys();
          this.set(p, s, first[0] === s.key);
        }
      } while (this.rereadAgain && !this.stopped);
    } catch (err) {
      this.lastError = `etcd: ${(err as Error).message}`;
    } finally {
      this.rereading = false;
    }
  }

  private check(): void {
    for (const [p, s] of this.pools) this.set(p, s, s.leading);
    // a missed watch event (reconnection) cannot keep a standby waiting for ever
    void this.reread();
  }

  /** record the etcd answer; emit when the effective leadership (answer and trust) changes */
  private set(pool: string, s: PoolState, leading: boolean): void {
    s.leading = leading;
    const eff = leading && this.trusted();
    if (eff !== s.eff || s.first) {
      const changed = s.eff !== undefined && eff !== s.eff;
      s.eff = eff;
      s.first = false;
      if (changed || eff) this.emit('leader', pool, eff);
    }
  }

  /** graceful: revoke the lease, so the next collector leads at once */
  async stop(): Promise<void> {
    await this.end(true);
  }

  /** a crash: stop keepalives without revoking (tests; the lease expires after its TTL) */
  async abandon(): Promise<void> {
    await this.end(false);
  }

  private async end(revoke: boolean): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    for (const [p, s] of this.pools) if (s.leading) { s.leading = false; this.set(p, s, false); }
    const l = this.lease;
    this.lease = undefined;
    if (l) {
      if (revoke) await l.revoke().catch(() => undefined);
      else l.release();
    }
    await this.watcher?.cancel().catch(() => undefined);
    this.client.close();
  }
}
