// FIFO multi-server queue (c slots) as a pure, clock-agnostic model: the caller says what
// time it is. The real-time server (sim/inference-server.ts) drives it with performance.now()
// and setTimeout; a discrete-event simulation drives it with virtual time (simulateFifo()).

/** Cumulative Prometheus-style histogram (values in seconds). */
export class CumHistogram {
  readonly counts: number[];
  sum = 0;
  count = 0;
  constructor(readonly bounds: number[]) {
    this.counts = new Array(bounds.length + 1).fill(0);
  }
  observe(v: number): void {
    let i = 0;
    while (i < this.bounds.length && v > this.bounds[i]) i++;
    this.counts[i]++;
    this.sum += v;
    this.count++;
  }
  /** cumulative counts, length bounds+1 (last = +Inf) */
  cumulative(): number[] {
    let acc = 0;
    return this.counts.map((c) => (acc += c));
  }
}

/** Real vLLM e2e/queue/inference-time buckets (seconds), vllm/v1/metrics. */
export const VLLM_REQUEST_LATENCY_BUCKETS = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0];
/** vLLM's time-to-first-token buckets below 0.3 s, prepended for sub-second simulated services. */
export const VLLM_FINE_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, ...VLLM_REQUEST_LATENCY_BUCKETS];
/** TGI router: 35 buckets, 0.0001 * 1.5^k, k = 1..35. */
export const TGI_DURATION_BUCKETS = Array.from({ length: 35 }, (_, k) => Number((0.0001 * Math.pow(1.5, k + 1)).toPrecision(12)));

export interface QueueJob<T = unknown> {
  id: number;
  serviceMs: number;
  arrivedAt: number;
  startedAt?: number;
  finishedAt?: number;
  payload?: T;
}

/** Time-weighted occupancy (number running) for utilisation over a trailing window. */
class Occupancy {
  /** (time, running from that time on) */
  private pts: Array<[number, number]> = [];
  constructor(private readonly keepMs: number) {}
  set(now: number, running: number): void {
    const last = this.pts[this.pts.length - 1];
    if (last && last[0] === now) last[1] = running;
    else this.pts.push([now, running]);
    // keep one point before the window
    while (this.pts.length > 2 && this.pts[1][0] <= now - this.keepMs) this.pts.shift();
  }
  /** ∫ running dt over [now - w, now] (ms·slots) */
  integral(now: number, w: number): number {
    const from = now - w;
    let acc = 0;
    for (let i = 0; i < this.pts.length; i++) {
      const [t, r] = this.pts[i];
      const tEnd = i + 1 < this.pts.length ? this.pts[i + 1][0] : now;
      const a = Math.max(t, from);
      const b = Math.min(tEnd, now);
      if (b > a) acc += r * (b - a);
    }
    return acc;
  }
}

export interface FifoStats {
  waiting: number;
  running: number;
  arrived: number;
  completed: number;
  cancelled: number;
  /** cumulative ms */
  busySlotMs: number;
}

export class FifoQueueModel<T = unknown> {
  readonly concurrency: number;
  private readonly queue: QueueJob<T>[] = [];
  private head = 0;
  private readonly runningJobs = new Set<QueueJob<T>>();
  private nextId = 1;
  private occ: Occupancy;
  arrived = 0;
  completed = 0;
  cancelled = 0;
  busySlotMs = 0;
  readonly e2e: CumHistogram;
  readonly queueTime: CumHistogram;
  readonly serviceTime: CumHistogram;

  constructor(opts: { concurrency: number; bucketsS?: number[]; occupancyWindowMs?: number }) {
    if (!(Number.isInteger(opts.concurrency) && opts.concurrency >= 1)) throw new RangeError('concurrency must be an integer >= 1');
    this.concurrency = opts.concurrency;
    const b = opts.bucketsS ?? VLLM_FINE_BUCKETS;
    this.e2e = new CumHistogram(b);
    this.queueTime = new CumHistogram(b);
    this.serviceTime = new CumHistogram(b);
    this.occ = new Occupancy(opts.occupancyWindowMs ?? 1000);
  }

  get waiting(): number {
    return this.queue.length - this.head;
  }
  get running(): number {
    return this.runningJobs.size;
  }
  /** ids of the waiting jobs, in FIFO order */
  waitingIds(): number[] {
    return this.queue.slice(this.head).map((j) => j.id);
  }

  /** A job arrives. If a slot is free it starts at once (job.startedAt set). */
  arrive(now: number, serviceMs: number, payload?: T): QueueJob<T> {
    const job: QueueJob<T> = { id: this.nextId++, serviceMs, arrivedAt: now, payload };
    this.arrived++;
    if (this.running < this.concurrency && this.waiting === 0) this.start(now, job);
    else this.queue.push(job);
    return job;
  }

  private start(now: number, job: QueueJob<T>): void {
    job.startedAt = now;
    this.runningJobs.add(job);
    this.occ.set(now, this.running);
  }

  /** A running job finishes; returns the jobs that start now (FIFO), at most one per freed slot. */
  complete(now: number, job: QueueJob<T>): QueueJob<T>[] {
    if (!this.runningJobs.delete(job)) throw new Error(`job ${job.id} is not running`);
    job.finishedAt = now;
    this.completed++;
    const started = job.startedAt as number;
    this.busySlotMs += now - started;
    this.e2e.observe((now - job.arrivedAt) / 1000);
    this.queueTime.observe((started - job.arrivedAt) / 1000);
    this.serviceTime.observe((now - started) / 1000);
    this.occ.set(now, this.running);
    const out: QueueJob<T>[] = [];
    while (this.running < this.concurrency && this.waiting > 0) {
      const next = this.queue[this.head++];
      this.start(now, next);
      out.push(next);
    }
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue.splice(0, this.head);
      this.head = 0;
    }
    return out;
  }

  /** Remove a job that is still waiting (client gave up). */
  cancel(job: QueueJob<T>): boolean {
    const i = this.queue.indexOf(job, this.head);
    if (i < 0) return false;
    this.queue.splice(i, 1);
    this.cancelled++;
    return true;
  }

  /** Fraction of slot-time busy over the trailing window (0..1). */
  utilization(now: number, windowMs = 1000): number {
    return Math.min(1, this.occ.integral(now, windowMs) / (this.concurrency * windowMs));
  }

  stats(): FifoStats {
    return { waiting: this.waiting, running: this.running, arrived: this.arrived, completed: this.completed, cancelled: this.cancelled, busySlotMs: this.busySlotMs };
  }
}

/**
 * Discrete-event run of a FIFO c-slot queue in virtual time (no sleeping): arrivals at
 * `arrivalsMs` (ascending) with service times `serviceMs`. Returns the jobs with their
 * start/finish times, and the model (its histograms, counters).
 */
export function simulateFifo(opts: { concurrency: number; arrivalsMs: number[]; serviceMs: number[]; bucketsS?: number[] }): { jobs: QueueJob[]; model: FifoQueueModel } {
  const model = new FifoQueueModel({ concurrency: opts.concurrency, bucketsS: opts.bucketsS });
  const jobs: QueueJob[] = [];
  // pending completions, kept sorted by finish time (small c: linear insert is fine)
  const done: QueueJob[] = [];
  const schedule = (j: QueueJob): void => {
    const f = (j.startedAt as number) + j.serviceMs;
    let k = done.length;
    while (k > 0 && (done[k - 1].startedAt as number) + done[k - 1].serviceMs > f) k--;
    done.splice(k, 0, j);
  };
  const finishUpTo = (t: number): void => {
    while (done.length > 0 && (done[0].startedAt as number) + done[0].serviceMs <= t) {
      const j = done.shift() as QueueJob;
      for (const s of model.complete((j.startedAt as number) + j.serviceMs, j)) schedule(s);
    }
  };
  opts.arrivalsMs.forEach((a, i) => {
    finishUpTo(a);
    const j = model.arrive(a, opts.serviceMs[i]);
    jobs.push(j);
    if (j.startedAt !== undefined) schedule(j);
  });
  finishUpTo(Infinity);
  return { jobs, model };
}
