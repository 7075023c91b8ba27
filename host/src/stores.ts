// Process-wide state shared by every VM of one (emulated) Envoy process: shared data,
// shared queues (proxy-wasm-cpp-host src/shared_data.cc, src/shared_queue.cc) and stats.

import { MetricType, WasmResult } from './abi';

export class SharedData {
  private cas = 1;
  private readonly data = new Map<string, Map<string, { value: Buffer; cas: number }>>();

  /** 0 is never a valid CAS value (cpp-host SharedData::nextCas). */
  private nextCas(): number {
    const r = this.cas;
    this.cas = (this.cas + 1) >>> 0;
    if (this.cas === 0) this.cas = 1;
    return r;
  }

  get(vmId: string, key: string): { value: Buffer; cas: number } | undefined {
    return this.data.get(vmId)?.get(key);
  }

  set(vmId: string, key: string, value: Buffer, cas: number): WasmResult {
    let map = this.data.get(vmId);
    if (!map) {
      map = new Map();
      this.data.set(vmId, map);
    }
    const cur = map.get(key);
    if (cur) {
      if (cas !== 0 && cas !== cur.cas) return WasmResult.CasMismatch;
      cur.value = Buffer.from(value);
      cur.cas = this.nextCas();
    } else {
      map.set(key, { value: Buffer.from(value), cas: this.nextCas() });
    }
    return WasmResult.Ok;
  }

  keys(vmId: string): string[] {
    return [...(this.data.get(vmId)?.keys() ?? [])];
  }

  deleteVmId(vmId: string): void {
    this.data.delete(vmId);
  }

  /** Snapshot for tests/tools: vmId → key → {value, cas}. */
  snapshot(): Record<string, Record<string, { value: Buffer; cas: number }>> {
    const out: Record<string, Record<string, { value: Buffer; cas: number }>> = {};
    for (const [vm, m] of this.data) {
      out[vm] = {};
      for (const [k, v] of m) out[vm][k] = { value: Buffer.from(v.value), cas: v.cas };
    }
    return out;
  }
}

export interface QueueTarget {
  /** Delivers proxy_on_queue_ready(contextId, token) on the registering VM's "thread". */
  post(contextId: number, token: number): void;
}

interface Queue {
  target: QueueTarget;
  contextId: number;
  items: Buffer[];
}

export class SharedQueues {
  private nextToken = 1;
  private readonly tokens = new Map<string, number>();
  private readonly queues = new Map<number, Queue>();

  private allocToken(): number {
    for (;;) {
      const t = this.nextToken;
      this.nextToken = (this.nextToken + 1) >>> 0;
      if (t === 0) continue;
      if (!this.queues.has(t)) return t;
    }
  }

  register(vmId: string, name: string, contextId: number, target: QueueTarget): number {
    const key = `${vmId}\u0000${name}`;
    let token = this.tokens.get(key);
    if (token === undefined) {
      token = this.allocToken();
      this.tokens.set(key, token);
    }
    const q = this.queues.get(token);
    if (q) {
      // Re-registration: the latest registrant receives on_queue_ready; data is preserved.
      q.target = target;
      q.contextId = contextId;
    } else {
      this.queues.set(token, { target, contextId, items: [] });
    }
    return token;
  }

  resolve(vmId: string, name: string): number {
    return this.tokens.get(`${vmId}\u0000${name}`) ?? 0;
  }

  dequeue(token: number): { result: WasmResult; data?: Buffer } {
    const q = this.queues.get(token);
    if (!q) return { result: WasmResult.NotFound };
    const d = q.items.shift();
    if (d === undefined) return { result: WasmResult.Empty };
    return { result: WasmResult.Ok, data: d };
  }

  enqueue(token: number, data: Buffer): WasmResult {
    const q = this.queues.get(token);
    if (!q) return WasmResult.NotFound;
    q.items.push(Buffer.from(data));
    q.target.post(q.contextId, token);
    return WasmResult.Ok;
  }

  deleteVmId(vmId: string): void {
    for (const [key, token] of this.tokens) {
      if (key.startsWith(`${vmId}\u0000`)) {
        this.tokens.delete(key);
        this.queues.delete(token);
      }
    }
  }
}

/** Envoy's default histogram buckets (source/common/stats/histogram_impl.h). */
export const DEFAULT_BUCKETS = [
  0.5, 1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000, 600000,
  1800000, 3600000,
];

export interface Metric {
  type: MetricType;
  /** Name as defined by the plugin. */
  name: string;
  /** Envoy stat name: 'wasmcustom.' + name. */
  statName: string;
  /** Counter/gauge value (u64). */
  value: bigint;
  /** Histogram state. */
  count: number;
  sum: number;
  buckets: number[];
  samples: number[];
}

export const CUSTOM_STAT_NAMESPACE = 'wasmcustom';
const MAX_SAMPLES = 100_000;

/** Process-wide stats store: the same name and type is the same stat for every VM. */
export class MetricStore {
  private readonly byKey = new Map<string, Metric>();

  getOrCreate(type: MetricType, name: string): Metric {
    const key = `${type}\u0000${name}`;
    let m = this.byKey.get(key);
    if (!m) {
      m = {
        type, name, statName: `${CUSTOM_STAT_NAMESPACE}.${name}`, value: 0n, count: 0, sum: 0,
        buckets: new Array(DEFAULT_BUCKETS.length).fill(0), samples: [],
      };
      this.byKey.set(key, m);
    }
    return m;
  }

  all(): Metric[] {
    return [...this.byKey.values()];
  }

  recordHistogram(m: Metric, v: number): void {
    m.count++;
    m.sum += v;
    for (let i = 0; i < DEFAULT_BUCKETS.length; i++) if (v <= DEFAULT_BUCKETS[i]) m.buckets[i]++;
    if (m.samples.length < MAX_SAMPLES) m.samples.push(v);
  }
}

/** Prometheus name like Envoy's PrometheusStatsFormatter (custom namespace stripped, no envoy_ prefix). */
export function prometheusName(statName: string): string {
  let n = statName.startsWith(`${CUSTOM_STAT_NAMESPACE}.`)
    ? statName.slice(CUSTOM_STAT_NAMESPACE.length + 1) : `envoy_${statName}`;
  n = n.replace(/[^a-zA-Z0-9_]/g, '_');
  if (/^[0-9]/.test(n)) n = `_${n}`;
  return n;
}

const TYPE_NAME: Record<number, string> = { 0: 'counter', 1: 'gauge', 2: 'histogram' };

export function prometheusText(metrics: Metric[], extra: { name: string; type: 'counter' | 'gauge'; value: number | bigint }[] = []): string {
  const lines: string[] = [];
  const sorted = [...metrics].sort((a, b) => a.statName.localeCompare(b.statName) || a.type - b.type);
  for (const m of sorted) {
    const n = prometheusName(m.statName);
    lines.push(`# TYPE ${n} ${TYPE_NAME[m.type]}`);
    if (m.type === MetricType.Histogram) {
      DEFAULT_BUCKETS.forEach((b, i) => lines.push(`${n}_bucket{le="${b}"} ${m.buckets[i]}`));
      lines.push(`${n}_bucket{le="+Inf"} ${m.count}`);
      lines.push(`${n}_sum ${m.sum}`);
      lines.push(`${n}_count ${m.count}`);
    } else {
      lines.push(`${n} ${m.type === MetricType.Gauge ? BigInt.asIntN(64, m.value) : m.value}`);
    }
  }
  for (const e of extra) {
    const n = prometheusName(e.name);
    lines.push(`# TYPE ${n} ${e.type}`);
    lines.push(`${n} ${e.value}`);
  }
  return lines.join('\n') + '\n';
}

export function statsText(metrics: Metric[], extra: { name: string; value: number | bigint }[] = []): string {
  const lines: string[] = [];
  for (const m of metrics) {
    if (m.type === MetricType.Histogram) {
      lines.push(`${m.statName}: count=${m.count} sum=${m.sum}`);
    } else {
      lines.push(`${m.statName}: ${m.type === MetricType.Gauge ? BigInt.asIntN(64, m.value) : m.value}`);
    }
  }
  for (const e of extra) lines.push(`${e.name}: ${e.value}`);
  return lines.sort().join('\n') + '\n';
}

/** Everything one Envoy process shares between its Wasm VMs (pass one to several hosts to model
 *  several plugins/vm_ids in the same process). */
export class EnvoyProcess {
  readonly sharedData = new SharedData();
  readonly queues = new SharedQueues();
  readonly metrics = new MetricStore();
  private readonly vmIdRefs = new Map<string, number>();

  acquire(vmId: string): void {
    this.vmIdRefs.set(vmId, (this.vmIdRefs.get(vmId) ?? 0) + 1);
  }

  release(vmId: string): void {
    const n = (this.vmIdRefs.get(vmId) ?? 1) - 1;
    if (n > 0) {
      this.vmIdRefs.set(vmId, n);
      return;
    }
    this.vmIdRefs.delete(vmId);
    this.sharedData.deleteVmId(vmId);
    this.queues.deleteVmId(vmId);
  }
}
