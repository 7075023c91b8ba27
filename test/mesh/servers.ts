// Throw-away NATS for the mesh tests and benchmark (temp dir, random loopback port), etcd tuned
// for 1 s leases (test/rules/etcd-server.ts with --election-timeout 500), a TCP relay that can
// cut one agent off from NATS, and an inference instance that counts its scrapes. Not a test file.
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { freePort, startEtcd, type EtcdServer } from '../rules/etcd-server';
import { startInferenceServer, type InferenceServerHandle } from '../../sim/inference-server';

export const NATS_BIN = process.env.NATS_BIN ?? '/usr/sbin/nats-server';

/** etcd with the flags docs/mesh.md asks for: a 1 s lease is honoured (min TTL = 1.5 x 500 ms, rounded up) */
export function startMeshEtcd(): Promise<EtcdServer> {
  return startEtcd(['--heartbeat-interval', '50', '--election-timeout', '500']);
}

export interface NatsServer {
  url: string;
  port: number;
  /** SIGKILL: an outage */
  kill(): Promise<void>;
  /** start again on the same port */
  restart(): Promise<void>;
  dispose(): Promise<void>;
}

export async function startNats(): Promise<NatsServer> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swy-nats-'));
  const port = await freePort();
  let proc: ChildProcess | undefined;
  let log = '';
  const launch = async (): Promise<void> => {
    proc = spawn(NATS_BIN, ['-a', '127.0.0.1', '-p', String(port), '-m', '0', '--pid', path.join(dir, 'nats.pid')], { stdio: ['ignore', 'ignore', 'pipe'], cwd: dir });
    proc.stderr!.on('data', (c) => (log = (log + c).slice(-4000)));
    const end = Date.now() + 10_000;
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`nats-server exited with ${proc.exitCode}: ${log}`);
      const up = await new Promise<boolean>((r) => {
        const s = net.connect(port, '127.0.0.1');
        s.once('data', (d) => { s.destroy(); r(d.toString().startsWith('INFO')); });
        s.once('error', () => r(false));
      });
      if (up) return;
      if (Date.now() > end) throw new Error(`nats-server not up within 10 s: ${log}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  };
  const kill = async (): Promise<void> => {
    const p = proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    await new Promise<void>((r) => { p.once('exit', () => r()); p.kill('SIGKILL'); });
  };
  await launch();
  return {
    url: `nats://127.0.0.1:${port}`, port, kill, restart: launch,
    async dispose() { await kill(); fs.rmSync(dir, { recursive: true, force: true }); },
  };
}

/** A TCP relay to `targetPort`: cut() drops every connection and refuses new ones, restore() accepts again. */
export interface Relay {
  url: string;
  cut(): void;
  restore(): void;
  close(): Promise<void>;
}

export async function startRelay(targetPort: number): Promise<Relay> {
  let open = true;
  const socks = new Set<net.Socket>();
  const server = net.createServer((c) => {
    if (!open) { c.destroy(); return; }
    const u = net.connect(targetPort, '127.0.0.1');
    socks.add(c); socks.add(u);
    c.pipe(u); u.pipe(c);
    const end = () => { c.destroy(); u.destroy(); socks.delete(c); socks.delete(u); };
    c.on('error', end); u.on('error', end); c.on('close', end); u.on('close', end);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `nats://127.0.0.1:${port}`,
    cut() { open = false; for (const s of socks) s.destroy(); socks.clear(); },
    restore() { open = true; },
    close: () => new Promise((r) => { for (const s of socks) s.destroy(); server.close(() => r()); }),
  };
}

/** An inference instance (sim/inference-server.ts, vLLM) behind an HTTP front that counts the scrapes of /metrics. */
export interface CountedInstance {
  addr: string;
  sim: InferenceServerHandle;
  scrapes(): number;
  stop(): Promise<void>;
}

export async function startCountedInstance(seed: number): Promise<CountedInstance> {
  const sim = await startInferenceServer({ host: '127.0.0.1', port: 0, kind: 'vllm', concurrency: 4, seed, dist: { kind: 'exponential', meanMs: 20 } });
  let scrapes = 0;
  const front = http.createServer((req, res) => {
    if (req.url?.startsWith('/metrics')) scrapes++;
    const up = http.request({ host: '127.0.0.1', port: sim.port, method: req.method, path: req.url, headers: req.headers }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    up.on('error', () => { res.writeHead(502); res.end(); });
    req.pipe(up);
  });
  await new Promise<void>((r) => front.listen(0, '127.0.0.1', () => r()));
  const port = (front.address() as net.AddressInfo).port;
  return {
    addr: `127.0.0.1:${port}`, sim, scrapes: () => scrapes,
    stop: async () => { front.closeAllConnections(); await new Promise((r) => front.close(() => r(undefined))); await sim.stop(); },
  };
}
