// The embedded proxy: an HTTP/1.1 listener that behaves like an Envoy listener with an
// http_connection_manager whose filter chain is [envoy.filters.http.wasm, envoy.filters.http.router],
// plus an admin listener with /stats and /stats/prometheus.
//
// Routing: Envoy resolves the route before the filter chain runs, but since Envoy 1.17
// (envoyproxy/envoy#14318) the Wasm filter clears the route cache whenever it mutates request
// headers (Context::onHeadersModified → clearRouteCache), so the router re-selects the route from
// the headers AS MODIFIED BY THE FILTER. Envoy 1.33 (envoyproxy/envoy#36671) keeps that default
// but lets it be switched off and adds a "clear_route_cache" foreign function; pass
// routeRefresh:false to model the switched-off behaviour.

import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { LogLevelName } from './abi';
import { ClusterConfig, ProxyConfig, RouteConfig, VirtualHostConfig, headerMatcherMatches, loadEnvoyConfig, parseEnvoyConfig } from './envoy-config';
import { HeaderMap } from './header-map';
import { Endpoint, destroyAgents, sendHttp } from './http-client';
import { ClusterSpec, DEFAULT_BUFFER_LIMIT_BYTES, ProxyWasmHost, parseIpPort } from './host';
import type { Pair } from './pairs';
import { HttpStream, UpstreamHandler } from './stream';
import { statsText, prometheusText } from './stores';
import type { LogEntry } from './vm';

export interface ProxyOptions {
  /** Path to an Envoy bootstrap YAML, or its text with `configText`. */
  configPath?: string;
  configText?: string;
  /** Overrides config.vm_config.code.local.filename. */
  wasmPath?: string;
  /** Overrides the listener port (0 = ephemeral). */
  listenPort?: number;
  listenAddress?: string;
  /** Overrides the admin port (0 = ephemeral); admin is off if the YAML has none and this is unset. */
  adminPort?: number;
  /** Replaces the endpoints of STATIC/*_DNS clusters: name → address. */
  clusterAddresses?: Record<string, Endpoint | Endpoint[]>;
  workers?: number;
  logLevel?: LogLevelName;
  strictImports?: boolean;
  routeRefresh?: boolean;
  /** PluginConfig.allow_on_headers_stop_iteration (default false, as Envoy). */
  allowOnHeadersStopIteration?: boolean;
  /** Connection buffer limit (per_connection_buffer_limit_bytes), default 1 MiB. */
  bufferLimitBytes?: number;
  /** Random source in [0,1) for weighted clusters (default Math.random). */
  random?: () => number;
  onLog?: (e: LogEntry) => void;
}

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'host', 'http2-settings']);

export class EnvoyProxy {
  readonly host: ProxyWasmHost | undefined;
  private server!: http.Server;
  private admin: http.Server | undefined;
  listenPort = 0;
  adminPort: number | undefined;
  private readonly random: () => number;
  private readonly upstreamStats = { rq_total: 0, rq_503: 0, rq_504: 0, local_replies: 0 };
  private readonly router: Router;
  private readonly streams = new Set<HttpStream>();

  private constructor(readonly config: ProxyConfig, private readonly opts: ProxyOptions, host: ProxyWasmHost | undefined) {
    this.host = host;
    this.random = opts.random ?? Math.random;
    this.router = new Router(this);
  }

  static async start(opts: ProxyOptions): Promise<EnvoyProxy> {
    const config = opts.configText !== undefined ? parseEnvoyConfig(opts.configText)
      : opts.configPath ? loadEnvoyConfig(opts.configPath) : undefined;
    if (!config) throw new Error('EnvoyProxy: configPath or configText is required');
    for (const [name, eps] of Object.entries(opts.clusterAddresses ?? {})) {
      const c = config.clusters.get(name);
      if (!c) throw new Error(`clusterAddresses: unknown cluster ${name}`);
      if (c.type === 'ORIGINAL_DST') throw new Error(`clusterAddresses: ${name} is ORIGINAL_DST (addresses come from the request)`);
      c.endpoints = Array.isArray(eps) ? eps : [eps];
    }
    const clusters: Record<string, ClusterSpec> = {};
    for (const c of config.clusters.values()) clusters[c.name] = clusterSpec(c);
    let host: ProxyWasmHost | undefined;
    if (config.wasm) {
      const w = config.wasm;
      host = await ProxyWasmHost.create({
        wasm: opts.wasmPath ?? w.filename,
        vmId: w.vmId, rootId: w.rootId, pluginName: w.name,
        pluginConfig: w.configuration, vmConfig: w.vmConfiguration,
        failOpen: w.failOpen, workers: opts.workers ?? 2, clock: 'real',
        clusters, logLevel: opts.logLevel ?? 'info', strictImports: opts.strictImports,
        routeRefresh: opts.routeRefresh, onLog: opts.onLog,
        // the bootstrap's PluginConfig.allow_on_headers_stop_iteration and listener
        // per_connection_buffer_limit_bytes, unless the caller overrides them
        allowOnHeadersStopIteration: opts.allowOnHeadersStopIteration ?? w.allowOnHeadersStopIteration,
        bufferLimitBytes: opts.bufferLimitBytes ?? config.listener.bufferLimitBytes,
      });
    }
    const p = new EnvoyProxy(config, opts, host);
    try {
      await p.listen();
    } catch (e) {
      await p.close();
      throw e;
    }
    return p;
  }

  private async listen(): Promise<void> {
    this.server = http.createServer({ keepAlive: true }, (req, res) => this.onRequest(req, res));
    this.server.keepAliveTimeout = 60_000;
    const port = this.opts.listenPort ?? this.config.listener.port;
    const address = this.opts.listenAddress ?? this.config.listener.address;
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, address === '0.0.0.0' ? undefined : address, () => resolve());
    });
    this.listenPort = (this.server.address() as AddressInfo).port;
    const adminPort = this.opts.adminPort ?? this.config.admin?.port;
    if (adminPort !== undefined) {
      this.admin = http.createServer((req, res) => this.onAdmin(req, res));
      const addr = this.config.admin?.address ?? '127.0.0.1';
      await new Promise<void>((resolve, reject) => {
        this.admin!.once('error', reject);
        this.admin!.listen(adminPort, addr === '0.0.0.0' ? undefined : addr, () => resolve());
      });
      this.adminPort = (this.admin.address() as AddressInfo).port;
    }
  }

  pickRandom(): number {
    return this.random();
  }

  /** Override-host choices: a listed host used, or the fallback policy (the list empty or used up). */
  readonly overrideStats = { selected: 0, fallback: 0 };
  countOverride(k: 'selected' | 'fallback'): void { this.overrideStats[k]++; }

  countUpstream(status: number): void {
    this.upstreamStats.rq_total++;
    if (status === 503) this.upstreamStats.rq_503++;
    if (status === 504) this.upstreamStats.rq_504++;
  }

  clusterConfig(name: string): ClusterConfig | undefined {
    return this.config.clusters.get(name);
  }

  private onRequest(req: http.IncomingMessage, res: http.ServerResponse): void {
    // HCM: codec headers → Envoy request header map (pseudo headers first), then
    // ConnectionManagerUtility::mutateRequestHeaders (x-forwarded-proto, x-request-id).
    const h = new HeaderMap('request');
    h.add(':authority', req.headers.host ?? '');
    h.add(':path', req.url ?? '/');
    h.add(':method', req.method ?? 'GET');
    h.add(':scheme', 'http');
    const raw = req.rawHeaders;
    for (let i = 0; i < raw.length; i += 2) {
      const k = raw[i].toLowerCase();
      if (HOP_BY_HOP.has(k)) continue;
      if (k === 'te' && raw[i + 1].toLowerCase() !== 'trailers') continue;
      h.add(k, raw[i + 1]);
    }
    if (h.get('x-forwarded-proto') === undefined) h.add('x-forwarded-proto', 'http');
    if (this.config.generateRequestId && h.get('x-request-id') === undefined) h.add('x-request-id', randomUUID());

    const hasBody = (req.headers['content-length'] !== undefined && req.headers['content-length'] !== '0')
      || req.headers['transfer-encoding'] !== undefined;
    const isHead = req.method === 'HEAD';
    let finished = false;
    const sink = {
      headers: (rh: HeaderMap, eos: boolean) => {
        const status = Number(rh.get(':status') ?? 502);
        const out: string[] = [];
        let hasDate = false;
        for (const [k, v] of rh.entries) {
          if (k.charCodeAt(0) === 58 || HOP_BY_HOP.has(k) || k === 'server') continue;
          if (k === 'date') hasDate = true;
          out.push(k, v);
        }
        // HCM mutateResponseHeaders: server header (OVERWRITE) and date.
        out.push('server', 'envoy');
        if (!hasDate) out.push('date', new Date().toUTCString());
        if (eos && rh.get('content-length') === undefined && status !== 204 && status !== 304) out.push('content-length', '0');
        res.writeHead(status, out as unknown as http.OutgoingHttpHeaders);
        if (eos) {
          finished = true;
          res.end();
        }
      },
      data: (chunk: Buffer, eos: boolean) => {
        if (finished) return;
        if (chunk.length && !isHead) res.write(chunk);
        if (eos) {
          finished = true;
          res.end();
        }
      },
      reset: () => {
        finished = true;
        res.destroy();
        req.socket.destroy();
      },
    };
    const onComplete = (s: HttpStream) => {
      this.streams.delete(s);
      if (s.localReply) this.upstreamStats.local_replies++;
    };
    let stream: HttpStream;
    if (this.host) {
      stream = this.host.startStream(h, null, !hasBody, sink, this.router, undefined, onComplete).stream;
    } else {
      stream = new HttpStream(null, h, null, !hasBody, sink, this.router, {
        failOpen: true, routeRefresh: true, onComplete, warn: () => {},
        allowOnHeadersStopIteration: false, bufferLimitBytes: this.opts.bufferLimitBytes ?? this.config.listener.bufferLimitBytes ?? DEFAULT_BUFFER_LIMIT_BYTES,
      });
      stream.start();
    }
    this.streams.add(stream);
    if (hasBody) {
      req.on('data', (c: Buffer) => stream.pushRequestData(c, false));
      req.on('end', () => stream.pushRequestData(Buffer.alloc(0), true));
    } else {
      req.resume();
    }
    res.on('close', () => {
      if (!finished && !stream.done) stream.resetStream('downstream_remote_disconnect');
    });
  }

  private onAdmin(req: http.IncomingMessage, res: http.ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://admin');
    const metrics = this.host ? this.host.rawMetrics() : [];
    const extra = [
      { name: `http.${this.config.statPrefix}.downstream_rq_total`, type: 'counter' as const, value: this.upstreamStats.rq_total },
      { name: `http.${this.config.statPrefix}.local_replies`, type: 'counter' as const, value: this.upstreamStats.local_replies },
      { name: 'wasm.vm_failures', type: 'counter' as const, value: this.host ? this.host.failures.length : 0 },
    ];
    if (url.pathname === '/stats/prometheus') {
      res.writeHead(200, { 'content-type': 'text/plain; charset=UTF-8' });
      res.end(prometheusText(metrics, extra));
    } else if (url.pathname === '/stats') {
      res.writeHead(200, { 'content-type': 'text/plain; charset=UTF-8' });
      res.end(statsText(metrics, extra));
    } else if (url.pathname === '/ready') {
      res.writeHead(200, { 'content-type': 'text/plain; charset=UTF-8' });
      res.end('LIVE\n');
    } else if (url.pathname === '/clusters') {
      const lines: string[] = [];
      for (const c of this.config.clusters.values()) {
        if (c.type === 'ORIGINAL_DST') lines.push(`${c.name}::original_dst header=${c.originalDstHeader}`);
        for (const e of c.endpoints) lines.push(`${c.name}::${e.address}:${e.port}`);
      }
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(lines.join('\n') + '\n');
    } else {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('not found\n');
    }
  }

  async close(): Promise<void> {
    for (const s of [...this.streams]) s.resetStream('proxy_closed');
    await this.host?.close();
    const closeServer = (s?: http.Server) => new Promise<void>((r) => {
      if (!s || !s.listening) return r();
      s.close(() => r());
      s.closeAllConnections();
    });
    await Promise.all([closeServer(this.server), closeServer(this.admin)]);
    destroyAgents();
  }
}

function clusterSpec(c: ClusterConfig): ClusterSpec {
  if (c.type === 'ORIGINAL_DST') return { originalDst: { headerName: c.originalDstHeader } };
  return { endpoints: c.endpoints };
}

// --- routing -----------------------------------------------------------------------------------------

/** Virtual host selection (RouteMatcher::findVirtualHost): exact, then suffix, prefix wildcards, then '*'. */
export function findVirtualHost(vhs: VirtualHostConfig[], authority: string): VirtualHostConfig | undefined {
  const host = authority.toLowerCase();
  let best: { vh: VirtualHostConfig; len: number } | undefined;
  for (const vh of vhs) if (vh.domains.includes(host)) return vh;
  for (const vh of vhs) {
    for (const d of vh.domains) {
      if (d.startsWith('*') && d.length > 1 && host.endsWith(d.slice(1)) && host.length > d.length - 1) {
        if (!best || d.length > best.len) best = { vh, len: d.length };
      }
    }
  }
  if (best) return best.vh;
  for (const vh of vhs) {
    for (const d of vh.domains) {
      if (d.endsWith('*') && d.length > 1 && host.startsWith(d.slice(0, -1)) && host.length > d.length - 1) {
        if (!best || d.length > best.len) best = { vh, len: d.length };
      }
    }
  }
  if (best) return best.vh;
  return vhs.find((vh) => vh.domains.includes('*'));
}

function headerMatches(h: HeaderMap, m: RouteConfig['match']['headers'][number]): boolean {
  return headerMatcherMatches(m, h.getAll(m.name));
}

export function matchRoute(vhs: VirtualHostConfig[], h: HeaderMap): RouteConfig | undefined {
  const vh = findVirtualHost(vhs, h.get(':authority') ?? '');
  if (!vh) return undefined;
  const fullPath = h.get(':path') ?? '';
  const q = fullPath.search(/[?#]/);
  const p = q >= 0 ? fullPath.slice(0, q) : fullPath;
  for (const r of vh.routes) {
    const m = r.match;
    const pp = m.caseSensitive ? p : p.toLowerCase();
    if (m.path !== undefined) {
      if (pp !== (m.caseSensitive ? m.path : m.path.toLowerCase())) continue;
    } else if (!pp.startsWith(m.caseSensitive ? m.prefix! : m.prefix!.toLowerCase())) continue;
    if (!m.headers.every((hm) => headerMatches(h, hm))) continue;
    return r;
  }
  return undefined;
}

/**
 * The hosts an override_host cluster reads from the request (load_balancer.cc getSelectedHosts):
 * each source in order, the first value of its header, split on ',' with whitespace stripped and
 * empty entries skipped.
 */
export function overrideHosts(oh: NonNullable<ClusterConfig['overrideHost']>, headers: HeaderMap): string[] {
  const out: string[] = [];
  for (const name of oh.headers) {
    const v = headers.getAll(name)[0];
    if (v === undefined) continue;
    for (const x of v.split(',')) { const t = x.trim(); if (t) out.push(t); }
  }
  return out;
}

/**
 * One attempt's host. ORIGINAL_DST: the header's ip:port. override_host: the next listed host
 * that is an endpoint of the cluster (getEndpoint → findHost on the cross-priority host map; hosts
 * not in the cluster are consumed and skipped; health is not checked, as in Envoy: "TODO: Validate
 * that host health status did not change"); the list used up, or empty: the fallback policy.
 * Otherwise the cluster's own policy (round robin over the endpoints, for every lb_policy here).
 */
function chooseHost(cluster: ClusterConfig, headers: HeaderMap, override: { hosts: string[]; next: number } | undefined, proxy: EnvoyProxy): Endpoint | undefined {
  if (cluster.type === 'ORIGINAL_DST') {
    // OriginalDstCluster: first header value; missing/invalid → no host → 503 no healthy upstream.
    const v = headers.get(cluster.originalDstHeader!);
    return v === undefined ? undefined : parseIpPort(v);
  }
  if (override) {
    while (override.next < override.hosts.length) {
      const want = override.hosts[override.next++];
      const ep = cluster.endpoints.find((e) => `${e.address}:${e.port}` === want);
      if (ep) { proxy.countOverride('selected'); return ep; }
    }
    proxy.countOverride('fallback');
  }
  if (!cluster.endpoints.length) return undefined;
  const c = cluster as ClusterConfig & { rr?: number };
  c.rr = ((c.rr ?? -1) + 1) % cluster.endpoints.length;
  return cluster.endpoints[c.rr];
}

interface Inflight {
  abort(): void;
  timer?: NodeJS.Timeout;
}

/** envoy.filters.http.router */
class Router implements UpstreamHandler {
  private readonly inflight = new WeakMap<HttpStream, Inflight>();
  constructor(private readonly proxy: EnvoyProxy) {}

  send(stream: HttpStream, headers: HeaderMap, body: Buffer): void {
    const cfg = this.proxy.config;
    const route = matchRoute(cfg.virtualHosts, stream.routeHeaders());
    if (!route) {
      stream.hostLocalReply(404, '', 'route_not_found');
      return;
    }
    let clusterName = route.cluster;
    if (!clusterName) {
      const ws = route.weighted!;
      const total = ws.reduce((a, b) => a + b.weight, 0);
      let x = Math.floor(this.proxy.pickRandom() * total);
      for (const w of ws) {
        if (x < w.weight) {
          clusterName = w.name;
          break;
        }
        x -= w.weight;
      }
      clusterName ??= ws[ws.length - 1].name;
    }
    const cluster = this.proxy.clusterConfig(clusterName);
    if (!cluster) {
      stream.hostLocalReply(503, '', 'cluster_not_found');
      return;
    }
    const nonPseudo: Pair[] = headers.entries.filter(([k]) => k.charCodeAt(0) !== 58);
    if (route.timeoutMs > 0) nonPseudo.push(['x-envoy-expected-rq-timeout-ms', String(route.timeoutMs)]);
    const started = Date.now();
    const inflight: Inflight = { abort: () => {} };
    this.inflight.set(stream, inflight);
    // override_host: the hosts the request names, parsed once per request and consumed one per
    // attempt (OverrideHostFilterState::consumeNextHost in Envoy's load_balancer.cc).
    const override = cluster.overrideHost ? { hosts: overrideHosts(cluster.overrideHost, headers), next: 0 } : undefined;
    let retriesLeft = route.retry?.numRetries ?? 0;
    let done = false;
    const finish = () => {
      done = true;
      this.inflight.delete(stream);
      if (inflight.timer) clearTimeout(inflight.timer);
    };
    const attempt = (): void => {
      const ep = chooseHost(cluster, headers, override, this.proxy);
      if (!ep) {
        finish();
        this.proxy.countUpstream(503);
        stream.hostLocalReply(503, 'no healthy upstream', 'no_healthy_upstream');
        return;
      }
      let gotHeaders = false;
      let live = true;
      const retry = (cond: string[]): boolean => {
        if (!route.retry || retriesLeft <= 0 || !cond.some((c) => route.retry!.on.has(c))) return false;
        retriesLeft--;
        live = false;
        attempt();
        return true;
      };
      const h = sendHttp({
        endpoint: ep, method: headers.get(':method') ?? 'GET', path: headers.get(':path') ?? '/',
        authority: headers.get(':authority') ?? '', headers: nonPseudo, body,
      }, {
        onHeaders: (status, pairs) => {
          if (!live || done) return;
          // retry_on 5xx / gateway-error: the answer is dropped and the next attempt sent (the
          // router has not forwarded anything downstream yet).
          if (status >= 500 && retry(status >= 502 && status <= 504 ? ['5xx', 'gateway-error'] : ['5xx'])) { h.abort(); return; }
          gotHeaders = true;
          if (inflight.timer) clearTimeout(inflight.timer);
          this.proxy.countUpstream(status);
          const m = new HeaderMap('response');
          m.add(':status', String(status));
          for (const [k, v] of pairs) if (!HOP_BY_HOP.has(k)) m.add(k, v);
          m.set('x-envoy-upstream-service-time', String(Date.now() - started));
          const eos = m.get('content-length') === '0' || status === 204 || status === 304 || headers.get(':method') === 'HEAD';
          stream.onUpstreamHeaders(m, eos);
        },
        onData: (c) => { if (live && !done) stream.onUpstreamData(c, false); },
        onEnd: () => {
          if (!live || done) return;
          finish();
          stream.onUpstreamData(Buffer.alloc(0), true);
        },
        onError: (before, reason) => {
          if (!live || done) return;
          if (before && !gotHeaders) {
            // connect-failure: refused / timed out before a connection; reset: after it, before headers
            const connect = /refused|connection failure|timeout/i.test(reason);
            if (retry(connect ? ['connect-failure', '5xx', 'gateway-error'] : ['reset', '5xx', 'gateway-error'])) return;
            finish();
            this.proxy.countUpstream(503);
            stream.hostLocalReply(503, `upstream connect error or disconnect/reset before headers. reset reason: ${reason}`,
              `upstream_reset_before_response_started{${reason.replace(/\s/g, '_')}}`);
          } else {
            finish();
            stream.onUpstreamReset(reason);
          }
        },
      });
      inflight.abort = () => h.abort();
    };
    attempt();
    if (route.timeoutMs > 0 && !done) {
      inflight.timer = setTimeout(() => {
        if (done) return;
        inflight.abort();
        finish();
        this.proxy.countUpstream(504);
        stream.hostLocalReply(504, 'upstream request timeout', 'upstream_response_timeout');
      }, route.timeoutMs);
    }
  }

  cancel(stream: HttpStream): void {
    const f = this.inflight.get(stream);
    if (!f) return;
    this.inflight.delete(stream);
    if (f.timer) clearTimeout(f.timer);
    f.abort();
  }
}
