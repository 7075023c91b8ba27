// The store of a lone agent: flags and overrides in memory (lost on restart, shared with no one).
import { EventEmitter } from 'node:events';
import type { FlagEntry, OverrideEntry, OverrideStore, StoreEvents, StoreStatus } from './types';

export class MemoryStore extends EventEmitter<StoreEvents> implements OverrideStore {
  readonly kind = 'memory' as const;
  private f = new Map<string, FlagEntry>();
  private o = new Map<string, OverrideEntry>();
  private readonly since = Date.now();

  async start(): Promise<void> {}
  async stop(): Promise<void> {}
  flags(): ReadonlyMap<string, FlagEntry> {
    return this.f;
  }
  overrides(): ReadonlyMap<string, OverrideEntry> {
    return this.o;
  }
  async putFlag(name: string, e: FlagEntry): Promise<void> {
    this.f.set(name, e);
    this.emit('change');
  }
  async deleteFlag(name: string): Promise<boolean> {
    const had = this.f.delete(name);
    if (had) this.emit('change');
    return had;
  }
  async putOverride(set: string, e: OverrideEntry): Promise<void> {
    this.o.set(set, e);
    this.emit('change');
  }
  async deleteOverride(set: string): Promise<boolean> {
    const had = this.o.delete(set);
    if (had) this.emit('change');
    return had;
  }
  status(): StoreStatus {
    return { kind: 'memory', connected: true, sinceMs: this.since, flags: this.f.size, overrides: this.o.size, rejected: 0 };
  }
}
