// Holds the current snapshot and the long-poll waiters.
// seq starts at boot-time-ms x 1000 and increases by 1 per publication.
import { encodeSnapshot, snapshotToJson, type InstanceRecord, type PeerRecord, type Snapshot } from './codec';

export interface Published {
  snapshot: Snapshot;
  binary: Buffer;
  json: string;
}

export type PublishReason = 'initial' | 'periodic' | 'state_change' | 'manual' | 'instances';

type Waiter = (p: Published) => void;

export interface PublisherOptions {
  publishIntervalMs: number;
  collectPeers: () => PeerRecord[];
  /** when it returns undefined no INSTANCES section is written */
  collectInstances?: () => InstanceRecord[] | undefined;
  onPublish?: (p: Published, reason: PublishReason) => void;
  now?: () => number;
}

export class SnapshotPublisher {
  private seq: number;
  private cur!: Published;
  private waiters = new Set<Waiter>();
  private timer?: NodeJS.Timeout;
  private stopped = false;
  private now: () => number;

  constructor(private opts: PublisherOptions) {
    this.now = opts.now ?? Date.now;
    this.seq = this.now() * 1000 - 1;
    this.publish('initial');
  }

  get current(): Published {
    return this.cur;
  }
  get waiterCount(): number {
    return this.waiters.size;
  }

  /** start the periodic timer (re-armed after every publication, so gaps are <= publishIntervalMs) */
  start(): void {
    this.arm();
  }

  private arm(): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => this.publish('periodic'), this.opts.publishIntervalMs);
  }

  publish(reason: PublishReason): Published {
    this.seq += 1;
    const snapshot: Snapshot = { seq: this.seq, generatedAtMs: this.now(), peers: this.opts.collectPeers() };
    const instances = this.opts.collectInstances?.();
    if (instances !== undefined) snapshot.instances = instances;
    this.cur = { snapshot, binary: encodeSnapshot(snapshot), json: JSON.stringify(snapshotToJson(snapshot), null, 2) + '\n' };
    this.opts.onPublish?.(this.cur, reason);
    const ws = [...this.waiters];
    this.waiters.clear();
    for (const w of ws) w(this.cur);
    if (reason !== 'initial') this.arm();
    return this.cur;
  }

  /**
   * Resolve with the current snapshot right away if its seq != after (or after is undefined
   * or waitMs <= 0); otherwise when the next snapshot is published or after waitMs.
   * The returned cancel() drops the waiter (client went away).
   */
  wait(after: string | undefined, waitMs: number, cb: (p: Published) => void): () => void {
    if (after === undefined || String(this.cur.snapshot.seq) !== after || waitMs <= 0 || this.stopped) {
      cb(this.cur);
      return () => {};
    }
    let done = false;
    const w: Waiter = (p) => {
      if (done) return;
      done = true;
      clearTimeout(t);
      this.waiters.delete(w);
      cb(p);
    };
    const t = setTimeout(() => w(this.cur), waitMs);
    this.waiters.add(w);
    return () => {
      done = true;
      clearTimeout(t);
      this.waiters.delete(w);
    };
  }

  /** stop the timer and answer every waiter with the current snapshot */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    const ws = [...this.waiters];
    this.waiters.clear();
    for (const w of ws) w(this.cur);
  }
}
