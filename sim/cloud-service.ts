// A tiny HTTP service standing for one cloud's application.
//
//   GET /healthz        -> 200 "ok" (status configurable, for failure injection)
//   anything else       -> 200 JSON {cloud, instance, method, path, headers: {...of interest}}
//                          with header x-served-by: <cloud>
//   PUT /__sim/health?status=503     set the /healthz status (JSON body {"status":503} too)
//   PUT /__sim/delay?ms=100          delay every answer by ms
//   GET /__sim/stats                 {requests, healthz}
//
// CLI:  tsx sim/cloud-service.ts --cloud cloud-a --listen 127.0.0.1:9001 [--health-status 200] [--delay-ms 0]
//       aliases: --name = --cloud; --port N [--host H] = --listen H:N (host default 127.0.0.1);
//       --listen may be a bare port. Default: cloud-a on 127.0.0.1:9001.
// Programmatic: const svc = await startCloudService({ cloud: 'cloud-b', port: 0 }); svc.url; await svc.close();
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { hostPort, parseFlags } from './cli';

export const HEADERS_OF_INTEREST = [
  'host',
  'x-cross-cloud-status',
  'x-degraded',
  'x-switchyard-endpoint',
  'x-switchyard-debug',
  'x-request-id',
  'x-forwarded-for',
  'x-forwarded-proto',
  'x-envoy-original-path',
  'x-envoy-attempt-count',
  'x-envoy-expected-rq-timeout-ms',
  'x-envoy-upstream-service-time',
  'user-agent',
];

export interface CloudServiceOptions {
  cloud?: string;
  host?: string;
  /** 0 = ephemeral (default) */
  port?: number;
  healthStatus?: number;
  delayMs?: number;
}

export interface CloudService {
  cloud: string;
  host: string;
  port: number;
  url: string;
  setHealthStatus(status: number): void;
  setDelayMs(ms: number): void;
  stats(): { requests: number; healthz: number };
  close(): Promise<void>;
}

export async function startCloudService(opts: CloudServiceOptions = {}): Promise<CloudService> {
  const cloud = opts.cloud ?? 'cloud-a';
  let healthStatus = opts.healthStatus ?? 200;
  let delayMs = opts.delayMs ?? 0;
  const counts = { requests: 0, healthz: 0 };
  let instance = '';

  const checkStatus = (s: number): void => {
    if (!Number.isInteger(s) || s < 100 || s > 599) throw new RangeError('status: must be an integer 100..599');
  };
  const checkDelay = (ms: number): void => {
    if (!Number.isFinite(ms) || ms < 0 || ms > 600_000) throw new RangeError('ms: must be a number 0..600000');
  };
  checkStatus(healthStatus);
  checkDelay(delayMs);

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://svc');
      const send = (code: number, body: string, type: string): void => {
        res.writeHead(code, { 'content-type': type, 'content-length': Buffer.byteLength(body), 'x-served-by': cloud, 'x-served-instance': instance });
        res.end(body);
      };
      const json = (code: number, v: unknown): void => send(code, JSON.stringify(v) + '\n', 'application/json');
      if (url.pathname.startsWith('/__sim/')) {
        let body: Record<string, unknown> = {};
        try {
          const t = Buffer.concat(chunks).toString().trim();
          if (t) body = JSON.parse(t);
        } catch {
          return json(400, { error: 'body: invalid JSON' });
        }
        const param = (n: string): number => Number(url.searchParams.get(n) ?? body[n]);
        try {
          if (url.pathname === '/__sim/stats' && req.method === 'GET') return json(200, { ...counts });
          if (url.pathname === '/__sim/health' && (req.method === 'PUT' || req.method === 'POST')) {
            const s = param('status');
            checkStatus(s);
            healthStatus = s;
            return json(200, { healthStatus });
          }
          if (url.pathname === '/__sim/delay' && (req.method === 'PUT' || req.method === 'POST')) {
            const ms = param('ms');
            checkDelay(ms);
            delayMs = ms;
            return json(200, { delayMs });
          }
        } catch (err) {
          return json(400, { error: (err as Error).message });
        }
        return json(404, { error: 'not found' });
      }
      const answer = (): void => {
        if (url.pathname === '/healthz') {
          counts.healthz++;
          return send(healthStatus, healthStatus >= 200 && healthStatus < 300 ? 'ok\n' : 'unhealthy\n', 'text/plain');
        }
        counts.requests++;
        const headers: Record<string, string | string[]> = {};
        for (const h of HEADERS_OF_INTEREST) {
          const v = req.headers[h];
          if (v !== undefined) headers[h] = v;
        }
        json(200, { cloud, instance, method: req.method, path: req.url, headers });
      };
      if (delayMs > 0) setTimeout(answer, delayMs);
      else answer();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const addr = server.address() as AddressInfo;
  instance = `${addr.address}:${addr.port}`;
  return {
    cloud,
    host: addr.address,
    port: addr.port,
    url: `http://${addr.family === 'IPv6' ? `[${addr.address}]` : addr.address}:${addr.port}`,
    setHealthStatus(s) {
      checkStatus(s);
      healthStatus = s;
    },
    setDelayMs(ms) {
      checkDelay(ms);
      delayMs = ms;
    },
    stats: () => ({ ...counts }),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

async function cli(argv: string[]): Promise<void> {
  const a = parseFlags(argv, ['cloud', 'name', 'listen', 'host', 'port', 'health-status', 'delay-ms']);
  const { host, port } = hostPort(a.listen ?? `${a.host ?? '127.0.0.1'}:${a.port ?? '9001'}`, '--listen');
  const svc = await startCloudService({
    cloud: a.cloud ?? a.name ?? 'cloud-a',
    host,
    port,
    healthStatus: a['health-status'] !== undefined ? Number(a['health-status']) : undefined,
    delayMs: a['delay-ms'] !== undefined ? Number(a['delay-ms']) : undefined,
  });
  process.stdout.write(JSON.stringify({ time: new Date().toISOString(), svc: 'cloud-service', msg: 'cloud service up', cloud: svc.cloud, url: svc.url }) + '\n');
  const stop = (): void => {
    svc.close().then(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

if (require.main === module) {
  cli(process.argv.slice(2)).catch((err) => {
    process.stderr.write(`cloud-service: ${(err as Error).message}\n`);
    process.exit(2);
  });
}
