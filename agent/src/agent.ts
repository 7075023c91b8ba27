// The agent: peer monitors + snapshot publisher + HTTP API. Programmatic entry: startAgent().
import * as http from 'node:http';
import { EventEmitter } from 'node:events';
import type { AddressInfo } from 'node:net';
import pino, { type Logger } from 'pino';
import { resolveConfig, type AgentConfig, type AgentConfigInput } from './config';
import { createMetrics, type AgentMetrics } from './metrics';
import { PeerMonitor, type ProbeEndEvent, type SampleEvent, type StateEvent } from './link/peer-monitor';
import { CONTENT_TYPE, type InstanceRecord } from './snapshot/codec';
import { SnapshotPublisher, type Published, type PublishReason } from './snapshot/publisher';
import { InferenceCollector } from './inference/collector';
import { startRules, type RulesHandle } from './rules';

export const MAX_WAIT_MS = 30000;

export interface AgentEvents {
  sample: [SampleEvent];
  state: [StateEvent];
  'probe-end': [ProbeEndEvent];
  publish: [Published, PublishReason];
}

export interface StartOptions {
  /** pino logger; default: pino to stdout at config.log.level */
  logger?: Logger;
  /** register prom-client default process metrics (default true) */
  defaultMetrics?: boolean;
}

export interface AgentHandle {
  /** e.g. http://127.0.0.1:8000 */
  url: string;
  host: string;
  port: number;
  config: AgentConfig;
  events: EventEmitter<AgentEvents>;
  metrics: AgentMetrics;
  logger: Logger;
  peers: ReadonlyMap<string, PeerMonitor>;
  /** 'healthy' | 'degraded' overall, or one peer's (undefined if unknown) */
  status(peer?: string): 'healthy' | 'degraded' | undefined;
  snapshot(): Published;
  /** publish now (seq+1) */
  publish(): Published;
  /**
   * Plug in the INSTANCES section (load-aware scraping). The provider is called at every
   * publication; returning undefined omits the section.
   */
  setInstancesProvider(fn: (() => InstanceRecord[] | undefined) | undefined): void;
  /** state-driven routing rules (issue 8), when config.rules is set */
  rules?: RulesHandle;
  stop(): Promise<void>;
}

export async function startAgent(input: AgentConfigInput | AgentConfig = {}, opts: StartOptions = {}): Promise<AgentHandle> {
  const config = resolveConfig(input);
  const logger =
    opts.logger ??
    pino({ level: config.log.level, base: { svc: 'switchyard-agent' }, timestamp: pino.stdTimeFunctions.isoTime });
  const events = new EventEmitter<AgentEvents>();
  let publisher: SnapshotPublisher | undefined;
  const metrics = createMetrics({ defaultMetrics: opts.defaultMetrics, waiterCount: () => publisher?.waiterCount ?? 0 });

  const peers = new Map<string, PeerMonitor>();
  for (const pc of config.link.peers) {
    const m = new PeerMonitor(pc);
    peers.set(pc.name, m);
    const peer = pc.name;
    metrics.peerState.set({ peer }, m.state === 'degraded' ? 1 : 0);
    metrics.inFlight.set({ peer }, 0);
    m.on('probe-start', (e) => metrics.inFlight.set({ peer }, e.inFlight));
    m.on('skip', (e) => {
      metrics.skipped.inc({ peer });
      logger.debug({ peer, inFlight: e.inFlight }, 'probe skipped: maxInFlight reached');
    });
    m.on('probe-end', (e) => {
      metrics.inFlight.set({ peer }, m.inFlightCount);
      metrics.probes.inc({ peer, outcome: e.result.outcome });
      metrics.probeRtt.observe({ peer, outcome: e.result.outcome }, e.result.rttMs / 1000);
      if (e.result.outcome === 'ok') metrics.peerAvgRtt.set({ peer }, m.avgRttMs / 1000);
      else logger.debug({ peer, probeId: e.probeId, outcome: e.result.outcome, error: e.result.error, rttMs: e.result.rttMs }, 'probe failed');
      events.emit('probe-end', e);
    });
    m.on('sample', (e) => {
      metrics.samples.inc({ peer, result: e.kind });
      logger.trace(e, 'sample');
      events.emit('sample', e);
    });
    m.on('state', (e) => {
      metrics.peerState.set({ peer }, e.to === 'degraded' ? 1 : 0);
      metrics.transitions.inc({ peer, to: e.to });
      const level = e.to === 'degraded' ? 'warn' : 'info';
      logger[level]({ peer, from: e.from, to: e.to, sample: e.sampleKind, sampleElapsedMs: Math.round(e.sampleElapsedMs * 10) / 10, lastRttMs: m.lastRttMs, avgRttMs: m.avgRttMs }, `peer ${peer} is ${e.to}`);
      // publish immediately on any state change; listeners see the new snapshot
      publisher?.publish('state_change');
      events.emit('state', e);
    });
  }

  let instancesProvider: (() => InstanceRecord[] | undefined) | undefined;
  publisher = new SnapshotPublisher({
    publishIntervalMs: config.publishIntervalMs,
    collectPeers: () => [...peers.values()].map((m) => m.record()),
    collectInstances: () => instancesProvider?.(),
    onPublish: (p, reason) => {
      metrics.snapshotSeq.set(p.snapshot.seq);
      metrics.publishes.inc({ reason });
      events.emit('publish', p, reason);
    },
  });
  const pub = publisher;

  const status = (peer?: string): 'healthy' | 'degraded' | undefined => {
    if (peer !== undefined) {
      const m = peers.get(peer);
      if (!m) return undefined;
      return m.state === 'degraded' ? 'degraded' : 'healthy';
    }
    for (const m of peers.values()) if (m.state === 'degraded') return 'degraded';
    return 'healthy';
  };

  const server = http.createServer((req, res) => handle(req, res));
  // Envoy keeps the connection to the agent alive; don't close it under Envoy's feet.
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  server.requestTimeout = 0;

  const ROUTES = new Set(['/status', '/v1/snapshot', '/metrics', '/healthz']);
  function send(res: http.ServerResponse, code: number, body: string | Buffer, headers: http.OutgoingHttpHeaders = {}): void {
    if (res.destroyed || res.headersSent) return;
    const buf = typeof body === 'string' ? Buffer.from(body) : body;
    res.writeHead(code, { 'content-type': 'text/plain; charset=utf-8', 'content-length': buf.length, 'cache-control': 'no-store', ...headers });
    res.end(buf);
  }

  function handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://agent');
    } catch {
      return send(res, 400, 'bad request\n');
    }
    if (!ROUTES.has(url.pathname)) return send(res, 404, 'not found\n');
    if (req.method !== 'GET' && req.method !== 'HEAD') return send(res, 405, 'method not allowed\n', { allow: 'GET, HEAD' });
    switch (url.pathname) {
      case '/healthz':
        return send(res, 200, 'ok\n');
      case '/status': {
        const peer = url.searchParams.get('peer');
        const s = status(peer ?? undefined);
        if (s === undefined) return send(res, 404, `unknown peer\n`);
        return send(res, 200, s);
      }
      case '/metrics': {
        metrics.registry
          .metrics()
          .then((text) => send(res, 200, text, { 'content-type': metrics.registry.contentType }))
          .catch((err) => send(res, 500, `metrics error: ${(err as Error).message}\n`));
        return;
      }
      case '/v1/snapshot':
        return snapshotRoute(url, res);
    }
  }

  function snapshotRoute(url: URL, res: http.ServerResponse): void {
    const format = url.searchParams.get('format') ?? 'binary';
    if (format !== 'binary' && format !== 'json') return send(res, 400, 'format: must be json or binary\n');
    const after = url.searchParams.get('after') ?? undefined;
    if (after !== undefined && !/^\d{1,20}$/.test(after)) return send(res, 400, 'after: must be an unsigned integer\n');
    const waitRaw = url.searchParams.get('waitMs');
    let waitMs = 0;
    if (waitRaw !== null) {
      if (!/^\d{1,10}$/.test(waitRaw)) return send(res, 400, 'waitMs: must be a non-negative integer\n');
      waitMs = Math.min(Number(waitRaw), MAX_WAIT_MS);
    }
    let cancel: () => void = () => {};
    const onClose = (): void => cancel();
    res.once('close', onClose);
    cancel = pub.wait(after, waitMs, (p) => {
      res.off('close', onClose);
      if (format === 'json') send(res, 200, p.json, { 'content-type': 'application/json', 'x-switchyard-seq': String(p.snapshot.seq) });
      else send(res, 200, p.binary, { 'content-type': CONTENT_TYPE, 'x-switchyard-seq': String(p.snapshot.seq) });
    });
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.listen.port, config.listen.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const addr = server.address() as AddressInfo;
  const hostForUrl = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  const url = `http://${hostForUrl}:${addr.port}`;

  pub.start();
  for (const m of peers.values()) m.start();
  logger.info(
    { url, peers: config.link.peers.map((p) => ({ name: p.name, probe: p.probe, intervalMs: p.intervalMs })), seq: pub.current.snapshot.seq },
    'switchyard agent listening',
  );

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    if (stopping) return stopping;
    stopping = (async () => {
      logger.info('switchyard agent stopping');
      for (const m of peers.values()) m.stop();
      pub.stop(); // answers every held long poll with the current snapshot
      await new Promise<void>((resolve) => {
        const force = setTimeout(() => server.closeAllConnections(), 500);
        server.close(() => {
          clearTimeout(force);
          resolve();
        });
        server.closeIdleConnections();
        // answers just written leave keep-alive connections idle: close them too
        setImmediate(() => server.closeIdleConnections());
      });
      logger.info('switchyard agent stopped');
    })();
    return stopping;
  };

  // Load-aware instance metrics: scraped on their own timers, carried by every publication.
  const services = (config.inference as { services?: unknown[] } | undefined)?.services;
  let collector: InferenceCollector | undefined;
  if (services && services.length > 0) {
    collector = new InferenceCollector(config.inference, { registry: metrics.registry, logger });
    await collector.start();
    instancesProvider = () => collector!.snapshot();
    // A health flip is published at once; value changes ride the periodic publication.
    collector.on('health', () => pub.publish('instances'));
  }
  // Rules: decisions change the snapshot, so a switch publishes at once.
  const rules = config.rules
    ? await startRules({ config: config.rules, logger, registry: metrics.registry, peers, instances: () => instancesProvider?.(), onChange: () => pub.publish('state_change') })
    : undefined;
  collector?.on('health', () => rules?.instancesChanged());
  const stopAll = async (): Promise<void> => {
    await rules?.stop();
    await collector?.stop();
    await stop();
  };

  return {
    url,
    host: addr.address,
    port: addr.port,
    config,
    events,
    metrics,
    logger,
    peers,
    status,
    snapshot: () => pub.current,
    publish: () => pub.publish('manual'),
    setInstancesProvider(fn) {
      instancesProvider = fn;
    },
    rules,
    stop: stopAll,
  };
}
