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
// 500 ms expiry sweep) -- or sooner, by silence (runtime.ts): a standby that hears no heartbeat
// of the leader for the takeover window calls takeOver(), which deletes exactly that leader's key
// (a transaction on its create revision), so that etcd itself makes the standby the oldest key.
// etcd stays the one authority: a leader whose key was taken finds it gone at its next read and
// puts a new one, which queues behind the new leader's (a paused leader does not take the pool
// back); suspect() makes a leader that was itself silent for the window stop publishing until a
// read that started after its pause says it still leads.
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

/** why a collector leads: etcd's order (first campaign, the old leader's lease expired or was revoked) or its takeover of a silent leader */
export type LeadReason = 'etcd' | 'silence';

export interface ElectionEvents {
  /** the pool's leadership of this collector changed */
  leader: [pool: string, leading: boolean, reason: LeadReason];
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
  /** the oldest key (the leader) at the last read: key, its create revision, the leader's mesh id */
  leaderKey?: string;
  leaderRev?: string;
  leaderId?: number;
  /** when this collector last learned of a new leader id (a standby's silence clock starts no earlier) */
  leaderSince: number;
  /** suspect(): the read sequence number after which a read confirms the leadership again */
  suspectSeq: number;
  /** a takeover by silence committed (etcd deleted the silent leader's key): the next leadership's reason */
  tookOverAt?: number;
  /** why the current leadership began */
  reason?: LeadReason;
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
  private readSeq = 0;
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
    for (const p of pools) this.pools.set(p, { first: true, leading: false, leaderSince: this.now(), suspectSeq: 0 });
    void this.campaign();
    // re-reads and the trust deadline: leadership ends when keepalives stop, even with no event
    this.timer = setInterval(() => this.check(), Math.max(50, Math.floor((this.o.leaseTtlS * 1000) / 10)));
    this.timer.unref?.();
  }

  isLeader(pool: string): boolean {
    const s = this.pools.get(pool);
    return s !== undefined && s.leading && s.suspectSeq === 0 && this.trusted();
  }

  /** the leader of the pool at the last read (its mesh id) and since when this collector knows it */
  leaderOf(pool: string): { id?: number; since: number } {
    const s = this.pools.get(pool);
    return { id: s?.leaderId, since: s?.leaderSince ?? this.now() };
  }

  /** why this collector leads the pool (undefined: it does not) */
  reasonOf(pool: string): LeadReason | undefined {
    return this.isLeader(pool) ? this.pools.get(pool)?.reason : undefined;
  }

  /**
   * This leader was silent for the follow window itself (its event loop paused, NATS lost), or
   * heard another leader of the pool: a standby may have taken the pool. It publishes nothing until a read that starts now confirms
   * that its key is still the oldest.
   */
  suspect(pool: string): void {
    const s = this.pools.get(pool);
    if (!s || !s.leading) return;
    s.suspectSeq = this.readSeq + 1;
    void this.reread();
  }

  /**
   * A standby heard nothing from the pool's leader `silentId` for the takeover window: delete that
   * leader's key -- only that incarnation (its create revision), only if this collector has a
   * trusted key of its own -- and re-read, so that etcd's order makes the next key the leader.
   * Returns whether etcd deleted it (false: the leader changed meanwhile, or etcd is unreachable).
   */
  async takeOver(pool: string, silentId: number): Promise<boolean> {
    const s = this.pools.get(pool);
    if (!s || this.stopped || !s.key || s.leading || !this.trusted() || s.leaderId !== silentId || !s.leaderKey || !s.leaderRev) return false;
    // marked before the commit: the watch event of the deletion (or a periodic re-read already in
    // flight) can make us the leader before the commit's continuation runs, and that leadership is
    // the takeover's
    s.tookOverAt = this.now();
    try {
      const r = await this.client.if(s.leaderKey, 'Create', '==', s.leaderRev).then(this.client.delete().key(s.leaderKey)).commit();
      if (!r.succeeded) { if (!s.leading) s.tookOverAt = undefined; return false; }
      await this.reread();
      return true;
    } catch (err) {
      if (!s.leading) s.tookOverAt = undefined;
      this.lastError = `etcd: ${(err as Error).message}`;
      return false;
    }
  }

  private trusted(): boolean {
    return this.now() - this.lastKeepAliveAt < TRUST * this.o.leaseTtlS * 1000;
  }

  status(): { leaseId?: string; leaseTrusted: boolean; leading: string[]; reasons: Record<string, LeadReason | undefined>; lastError?: string } {
    const leading = [...this.pools].filter(([p]) => this.isLeader(p)).map(([p]) => p);
    return { leaseId: this.leaseId, leaseTrusted: this.trusted(), leading, reasons: Object.fromEntries(leading.map((p) => [p, this.reasonOf(p)])), lastError: this.lastError };
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
          const seq = ++this.readSeq;
          // every candidate's key (one per live collector: bounded by the collectors)
          const kvs = (await this.client.getAll().prefix(this.prefixOf(p)).sort('Create', 'Ascend').exec()).kvs;
          const lead = kvs[0];
          const id = lead ? Number(lead.value.toString()) : undefined;
          if (id !== s.leaderId) s.leaderSince = this.now();
          s.leaderKey = lead?.key.toString();
          s.leaderRev = lead?.create_revision;
          s.leaderId = id;
          if (s.suspectSeq !== 0 && seq >= s.suspectSeq) s.suspectSeq = 0;
          if (!kvs.some((kv) => kv.key.toString() === s.key) && this.lease && !this.stopped) {
            // our key was taken by a standby (we were silent): a new one, behind the current leader
            this.set(p, s, false);
            await this.lease.put(s.key).value(String(this.o.id));
            this.rereadAgain = true;
            continue;
          }
          this.set(p, s, lead?.key.toString() === s.key);
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
    if (!leading) s.reason = undefined;
    // (a suspect() pause is not a change of leadership: isLeader() holds it back, no event)
    const eff = leading && this.trusted();
    if (eff !== s.eff || s.first) {
      const changed = s.eff !== undefined && eff !== s.eff;
      if (eff && s.reason === undefined) {
        // a leadership that follows our own takeover within a second is the takeover's (kept
        // while etcd says we lead: a suspect() pause confirmed by a read is the same leadership)
        s.reason = s.tookOverAt !== undefined && this.now() - s.tookOverAt < 1000 ? 'silence' : 'etcd';
        s.tookOverAt = undefined;
      }
      s.eff = eff;
      s.first = false;
      if (changed || eff) this.emit('leader', pool, eff, s.reason ?? 'etcd');
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
