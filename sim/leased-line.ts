// Leased-line delay injector (this machine has no `tc netem`).
//
// A TCP proxy listen -> target that delays every chunk in each direction by half the
// configured RTT addition (so a request/response round trip gains `rttMs`), preserving byte
// order: each direction is a FIFO of (dueTime, chunk); dueTime = max(now + oneWayDelay,
// previous dueTime), one timer for the head of the queue. Changing the delay affects chunks
// that arrive afterwards; chunks already queued keep their due time (and nothing overtakes).
//
//   jitterMs   each chunk's one-way delay is rttMs/2 + U(-1,1) x jitterMs/2 (>= 0), so the
//              round trip varies by about +-jitterMs; order is still preserved.
//   blackhole  'off' | 'drop' (chunks are silently discarded, connections stay open) |
//              'stall' (chunks are held; delivered in order when the blackhole is lifted).
//
// Limits: the TCP handshake with the injector itself is local (userland proxy), so a TCP
// connect probe through it does not see the delay; use an HTTP probe (data round trip).
//
// CLI:  tsx sim/leased-line.ts --listen 127.0.0.1:9102 --target 127.0.0.1:9002 \
//                              --control 127.0.0.1:9103 --rtt-ms 5 [--jitter-ms 0] [--blackhole off]
//       Addresses may be bare ports (host 127.0.0.1); `--control none` disables the control API.
//       Defaults are the rig's: listen 9102, target 127.0.0.1:9002, control 9103, rtt 0 ms.
// Control API (HTTP on --control):
//   GET  /delay                      -> {"rttMs":5,"jitterMs":0,"blackhole":"off"}
//   PUT  /delay?rttMs=200[&jitterMs=10]   or JSON body {"rttMs":200,"jitterMs":10}  (POST too)
//   GET  /blackhole, PUT /blackhole?mode=drop|stall|off  or JSON body {"mode":"drop"}
//   GET  /stats, GET /healthz
// Programmatic: const line = await startLeasedLine({ targetPort: 9002, rttMs: 5, controlPort: 0 });
//               line.setDelay({ rttMs: 200 }); await line.close();
import * as http from 'node:http';
import * as net from 'node:net';
import type { AddressInfo } from 'node:net';
import { hostPort, parseFlags } from './cli';

export type BlackholeMode = 'off' | 'drop' | 'stall';
export const BLACKHOLE_MODES: readonly BlackholeMode[] = ['off', 'drop', 'stall'];
export const MAX_RTT_MS = 600_000;

export interface DelaySettings {
  rttMs: number;
  jitterMs: number;
  blackhole: BlackholeMode;
}

export interface LeasedLineOptions {
  listenHost?: string;
  /** 0 = ephemeral (default) */
  listenPort?: number;
  targetHost?: string;
  targetPort: number;
  rttMs?: number;
  jitterMs?: number;
  blackhole?: BlackholeMode;
  controlHost?: string;
  /** start the HTTP control API on this port (0 = ephemeral); omitted = no control API */
  controlPort?: number;
  log?: (msg: string, fields?: Record<string, unknown>) => void;
}

export interface LeasedLineStats {
  connectionsTotal: number;
  connectionsActive: number;
  bytesUp: number;
  bytesDown: number;
  bytesDropped: number;
  bytesQueued: number;
}

export interface LeasedLine {
  /** listen address of the proxy */
  host: string;
  port: number;
  controlUrl?: string;
  controlPort?: number;
  getDelay(): DelaySettings;
  /** partial update; throws RangeError on invalid values */
  setDelay(update: Partial<DelaySettings>): DelaySettings;
  setBlackhole(mode: BlackholeMode): DelaySettings;
  stats(): LeasedLineStats;
  close(): Promise<void>;
}

const nowMs = (): number => performance.now();

function validateUpdate(u: Partial<DelaySettings>): void {
  if (u.rttMs !== undefined && !(typeof u.rttMs === 'number' && Number.isFinite(u.rttMs) && u.rttMs >= 0 && u.rttMs <= MAX_RTT_MS))
    throw new RangeError(`rttMs: must be a number in 0..${MAX_RTT_MS}`);
  if (u.jitterMs !== undefined && !(typeof u.jitterMs === 'number' && Number.isFinite(u.jitterMs) && u.jitterMs >= 0 && u.jitterMs <= MAX_RTT_MS))
    throw new RangeError(`jitterMs: must be a number in 0..${MAX_RTT_MS}`);
  if (u.blackhole !== undefined && !BLACKHOLE_MODES.includes(u.blackhole)) throw new RangeError(`blackhole: must be one of ${BLACKHOLE_MODES.join('|')}`);
}

/** One direction of one connection: FIFO of timestamped chunks. */
class DelayPipe {
  private queue: Array<{ due: number; chunk: Buffer | null }> = [];
  private head = 0;
  private lastDue = 0;
  private timer?: NodeJS.Timeout;
  private ended = false;
  private closed = false;
  queuedBytes = 0;

  constructor(
    private src: net.Socket,
    private dst: net.Socket,
    private settings: () => DelaySettings,
    private onBytes: (n: number, dropped: boolean) => void,
  ) {
    src.on('data', (c: Buffer) => this.push(c));
    src.on('end', () => this.push(null));
    src.on('close', () => this.push(null));
  }

  private oneWayDelay(): number {
    const s = this.settings();
    const jitter = s.jitterMs > 0 ? (Math.random() * 2 - 1) * (s.jitterMs / 2) : 0;
    return Math.max(0, s.rttMs / 2 + jitter);
  }

  private push(chunk: Buffer | null): void {
    if (this.ended) return;
    if (chunk === null) this.ended = true;
    else if (this.settings().blackhole === 'drop') {
      this.onBytes(chunk.length, true);
      return;
    }
    const due = Math.max(nowMs() + this.oneWayDelay(), this.lastDue);
    this.lastDue = due;
    this.queue.push({ due, chunk });
    if (chunk) this.queuedBytes += chunk.length;
    this.schedule();
  }

  schedule(): void {
    if (this.timer || this.closed || this.head >= this.queue.length) return;
    if (this.settings().blackhole === 'stall') return;
    const wait = this.queue[this.head].due - nowMs();
    this.timer = setTimeout(() => this.flush(), Math.max(0, Math.ceil(wait)));
  }

  private flush(): void {
    this.timer = undefined;
    if (this.closed || this.settings().blackhole === 'stall') return;
    const t = nowMs();
    while (this.head < this.queue.length && this.queue[this.head].due <= t + 0.25) {
      const { chunk } = this.queue[this.head++];
      if (this.dst.destroyed) continue;
      if (chunk === null) {
        this.dst.end();
        continue;
      }
      this.queuedBytes -= chunk.length;
      this.onBytes(chunk.length, false);
      if (!this.dst.write(chunk) && !this.src.isPaused()) {
        // backpressure: stop reading the source until the destination drains
        this.src.pause();
        this.dst.once('drain', () => this.src.resume());
      }
    }
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
    this.schedule();
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
  }
}

export async function startLeasedLine(opts: LeasedLineOptions): Promise<LeasedLine> {
  const settings: DelaySettings = { rttMs: opts.rttMs ?? 0, jitterMs: opts.jitterMs ?? 0, blackhole: opts.blackhole ?? 'off' };
  validateUpdate(settings);
  const targetHost = opts.targetHost ?? '127.0.0.1';
  const log = opts.log ?? (() => {});
  const st: LeasedLineStats = { connectionsTotal: 0, connectionsActive: 0, bytesUp: 0, bytesDown: 0, bytesDropped: 0, bytesQueued: 0 };
  const pipes = new Set<DelayPipe>();
  const sockets = new Set<net.Socket>();
  const get = (): DelaySettings => settings;

  const server = net.createServer({ allowHalfOpen: true, noDelay: true }, (client) => {
    st.connectionsTotal++;
    st.connectionsActive++;
    const upstream = net.connect({ host: targetHost, port: opts.targetPort, allowHalfOpen: true, noDelay: true });
    sockets.add(client);
    sockets.add(upstream);
    const up = new DelayPipe(client, upstream, get, (n, dropped) => (dropped ? (st.bytesDropped += n) : (st.bytesUp += n)));
    const down = new DelayPipe(upstream, client, get, (n, dropped) => (dropped ? (st.bytesDropped += n) : (st.bytesDown += n)));
    pipes.add(up);
    pipes.add(down);
    let closedCount = 0;
    const onClose = (): void => {
      if (++closedCount < 2) return;
      st.connectionsActive--;
      up.close();
      down.close();
      pipes.delete(up);
      pipes.delete(down);
    };
    client.on('close', () => {
      sockets.delete(client);
      onClose();
    });
    upstream.on('close', () => {
      sockets.delete(upstream);
      onClose();
    });
    client.on('error', () => {});
    // a failed upstream closes; its pipe then delivers EOF to the client after the one-way delay
    upstream.on('error', (err) => log('upstream error', { error: (err as NodeJS.ErrnoException).code ?? err.message }));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.listenPort ?? 0, opts.listenHost ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const addr = server.address() as AddressInfo;

  const setDelay = (u: Partial<DelaySettings>): DelaySettings => {
    validateUpdate(u);
    const wasStalled = settings.blackhole === 'stall';
    if (u.rttMs !== undefined) settings.rttMs = u.rttMs;
    if (u.jitterMs !== undefined) settings.jitterMs = u.jitterMs;
    if (u.blackhole !== undefined) settings.blackhole = u.blackhole;
    if (wasStalled && settings.blackhole !== 'stall') for (const p of pipes) p.schedule();
    log('delay set', { ...settings });
    return { ...settings };
  };

  let control: http.Server | undefined;
  let controlPort: number | undefined;
  if (opts.controlPort !== undefined) {
    control = http.createServer((req, res) => controlHandler(req, res, { get: () => ({ ...settings }), setDelay, stats: () => stats() }));
    await new Promise<void>((resolve, reject) => {
      control!.once('error', reject);
      control!.listen(opts.controlPort, opts.controlHost ?? '127.0.0.1', () => resolve());
    });
    controlPort = (control.address() as AddressInfo).port;
  }

  const stats = (): LeasedLineStats => {
    let q = 0;
    for (const p of pipes) q += p.queuedBytes;
    return { ...st, bytesQueued: q };
  };

  return {
    host: addr.address,
    port: addr.port,
    controlPort,
    controlUrl: controlPort !== undefined ? `http://${opts.controlHost ?? '127.0.0.1'}:${controlPort}` : undefined,
    getDelay: () => ({ ...settings }),
    setDelay,
    setBlackhole: (mode) => setDelay({ blackhole: mode }),
    stats,
    async close() {
      for (const p of pipes) p.close();
      for (const s of sockets) s.destroy();
      await Promise.all([
        new Promise<void>((r) => server.close(() => r())),
        control
          ? new Promise<void>((r) => {
              control!.close(() => r());
              control!.closeAllConnections();
            })
          : Promise.resolve(),
      ]);
    },
  };
}

function controlHandler(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  api: { get: () => DelaySettings; setDelay: (u: Partial<DelaySettings>) => DelaySettings; stats: () => LeasedLineStats },
): void {
  const reply = (code: number, body: unknown): void => {
    const s = JSON.stringify(body) + '\n';
    res.writeHead(code, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(s) });
    res.end(s);
  };
  const url = new URL(req.url ?? '/', 'http://control');
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const route = url.pathname;
    const known = ['/delay', '/blackhole', '/stats', '/healthz'];
    if (!known.includes(route)) return reply(404, { error: 'not found' });
    const write = req.method === 'PUT' || req.method === 'POST';
    if (req.method !== 'GET' && !(write && (route === '/delay' || route === '/blackhole'))) return reply(405, { error: 'method not allowed' });
    if (route === '/healthz') return reply(200, { ok: true });
    if (route === '/stats') return reply(200, api.stats());
    if (!write) return reply(200, api.get());
    let body: Record<string, unknown> = {};
    const text = Buffer.concat(chunks).toString('utf8').trim();
    if (text) {
      try {
        const parsed = JSON.parse(text);
        if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('not an object');
        body = parsed;
      } catch (err) {
        return reply(400, { error: `body: invalid JSON object (${(err as Error).message})` });
      }
    }
    const update: Partial<DelaySettings> = {};
    const numParam = (name: string): number | undefined => {
      const q = url.searchParams.get(name);
      const v = q !== null ? q : body[name];
      if (v === undefined || v === null) return undefined;
      const n = typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' ? Number(v) : NaN;
      return n;
    };
    try {
      if (route === '/delay') {
        const rtt = numParam('rttMs');
        const jit = numParam('jitterMs');
        if (rtt !== undefined) update.rttMs = rtt;
        if (jit !== undefined) update.jitterMs = jit;
        const bh = url.searchParams.get('blackhole') ?? body.blackhole;
        if (bh !== undefined) update.blackhole = bh as BlackholeMode;
        if (Object.keys(update).length === 0) return reply(400, { error: 'rttMs: required (query ?rttMs=N or JSON body)' });
      } else {
        const mode = url.searchParams.get('mode') ?? body.mode;
        if (mode === undefined) return reply(400, { error: 'mode: required (off|drop|stall)' });
        update.blackhole = mode as BlackholeMode;
      }
      return reply(200, api.setDelay(update));
    } catch (err) {
      return reply(400, { error: (err as Error).message });
    }
  });
}

// ---------------------------------------------------------------- CLI

async function cli(argv: string[]): Promise<void> {
  const a = parseFlags(argv, ['listen', 'target', 'control', 'rtt-ms', 'jitter-ms', 'blackhole']);
  const listen = hostPort(a.listen ?? '127.0.0.1:9102', '--listen');
  const target = hostPort(a.target ?? '127.0.0.1:9002', '--target');
  const control = a.control === 'none' ? undefined : hostPort(a.control ?? '127.0.0.1:9103', '--control');
  const log = (msg: string, fields?: Record<string, unknown>): void => {
    process.stdout.write(JSON.stringify({ time: new Date().toISOString(), svc: 'leased-line', msg, ...fields }) + '\n');
  };
  const line = await startLeasedLine({
    listenHost: listen.host,
    listenPort: listen.port,
    targetHost: target.host,
    targetPort: target.port,
    controlHost: control?.host,
    controlPort: control?.port,
    rttMs: a['rtt-ms'] !== undefined ? Number(a['rtt-ms']) : 0,
    jitterMs: a['jitter-ms'] !== undefined ? Number(a['jitter-ms']) : 0,
    blackhole: (a.blackhole as BlackholeMode) ?? 'off',
    log,
  });
  log('leased line up', { listen: `${line.host}:${line.port}`, target: `${target.host}:${target.port}`, control: line.controlUrl ?? null, ...line.getDelay() });
  const stop = (): void => {
    line.close().then(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

if (require.main === module) {
  cli(process.argv.slice(2)).catch((err) => {
    process.stderr.write(`leased-line: ${(err as Error).message}\n`);
    process.exit(2);
  });
}
