// A real, throw-away etcd for tests and the benchmark: temp data dir, random free ports,
// waits until /health says true. Not a test file itself.
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';

export const ETCD_BIN = process.env.ETCD_BIN ?? '/usr/bin/etcd';
export const ETCDCTL_BIN = process.env.ETCDCTL_BIN ?? '/usr/bin/etcdctl';

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
  });
}

export interface EtcdServer {
  clientUrl: string;
  dataDir: string;
  /** SIGKILL: an outage, not a clean shutdown */
  kill(): Promise<void>;
  /** start again on the same ports and data */
  restart(): Promise<void>;
  /** kill and remove the data dir */
  dispose(): Promise<void>;
}

/** `extraArgs`: more etcd flags (e.g. a shorter --election-timeout, which lowers etcd's minimum lease TTL) */
export async function startEtcd(extraArgs: string[] = []): Promise<EtcdServer> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'swy-etcd-'));
  const clientPort = await freePort();
  const peerPort = await freePort();
  const clientUrl = `http://127.0.0.1:${clientPort}`;
  const peerUrl = `http://127.0.0.1:${peerPort}`;
  let proc: ChildProcess | undefined;
  let log = '';
  const launch = async (): Promise<void> => {
    proc = spawn(
      ETCD_BIN,
      ['--name', 'swy-test', '--data-dir', dataDir, '--listen-client-urls', clientUrl, '--advertise-client-urls', clientUrl, '--listen-peer-urls', peerUrl, '--initial-advertise-peer-urls', peerUrl, '--initial-cluster', `swy-test=${peerUrl}`, '--log-level', 'error', '--logger', 'zap', ...extraArgs],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    proc.stderr!.on('data', (c) => (log = (log + c).slice(-4000)));
    const end = Date.now() + 20_000;
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`etcd exited with ${proc.exitCode}: ${log}`);
      try {
        const r = await fetch(`${clientUrl}/health`, { signal: AbortSignal.timeout(500) });
        if (r.ok && ((await r.json()) as { health: string }).health === 'true') return;
      } catch {
        /* not up yet */
      }
      if (Date.now() > end) throw new Error(`etcd not healthy within 20 s: ${log}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const kill = async (): Promise<void> => {
    const p = proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    await new Promise<void>((r) => {
      p.once('exit', () => r());
      p.kill('SIGKILL');
    });
  };
  await launch();
  return {
    clientUrl,
    dataDir,
    kill,
    restart: launch,
    async dispose() {
      await kill();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
