// Time sources and timers for the host: 'real' (Node timers, wall clock) and 'manual'
// (a virtual clock; nothing happens until advance()/flush(), which run due events in order).
import { MinHeap } from './heap';

export interface TimerHandle {
  cancel(): void;
}

export interface Clock {
  readonly mode: 'real' | 'manual';
  /** Wall clock (epoch) in ms, fractional. */
  nowMs(): number;
  /** Wall clock (epoch) in ns, for proxy_get_current_time_nanoseconds / clock_time_get(realtime). */
  nowNs(): bigint;
  /** Monotonic ns (clock_time_get(monotonic)). */
  monoNs(): bigint;
  /**
   * nowNs() as a number when that is exact (a non-negative integer double; -1 otherwise): the
   * request path's clock read writes it without BigInt arithmetic. Optional.
   */
  nowNsNumber?(): number;
  /** Runs fn after delayMs (>= 0). */
  setTimer(delayMs: number, fn: () => void): TimerHandle;
  /** Runs fn soon, never re-entrantly (Envoy's dispatcher.post). */
  post(fn: () => void): void;
  /** Tracks an in-flight promise whose settlement schedules events (manual mode waits for it in advance()). */
  track(p: PromiseLike<unknown>): void;
  close(): void;
}

export class RealClock implements Clock {
  readonly mode = 'real' as const;
  private readonly baseNs: bigint;
  private readonly baseHr: bigint;
  private readonly timers = new Set<NodeJS.Timeout>();
  private closed = false;

  constructor() {
    this.baseHr = process.hrtime.bigint();
    this.baseNs = BigInt(Date.now()) * 1_000_000n;
  }
  nowMs(): number {
    return Number(this.nowNs() / 1000n) / 1000;
  }
  nowNs(): bigint {
    return this.baseNs + (process.hrtime.bigint() - this.baseHr);
  }
  monoNs(): bigint {
    return process.hrtime.bigint();
  }
  setTimer(delayMs: number, fn: () => void): TimerHandle {
    if (this.closed) return { cancel() {} };
    const t = setTimeout(() => {
      this.timers.delete(t);
      fn();
    }, Math.max(0, delayMs));
    this.timers.add(t);
    return {
      cancel: () => {
        clearTimeout(t);
        this.timers.delete(t);
      },
    };
  }
  post(fn: () => void): void {
    if (this.closed) return;
    setImmediate(() => {
      if (!this.closed) fn();
    });
  }
  track(_p: PromiseLike<unknown>): void {}
  close(): void {
    this.closed = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }
}

interface ManualEvent {
  at: number;
  seq: number;
  fn: () => void;
  cancelled: boolean;
}

/**
 * Virtual clock. Time only moves in advance()/advanceSync(); events due at the same instant run
 * in scheduling order. post() schedules at the current instant (delivered on the next
 * advance/flush, never re-entrantly).
 */
export class ManualClock implements Clock {
  readonly mode = 'manual' as const;
  private now: number;
  private seq = 0;
  private readonly heap = new MinHeap<ManualEvent>((a, b) => a.at < b.at || (a.at === b.at && a.seq < b.seq));
  private pending = 0;
  private closed = false;
  private running = false;

  constructor(startMs = 1_700_000_000_000) {
    this.now = startMs;
  }
  nowMs(): number {
    return this.now;
  }
  nowNs(): bigint {
    return BigInt(Math.round(this.now * 1e6));
  }
  nowNsNumber(): number {
    // BigInt(x) of an integer double is exact: the same value as nowNs()
    const x = Math.round(this.now * 1e6);
    return x >= 0 ? x : -1;
  }
  monoNs(): bigint {
    return this.nowNs();
  }
  setTimer(delayMs: number, fn: () => void): TimerHandle {
    const ev: ManualEvent = { at: this.now + Math.max(0, delayMs), seq: this.seq++, fn, cancelled: false };
    if (!this.closed) this.heap.push(ev);
    return { cancel: () => { ev.cancelled = true; } };
  }
  post(fn: () => void): void {
    this.setTimer(0, fn);
  }
  track(p: PromiseLike<unknown>): void {
    this.pending++;
    const done = () => { this.pending--; };
    p.then(done, done);
  }
  /** Number of scheduled (not cancelled) events. */
  get scheduled(): number {
    return this.heap.items().filter((e) => !e.cancelled).length;
  }
  /** Time of the next scheduled event, or undefined. */
  nextEventAt(): number | undefined {
    this.dropCancelled();
    return this.heap.peek()?.at;
  }

  /** Runs every event due up to now+ms (in time order) and sets the clock to now+ms. */
  advanceSync(ms: number): number {
    if (!(ms >= 0)) throw new Error(`advance: ms must be >= 0, got ${ms}`);
    if (this.running) throw new Error('advance: re-entrant call (called from inside a callback)');
    const target = this.now + ms;
    let n = 0;
    this.running = true;
    try {
      for (;;) {
        this.dropCancelled();
        const ev = this.heap.peek();
        if (!ev || ev.at > target) break;
        this.heap.pop();
        this.now = Math.max(this.now, ev.at);
        n++;
        ev.fn();
      }
      this.now = target;
    } finally {
      this.running = false;
    }
    return n;
  }

  /**
   * Like advanceSync, but lets in-flight promises (async cluster handlers) settle before and
   * between events, so their responses are delivered at the virtual time they resolved.
   */
  async advance(ms: number): Promise<number> {
    if (!(ms >= 0)) throw new Error(`advance: ms must be >= 0, got ${ms}`);
    const target = this.now + ms;
    let n = 0;
    for (;;) {
      await this.settle();
      this.dropCancelled();
      const ev = this.heap.peek();
      if (!ev || ev.at > target) {
        if (this.pending > 0) {
          // A promise is still in flight; give it a chance, but do not wait forever.
          const before = this.heap.size;
          await new Promise((r) => setImmediate(r));
          if (this.heap.size !== before) continue;
        }
        break;
      }
      this.heap.pop();
      this.now = Math.max(this.now, ev.at);
      n++;
      this.running = true;
      try {
        ev.fn();
      } finally {
        this.running = false;
      }
    }
    this.now = target;
    return n;
  }

  private async settle(): Promise<void> {
    // A couple of macrotask turns let already-resolved promise chains run their callbacks.
    if (this.pending === 0) return;
    for (let i = 0; i < 2; i++) await new Promise((r) => setImmediate(r));
  }

  close(): void {
    this.closed = true;
    this.heap.clear();
  }

  private dropCancelled(): void {
    while (this.heap.size && this.heap.peek()!.cancelled) this.heap.pop();
  }
}
