// Flags and overrides shared by every agent through etcd v3. Key layout (docs/rules.md):
//   <prefix>flags/<flag name>      JSON FlagEntry
//   <prefix>overrides/<rule set>   JSON OverrideEntry (written with a lease that ends at expiry)
// Agents list the prefix, then watch it. While etcd cannot be reached the last known records
// stay in force and status() says so; on reconnection the agent lists again (the watch
// resumes by itself). Expiry does not depend on etcd: the runtime ignores expired records.
import { EventEmitter } from 'node:events';
import { ConstantBackoff, noop } from 'cockatiel';
import { Etcd3, type IKeyValue, type Watcher } from 'etcd3';
import { parseFlag, parseOverride, type FlagEntry, type OverrideEntry, type OverrideStore, type StoreEvents, type StoreStatus } from './types';

export interface EtcdStoreOptions {
  endpoints: string[];
  prefix: string;
  dialTimeoutMs: number;
  healthIntervalMs: number;
  maxEntries: number;
  now?: () => number;
}

export class EtcdStore extends EventEmitter<StoreEvents> implements OverrideStore {
  readonly kind = 'etcd' as const;
  private readonly client: Etcd3;
  private f = new Map<string, FlagEntry>();
  private o = new Map<string, OverrideEntry>();
  private connected = false;
  private sinceMs: number;
  private lastError?: string;
  private rejected = 0;
  private lastRejected?: string;
  private watcher?: Watcher;
  private health?: NodeJS.Timeout;
  private stopped = false;
  private listing = false;
  private relistAgain = false;
  /** +1 per watch event: a list that raced with one is repeated, so the newer event wins */
  private watchEvents = 0;
  private readonly now: () => number;

  constructor(private readonly opts: EtcdStoreOptions) {
    super();
    this.now = opts.now ?? Date.now;
    this.sinceMs = this.now();
    this.client = new Etcd3({
      hosts: opts.endpoints,
      dialTimeout: opts.dialTimeoutMs,
      // fail fast and let the health loop decide: the default retries and circuit breaker would
      // hold a write for seconds and hide an outage from status()
      faultHandling: { host: () => noop, global: noop, watchBackoff: new ConstantBackoff(Math.min(250, opts.healthIntervalMs)).next() },
      defaultCallOptions: (ctx) => (ctx.isStream ? {} : { deadline: Date.now() + opts.dialTimeoutMs }),
    });
  }

  private key(kind: 'flags' | 'overrides', name: string): string {
    return `${this.opts.prefix}${kind}/${name}`;
  }

  async start(): Promise<void> {
    await this.relist();
    this.startWatch();
    this.health = setInterval(() => void this.check(), this.opts.healthIntervalMs);
  }

  private startWatch(): void {
    void this.client
      .watch()
      .prefix(this.opts.prefix)
      .create()
      .then((w) => {
        if (this.stopped) return void w.cancel();
        this.watcher = w;
        w.on('put', (kv) => this.apply(kv, false));
        w.on('delete', (kv) => this.apply(kv, true));
        w.on('disconnected', (err) => this.setConnected(false, err.message));
        // the watch resumes from its last revision by itself; list anyway so that a compacted
        // history or an agent started while etcd was down still converges
        w.on('connected', () => void this.relist());
        w.on('error', (err) => this.setConnected(false, err.message));
      })
      .catch((err: Error) => {
        this.setConnected(false, err.message);
        if (!this.stopped) setTimeout(() => this.startWatch(), this.opts.healthIntervalMs).unref();
      });
  }

  private async check(): Promise<void> {
    if (this.stopped) return;
    try {
      await this.client.maintenance.status();
      if (!this.connected) await this.relist();
    } catch (err) {
      this.setConnected(false, (err as Error).message);
    }
  }

  private setConnected(c: boolean, error?: string): void {
    if (error) this.lastError = error;
    if (c === this.connected) return;
    this.connected = c;
    this.sinceMs = this.now();
    this.emit('connection', { connected: c, error });
  }

  private reject(key: string, why: string): void {
    this.rejected++;
    this.lastRejected = `${key}: ${why}`;
  }

  /** one put/delete from the watch */
  private apply(kv: IKeyValue, deleted: boolean): void {
    this.watchEvents++;
    const key = kv.key.toString();
    const rest = key.slice(this.opts.prefix.length);
    const slash = rest.indexOf('/');
    const kind = rest.slice(0, slash);
    const name = rest.slice(slash + 1);
    const map = kind === 'flags' ? this.f : kind === 'overrides' ? this.o : undefined;
    if (!map || !name) return;
    if (deleted) {
      if ((map as Map<string, unknown>).delete(name)) this.emit('change');
      return;
    }
    if (!map.has(name) && this.f.size + this.o.size >= this.opts.maxEntries) return this.reject(key, `more than maxEntries ${this.opts.maxEntries} records`);
    const parsed = this.parse(kind as 'flags' | 'overrides', kv.value.toString());
    if (typeof parsed === 'string') {
      // a malformed write replaces nothing: the previous record (if any) is dropped so that an
      // operator's broken correction cannot leave the old value silently in force
      this.reject(key, parsed);
      if ((map as Map<string, unknown>).delete(name)) this.emit('change');
      return;
    }
    (map as Map<string, unknown>).set(name, parsed);
    this.emit('change');
  }

  private parse(kind: 'flags' | 'overrides', text: string): FlagEntry | OverrideEntry | string {
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch {
      return 'not JSON';
    }
    return kind === 'flags' ? parseFlag(raw) : parseOverride(raw);
  }

  private async relist(): Promise<void> {
    if (this.stopped) return;
    if (this.listing) {
      this.relistAgain = true;
      return;
    }
    this.listing = true;
    const eventsBefore = this.watchEvents;
    try {
      const all = await this.client.getAll().prefix(this.opts.prefix).limit(this.opts.maxEntries + 1).strings();
      const f = new Map<string, FlagEntry>();
      const o = new Map<string, OverrideEntry>();
      let n = 0;
      for (const [key, value] of Object.entries(all)) {
        const rest = key.slice(this.opts.prefix.length);
        const slash = rest.indexOf('/');
        const kind = rest.slice(0, slash);
        const name = rest.slice(slash + 1);
        if ((kind !== 'flags' && kind !== 'overrides') || !name) continue;
        if (++n > this.opts.maxEntries) {
          this.reject(key, `more than maxEntries ${this.opts.maxEntries} records`);
          continue;
        }
        const parsed = this.parse(kind, value);
        if (typeof parsed === 'string') this.reject(key, parsed);
        else if (kind === 'flags') f.set(name, parsed as FlagEntry);
        else o.set(name, parsed as OverrideEntry);
      }
      this.f = f;
      this.o = o;
      this.setConnected(true);
      this.emit('change');
    } catch (err) {
      this.setConnected(false, (err as Error).message);
    } finally {
      this.listing = false;
    }
    if (this.relistAgain || this.watchEvents !== eventsBefore) {
      this.relistAgain = false;
      await this.relist();
    }
  }

  flags(): ReadonlyMap<string, FlagEntry> {
    return this.f;
  }
  overrides(): ReadonlyMap<string, OverrideEntry> {
    return this.o;
  }

  private async put(key: string, value: unknown, expiresAtMs?: number): Promise<void> {
    const json = JSON.stringify(value);
    if (expiresAtMs === undefined) {
      await this.client.put(key).value(json);
      return;
    }
    // the lease lets etcd delete the record at expiry; agents also end it by their own clock
    const ttlS = Math.max(1, Math.ceil((expiresAtMs - this.now()) / 1000) + 1);
    const lease = this.client.lease(ttlS, { autoKeepAlive: false });
    try {
      await lease.put(key).value(json);
    } finally {
      lease.release();
    }
  }

  async putFlag(name: string, e: FlagEntry): Promise<void> {
    await this.put(this.key('flags', name), e, e.expiresAtMs);
  }
  async deleteFlag(name: string): Promise<boolean> {
    return (await this.client.delete().key(this.key('flags', name))).deleted !== '0';
  }
  async putOverride(set: string, e: OverrideEntry): Promise<void> {
    await this.put(this.key('overrides', set), e, e.expiresAtMs);
  }
  async deleteOverride(set: string): Promise<boolean> {
    return (await this.client.delete().key(this.key('overrides', set))).deleted !== '0';
  }

  status(): StoreStatus {
    return {
      kind: 'etcd',
      connected: this.connected,
      sinceMs: this.sinceMs,
      ...(this.lastError && !this.connected ? { lastError: this.lastError } : {}),
      flags: this.f.size,
      overrides: this.o.size,
      rejected: this.rejected,
      ...(this.lastRejected ? { lastRejected: this.lastRejected } : {}),
    };
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.health) clearInterval(this.health);
    await this.watcher?.cancel().catch(() => {});
    this.client.close();
  }
}
