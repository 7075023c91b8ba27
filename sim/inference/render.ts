// Prometheus text exposition of a simulated server's state, in the style of the real servers
// (metric names, HELP texts, label sets, number formatting of each).
import type { CumHistogram, FifoQueueModel } from './queue';

export type SimKind = 'vllm' | 'triton' | 'tgi';

export interface RenderState {
  model: FifoQueueModel;
  modelName: string;
  gpuUtil: number;
  /** also print DCGM_FI_DEV_GPU_UTIL (as if a DCGM exporter's page were merged in) */
  gpuMetrics: boolean;
  gpuUuid: string;
}

/** Python float repr as prometheus_client prints it ("3.0", "0.25", "1e-05"). */
function py(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  if (Number.isInteger(v) && Math.abs(v) < 1e16) return v.toFixed(1);
  return String(v);
}

function lbl(labels: Array<[string, string]>): string {
  return labels.length ? `{${labels.map(([k, v]) => `${k}="${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`).join(',')}}` : '';
}

function hist(out: string[], name: string, help: string, h: CumHistogram, labels: Array<[string, string]>, fmt: (v: number) => string, leFmt: (v: number) => string): void {
  out.push(`# HELP ${name} ${help}`, `# TYPE ${name} histogram`);
  // prometheus_client prints the buckets, then _count, then _sum; labels sorted by name.
  const cum = h.cumulative();
  const withLe = (le: string): Array<[string, string]> => [...labels, ['le', le] as [string, string]].sort((a, z) => (a[0] < z[0] ? -1 : 1));
  h.bounds.forEach((b, i) => out.push(`${name}_bucket${lbl(withLe(leFmt(b)))} ${fmt(cum[i])}`));
  out.push(`${name}_bucket${lbl(withLe('+Inf'))} ${fmt(cum[cum.length - 1])}`);
  out.push(`${name}_count${lbl(labels)} ${fmt(h.count)}`);
  out.push(`${name}_sum${lbl(labels)} ${fmt(h.sum)}`);
}

export function renderVllm(s: RenderState): string {
  const m = s.model;
  const L: Array<[string, string]> = [
    ['engine', '0'],
    ['model_name', s.modelName],
  ];
  const o: string[] = [];
  const gauge = (name: string, help: string, v: number): void => {
    o.push(`# HELP ${name} ${help}`, `# TYPE ${name} gauge`, `${name}${lbl(L)} ${py(v)}`);
  };
  gauge('vllm:num_requests_running', 'Number of requests in model execution batches.', m.running);
  gauge('vllm:num_requests_waiting', 'Number of requests waiting to be processed.', m.waiting);
  gauge('vllm:kv_cache_usage_perc', 'KV-cache usage. 1 means 100 percent usage.', m.running / m.concurrency);
  o.push('# HELP vllm:request_success_total Count of successfully processed requests.', '# TYPE vllm:request_success_total counter');
  for (const reason of ['abort', 'length', 'stop']) {
    o.push(`vllm:request_success_total${lbl([['engine', '0'], ['finished_reason', reason], ['model_name', s.modelName]])} ${py(reason === 'stop' ? m.completed : 0)}`);
  }
  hist(o, 'vllm:e2e_request_latency_seconds', 'Histogram of e2e request latency in seconds.', m.e2e, L, py, py);
  hist(o, 'vllm:request_queue_time_seconds', 'Histogram of time spent in WAITING phase for request.', m.queueTime, L, py, py);
  hist(o, 'vllm:request_inference_time_seconds', 'Histogram of time spent in RUNNING phase for request.', m.serviceTime, L, py, py);
  if (s.gpuMetrics) dcgm(o, s);
  return o.join('\n') + '\n';
}

function dcgm(o: string[], s: RenderState): void {
  const labels: Array<[string, string]> = [
    ['gpu', '0'],
    ['UUID', s.gpuUuid],
    ['device', 'nvidia0'],
    ['modelName', 'NVIDIA A100-SXM4-80GB'],
    ['Hostname', 'sim'],
  ];
  o.push('# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).', '# TYPE DCGM_FI_DEV_GPU_UTIL gauge', `DCGM_FI_DEV_GPU_UTIL${lbl(labels)} ${Math.round(s.gpuUtil * 100)}`);
}

export function renderTriton(s: RenderState): string {
  const m = s.model;
  const L: Array<[string, string]> = [
    ['model', s.modelName],
    ['version', '1'],
  ];
  const us = (h: CumHistogram): number => Math.round(h.sum * 1e6);
  const o: string[] = [];
  const fam = (name: string, type: string, help: string, lines: string[]): void => {
    o.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, ...lines);
  };
  fam('nv_inference_request_success', 'counter', 'Number of successful inference requests, all batch sizes', [`nv_inference_request_success${lbl(L)} ${m.completed}`]);
  fam('nv_inference_request_failure', 'counter', 'Number of failed inference requests, all batch sizes', [`nv_inference_request_failure${lbl([['model', s.modelName], ['reason', 'OTHER'], ['version', '1']])} 0`]);
  fam('nv_inference_count', 'counter', 'Number of inferences performed (does not include cached requests)', [`nv_inference_count${lbl(L)} ${m.completed}`]);
  fam('nv_inference_exec_count', 'counter', 'Number of model executions performed (does not include cached requests)', [`nv_inference_exec_count${lbl(L)} ${m.completed}`]);
  fam('nv_inference_request_duration_us', 'counter', 'Cumulative inference request duration in microseconds (includes cached requests)', [`nv_inference_request_duration_us${lbl(L)} ${us(m.e2e)}`]);
  fam('nv_inference_queue_duration_us', 'counter', 'Cumulative inference queuing duration in microseconds (includes cached requests)', [`nv_inference_queue_duration_us${lbl(L)} ${us(m.queueTime)}`]);
  fam('nv_inference_compute_infer_duration_us', 'counter', 'Cumulative compute inference duration in microseconds (does not include cached requests)', [`nv_inference_compute_infer_duration_us${lbl(L)} ${us(m.serviceTime)}`]);
  fam('nv_inference_pending_request_count', 'gauge', 'Instantaneous number of pending requests awaiting execution per-model.', [`nv_inference_pending_request_count${lbl(L)} ${m.waiting}`]);
  const G: Array<[string, string]> = [['gpu_uuid', s.gpuUuid]];
  const total = 80 * 1024 ** 3;
  fam('nv_gpu_utilization', 'gauge', 'GPU utilization rate [0.0 - 1.0)', [`nv_gpu_utilization${lbl(G)} ${Number(s.gpuUtil.toFixed(4))}`]);
  fam('nv_gpu_memory_total_bytes', 'gauge', 'GPU total memory, in bytes', [`nv_gpu_memory_total_bytes${lbl(G)} ${total}`]);
  fam('nv_gpu_memory_used_bytes', 'gauge', 'GPU used memory, in bytes', [`nv_gpu_memory_used_bytes${lbl(G)} ${Math.round(total * (0.5 + 0.4 * (m.running / m.concurrency)))}`]);
  return o.join('\n') + '\n';
}

export function renderTgi(s: RenderState): string {
  const m = s.model;
  const o: string[] = [];
  const g = (name: string, type: string, v: number): void => {
    o.push(`# TYPE ${name} ${type}`, `${name} ${v}`);
  };
  g('tgi_request_count', 'counter', m.arrived);
  g('tgi_request_success', 'counter', m.completed);
  g('tgi_queue_size', 'gauge', m.waiting);
  g('tgi_batch_current_size', 'gauge', m.running);
  const num = (v: number): string => String(v);
  for (const [name, h] of [
    ['tgi_request_duration', m.e2e],
    ['tgi_request_queue_duration', m.queueTime],
    ['tgi_request_inference_duration', m.serviceTime],
  ] as const) {
    o.push(`# TYPE ${name} histogram`);
    const cum = h.cumulative();
    h.bounds.forEach((b, i) => o.push(`${name}_bucket{le="${b}"} ${cum[i]}`));
    o.push(`${name}_bucket{le="+Inf"} ${cum[cum.length - 1]}`, `${name}_sum ${num(h.sum)}`, `${name}_count ${h.count}`);
  }
  return o.join('\n') + '\n';
}

export function render(kind: SimKind, s: RenderState): string {
  return kind === 'vllm' ? renderVllm(s) : kind === 'triton' ? renderTriton(s) : renderTgi(s);
}
