// Telling a starved agent from a slow line.
//
// A probe's RTT is measured in user space: from the moment the agent issued the request to the
// moment its event loop ran the completion. When the agent's process does not get the CPU (other
// processes saturate the cores) or its loop is blocked (a large /metrics page being parsed), the
// completion runs late and the delay is counted as RTT; the threshold timer that declares a probe
// "slow" fires late too. Node has no kernel receive timestamps, so the delay cannot be removed
// from the measurement; it can be measured: a timer that should fire every `intervalMs` records
// how late it fires. Lateness = time during which the agent could not have observed an answer.
//
// A sample at or above the degrade threshold is counted as slow only when it is slow even if
// every stalled millisecond inside the probe's window had been the agent's fault:
//     elapsed - stalled - resolution >= degradeThresholdMs
// (`resolution` = the lateness timer's period: a stall shorter than one period may be partly
// unseen). Otherwise the sample is "starved": it is not fed to the Schmitt trigger (neither slow
// nor fast; the streaks stay as they are) and is counted. Samples below the threshold need no
// judgement: starvation only ever adds time, so a fast answer is fast.
// A probe still unanswered when the threshold timer fires is re-checked later (see
// nextCheckInMs) instead of being dropped, so a truly slow line is still declared slow while the
// agent is starved, only later.

/** 'slow': count as a high sample; 'starved': the agent's own lateness may explain it. */
export type SlowVerdict = 'slow' | 'starved';

/** PURE. `elapsedMs` >= threshold is assumed (faster samples are not judged). */
export function judgeSlowSample(elapsedMs: number, stalledMs: number, degradeThresholdMs: number, resolutionMs: number): SlowVerdict {
  if (!(stalledMs > 0)) return 'slow';
  return elapsedMs - stalledMs - resolutionMs >= degradeThresholdMs ? 'slow' : 'starved';
}

/**
 * PURE. For a probe still unanswered and judged 'starved' at the threshold timer: how long to
 * wait before looking again (the stalled time has to be made up first). At least 1 ms.
 */
export function nextCheckInMs(elapsedMs: number, stalledMs: number, degradeThresholdMs: number, resolutionMs: number): number {
  return Math.max(1, degradeThresholdMs - (elapsedMs - stalledMs - resolutionMs));
}

/** What the peer monitor needs to know about the agent's own lateness. */
export interface LatenessSource {
  /** ms during which the agent's event loop was stalled within [fromMs, toMs] (performance.now() times) */
  stalledMs(fromMs: number, toMs: number): number;
  /** the period of the measuring timer: stalls shorter than this may be partly unseen */
  readonly resolutionMs: number;
}

export interface Scheduler {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const realScheduler: Scheduler = {
  now: () => performance.now(),
  setTimeout: (fn, ms) => {
    const t = setTimeout(fn, ms);
    t.unref();
    return t;
  },
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};

export interface LatenessMonitorOptions {
  /** period of the measuring timer (default 10 ms) */
  intervalMs?: number;
  /** lateness below this is timer noise, not a stall (default 2 ms) */
  minStallMs?: number;
  /** stalls older than this are forgotten (default 60 s; probes time out long before) */
  horizonMs?: number;
  scheduler?: Scheduler;
}

/** Bounded: stalls are kept for horizonMs, and at most MAX_STALLS of them. */
const MAX_STALLS = 4096;

/** Measures the event loop's timer lateness; one per process is enough (see acquireLatenessMonitor). */
export class LatenessMonitor implements LatenessSource {
  readonly resolutionMs: number;
  private readonly minStallMs: number;
  private readonly horizonMs: number;
  private readonly sched: Scheduler;
  /** [start, end) of each recorded stall, oldest first */
  private stalls: Array<[number, number]> = [];
  private expected = 0;
  private handle: unknown;
  private running = false;
  /** total stalled ms recorded since start (for metrics and benchmarks) */
  totalStalledMs = 0;

  constructor(opts: LatenessMonitorOptions = {}) {
    this.resolutionMs = opts.intervalMs ?? 10;
    this.minStallMs = opts.minStallMs ?? 2;
    this.horizonMs = opts.horizonMs ?? 60_000;
    this.sched = opts.scheduler ?? realScheduler;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.arm(this.sched.now());
  }

  stop(): void {
    this.running = false;
    this.sched.clearTimeout(this.handle); // undefined before start(): a no-op, as clearTimeout(undefined)
    this.handle = undefined;
  }

  private arm(from: number): void {
    this.expected = from + this.resolutionMs;
    this.handle = this.sched.setTimeout(() => this.tick(), this.resolutionMs);
  }

  private tick(): void {
    if (!this.running) return;
    const now = this.sched.now();
    if (now - this.expected >= this.minStallMs) this.record(this.expected, now);
    this.arm(now);
  }

  private record(start: number, end: number): void {
    this.stalls.push([start, end]);
    this.totalStalledMs += end - start;
    const cutoff = end - this.horizonMs;
    let drop = 0;
    while (drop < this.stalls.length && this.stalls[drop][1] < cutoff) drop++;
    if (this.stalls.length - drop > MAX_STALLS) drop = this.stalls.length - MAX_STALLS;
    if (drop) this.stalls.splice(0, drop);
  }

  stalledMs(fromMs: number, toMs: number): number {
    let sum = 0;
    for (let i = this.stalls.length - 1; i >= 0; i--) {
      const [s, e] = this.stalls[i];
      if (e <= fromMs) break;
      sum += Math.max(0, Math.min(e, toMs) - Math.max(s, fromMs));
    }
    // A stall still in progress: the measuring timer is overdue right now. (An I/O completion can
    // run before the overdue timer in the same loop iteration, so this part is not recorded yet.)
    if (this.running && toMs - this.expected >= this.minStallMs) {
      sum += Math.max(0, toMs - Math.max(this.expected, fromMs));
    }
    return sum;
  }
}

let shared: LatenessMonitor | undefined;
let users = 0;

/** The process-wide monitor, started on first use; release it when done (stops with the last user). */
export function acquireLatenessMonitor(): LatenessMonitor {
  shared ??= new LatenessMonitor();
  if (users++ === 0) shared.start();
  return shared;
}

export function releaseLatenessMonitor(m: LatenessMonitor): void {
  if (m !== shared || users === 0) return;
  if (--users === 0) shared.stop();
}
