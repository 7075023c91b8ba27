// Instance discovery: a static list, or a DNS name with several A/AAAA records (a Kubernetes
// headless Service) re-resolved periodically. The resolver is injectable for tests.
import { EventEmitter } from 'node:events';
import * as dns from 'node:dns';

export interface DnsResolver {
  resolve4(name: string): Promise<string[]>;
  resolve6(name: string): Promise<string[]>;
}

export const systemResolver: DnsResolver = {
  resolve4: (n) => dns.promises.resolve4(n),
  resolve6: (n) => dns.promises.resolve6(n),
};

/** "ip:port", IPv6 bracketed ("[::1]:9201") as Envoy's ORIGINAL_DST header expects. */
export function formatAddr(ip: string, port: number): string {
  return ip.includes(':') ? `[${ip}]:${port}` : `${ip}:${port}`;
}

/** "ip:port" / "[v6]:port" -> { host, port } (host without brackets). */
export function parseAddr(addr: string): { host: string; port: number } {
  const m = /^\[(.+)\]:(\d+)$/.exec(addr) ?? /^([^:]+):(\d+)$/.exec(addr);
  if (!m) throw new Error(`invalid address ${JSON.stringify(addr)} (want ip:port)`);
  return { host: m[1], port: Number(m[2]) };
}

export interface DiscoveryChange {
  added: string[];
  removed: string[];
  current: string[];
}

/** DNS "no such name / no records" codes: an empty set, not a failure. */
const EMPTY_CODES = new Set(['ENOTFOUND', 'ENODATA', 'NXDOMAIN', 'ENONAME']);

export type DiscoverySpec =
  | { static: string[] }
  | { dns: { name: string; port: number; resolveIntervalMs: number; family?: 'any' | 'ipv4' | 'ipv6' } };

/**
 * Events: 'change' (DiscoveryChange) whenever the set changes (also the first time it is
 * known), 'error' is NOT used (an unhandled 'error' would throw); failures are reported as
 * 'resolveError' ({ message }) and the previous set is kept.
 */
export class Discovery extends EventEmitter {
  private addrs: string[] = [];
  private timer?: NodeJS.Timeout;
  private running = false;
  private inFlight?: Promise<void>;
  resolutions = 0;
  failures = 0;

  constructor(
    private readonly spec: DiscoverySpec,
    private readonly resolver: DnsResolver = systemResolver,
  ) {
    super();
  }

  get current(): string[] {
    return this.addrs.slice();
  }

  async start(): Promise<void> {
    if (this.running) return;
    this.running = true;
    if ('static' in this.spec) {
      this.apply([...new Set(this.spec.static)]);
      return;
    }
    await this.refresh();
    const every = this.spec.dns.resolveIntervalMs;
    const loop = (): void => {
      if (!this.running) return;
      this.timer = setTimeout(() => {
        void this.refresh().finally(loop);
      }, every);
      this.timer.unref?.();
    };
    loop();
  }

  stop(): void {
    this.running = false;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Resolve now (also used by tests). Never throws. */
  refresh(): Promise<void> {
    if ('static' in this.spec) return Promise.resolve();
    if (this.inFlight) return this.inFlight;
    const { name, port, family = 'any' } = this.spec.dns;
    const one = async (f: 4 | 6): Promise<{ ips: string[]; empty: boolean; err?: Error }> => {
      try {
        const ips = f === 4 ? await this.resolver.resolve4(name) : await this.resolver.resolve6(name);
        return { ips, empty: ips.length === 0 };
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code ?? '';
        if (EMPTY_CODES.has(code)) return { ips: [], empty: true };
        return { ips: [], empty: false, err: e as Error };
      }
    };
    this.inFlight = (async () => {
      const fams: Array<4 | 6> = family === 'ipv4' ? [4] : family === 'ipv6' ? [6] : [4, 6];
      const res = await Promise.all(fams.map(one));
      this.resolutions++;
      const errs = res.filter((r) => r.err);
      if (errs.length > 0 && res.every((r) => r.err || r.empty)) {
        // no family answered with addresses and at least one failed: keep the previous set
        this.failures++;
        this.emit('resolveError', { message: `resolve ${name}: ${errs.map((r) => r.err?.message).join('; ')}` });
        return;
      }
      const ips = res.flatMap((r) => r.ips);
      this.apply([...new Set(ips.map((ip) => formatAddr(ip, port)))].sort());
    })().finally(() => {
      this.inFlight = undefined;
    });
    return this.inFlight;
  }

  private first = true;
  private apply(next: string[]): void {
    const prev = new Set(this.addrs);
    const nextSet = new Set(next);
    const added = next.filter((a) => !prev.has(a));
    const removed = this.addrs.filter((a) => !nextSet.has(a));
    this.addrs = next;
    if (added.length || removed.length || this.first) {
      this.first = false;
      this.emit('change', { added, removed, current: next.slice() } satisfies DiscoveryChange);
    }
  }
}
