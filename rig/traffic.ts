// Client traffic for the rig: steady requests to the cross-cloud payment service and Poisson
// requests to the inference service, all through the proxy. Tallies where each went.
import * as http from 'node:http';
import { INFERENCE_AUTHORITY, PAYMENT_AUTHORITY } from './rig';

export interface WindowStats {
  payment: { total: number; byCloud: Record<string, number>; byStatus: Record<string, number>; errors: number; latencyMs: number[] };
  inference: { total: number; byInstance: Record<string, number>; degraded: number; errors: number; latencyMs: number[] };
}

function emptyWindow(): WindowStats {
  return {
    payment: { total: 0, byCloud: {}, byStatus: {}, errors: 0, latencyMs: [] },
    inference: { total: 0, byInstance: {}, degraded: 0, errors: 0, latencyMs: [] },
  };
}

export interface TrafficOptions {
  paymentRps?: number;
  inferenceRps?: number;
  /** a spoofed status header on every payment request: the filter must overwrite it */
  spoofStatus?: string;
}

interface Reply { status: number; headers: http.IncomingHttpHeaders; body: string; ms: number }

export class Traffic {
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  private timers: NodeJS.Timeout[] = [];
  private current = emptyWindow();
  private stopped = false;
  private inflight = 0;

  constructor(private readonly proxyUrl: string, private readonly opts: TrafficOptions = {}) {}

  start(): void {
    const pay = this.opts.paymentRps ?? 40;
    if (pay > 0) this.timers.push(setInterval(() => this.payment(), 1000 / pay));
    const inf = this.opts.inferenceRps ?? 20;
    if (inf > 0) this.poisson(inf);
  }

  private poisson(rate: number): void {
    if (this.stopped) return;
    const gap = -Math.log(1 - Math.random()) * 1000 / rate;
    const t = setTimeout(() => { this.inference(); this.poisson(rate); }, gap);
    this.timers.push(t);
    if (this.timers.length > 1000) this.timers = this.timers.slice(-100);
  }

  /** Stats since the previous call. */
  take(): WindowStats {
    const w = this.current;
    this.current = emptyWindow();
    return w;
  }

  private send(authority: string, extra: Record<string, string>): Promise<Reply> {
    const u = new URL(this.proxyUrl);
    const t0 = performance.now();
    this.inflight++;
    return new Promise<Reply>((resolve, reject) => {
      const req = http.request({ host: u.hostname, port: u.port, path: '/v1/demo', agent: this.agent, headers: { host: authority, ...extra }, timeout: 10000 }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body, ms: performance.now() - t0 }));
        res.on('error', reject);
      });
      req.on('timeout', () => req.destroy(new Error('timeout')));
      req.on('error', reject);
      req.end();
    }).finally(() => { this.inflight--; });
  }

  private payment(): void {
    if (this.stopped) return;
    const w = () => this.current.payment;
    const extra: Record<string, string> = this.opts.spoofStatus ? { 'x-cross-cloud-status': this.opts.spoofStatus } : {};
    this.send(PAYMENT_AUTHORITY, extra).then((r) => {
      const p = w();
      p.total++;
      p.latencyMs.push(r.ms);
      // the filter's local reply (a rule's maintenance answer): no upstream, the rule in the debug header
      if (r.headers['x-served-by'] === undefined && /rule set=/.test(String(r.headers['x-switchyard-debug'] ?? ''))) {
        p.byCloud['local-reply'] = (p.byCloud['local-reply'] ?? 0) + 1;
        return;
      }
      if (r.status !== 200) { p.errors++; return; }
      const j = JSON.parse(r.body) as { cloud: string; headers?: Record<string, string> };
      p.byCloud[j.cloud] = (p.byCloud[j.cloud] ?? 0) + 1;
      const s = j.headers?.['x-cross-cloud-status'] ?? '(none)';
      p.byStatus[s] = (p.byStatus[s] ?? 0) + 1;
    }, () => { w().total++; w().errors++; });
  }

  private inference(): void {
    if (this.stopped) return;
    const w = () => this.current.inference;
    this.send(INFERENCE_AUTHORITY, {}).then((r) => {
      const p = w();
      p.total++;
      p.latencyMs.push(r.ms);
      if (r.status !== 200) { p.errors++; return; }
      const debug = String(r.headers['x-switchyard-debug'] ?? '');
      const m = /instance=(\S+)/.exec(debug);
      const where = m ? m[1] : 'default-route';
      if (!m) p.degraded++;
      p.byInstance[where] = (p.byInstance[where] ?? 0) + 1;
    }, () => { w().total++; w().errors++; });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearTimeout(t);
    const deadline = Date.now() + 5000;
    while (this.inflight > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    this.agent.destroy();
  }
}

export function quantile(xs: number[], q: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
}
