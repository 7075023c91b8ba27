// Holds the current snapshot and the long-poll waiters.
// seq starts at boot-time-ms x 1000 and increases by 1 per publication; bootId is random per
// publisher, so the filter orders snapshots by seq only within one boot and lets a restarted
// agent (new bootId, possibly lower seq after a clock step) take over.
import { randomInt } from 'node:crypto';
import * as promClient from 'prom-client';
import type { RuleDecision } from '../rules/engine';
import { encodeSnapshot, sanitizeSnapshot, snapshotToJson, type InstanceRecord, type InvalidNumber, type PeerRecord, type Snapshot } from './codec';
import type { InstanceLlmRecord } from './llm';

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
  /** when it returns undefined no LLM section is written */
  collectLlm?: () => InstanceLlmRecord[] | undefined;
  /** the rule decisions (docs/rules.md); when it returns undefined no RULES section is written */
  collectRules?: () => RuleDecision[] | undefined;
  onPublish?: (p: Published, reason: PublishReason) => void;
  /** called for each healthy instance published as invalid_data (a number out of its range) */
  onInvalid?: (i: InvalidNumber) => void;
  /** when given, invalid numbers are counted in switchyard_agent_snapshot_invalid_numbers_total{field} */
  registry?: promClient.Registry;
  now?: () => number;
  /** default: a random non-zero u32 */
  bootId?: number;
}

const INVALID_METRIC = 'switchyard_agent_snapshot_invalid_numbers_total';

export class SnapshotPublisher {
  private seq: number;
  private cur!: Published;
  private waiters = new Set<Waiter>();
  private timer?: NodeJS.Timeout;
  private stopped = false;
  private now: () => number;
  readonly bootId: number;
  private onInvalid?: (i: InvalidNumber) => void;

  constructor(private opts: PublisherOptions) {
    this.now = opts.now ?? Date.now;
    this.bootId = opts.bootId ?? randomInt(1, 0xffffffff);
    this.seq = this.now() * 1000 - 1;
    const reg = opts.registry;
    const counter = reg
      ? ((reg.getSingleMetric(INVALID_METRIC) as promClient.Counter<'field'> | undefined) ??
        new promClient.Counter({ name: INVALID_METRIC, help: 'Healthy instances published as invalid_data, by the first field out of its range.', labelNames: ['field'], registers: [reg] }))
      : undefined;
    if (counter || opts.onInvalid) {
      this.onInvalid = (i) => {
        counter?.inc({ field: i.field });
        opts.onInvalid?.(i);
      };
    }
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
    const raw: Snapshot = { seq: this.seq, generatedAtMs: this.now(), bootId: this.bootId, peers: this.opts.collectPeers() };
    const instances = this.opts.collectInstances?.();
    if (instances !== undefined) raw.instances = instances;
    const llm = this.opts.collectLlm?.();
    if (llm !== undefined) raw.llm = llm;
    const rules = this.opts.collectRules?.();
    if (rules !== undefined) raw.rules = rules;
    // the rules are applied once here so the JSON view shows what the binary carries
    const snapshot = sanitizeSnapshot(raw, this.onInvalid);
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
