// The agent: composes the link monitors, the instance scraping, the snapshot publisher and the
// HTTP API. Programmatic entry: startAgent(). Each part is its own module (wiring/, api/); this
// file only connects them, so a new part (e.g. the rules engine and its admin API) is one more
// step in wireAgent() and, for its routes, one more entry in `routes`.
import { EventEmitter } from 'node:events';
import pino, { type Logger } from 'pino';
import { resolveConfig, type AgentConfig, type AgentConfigInput } from './config';
import { createMetrics, type AgentMetrics } from './metrics';
import type { PeerMonitor, ProbeEndEvent, SampleEvent, StateEvent } from './link/peer-monitor';
import type { InstanceRecord } from './snapshot/codec';
import type { InstanceLlmRecord } from './snapshot/llm';
import { SnapshotPublisher, type Published, type PublishReason } from './snapshot/publisher';
import { startApiServer, type ApiRoute } from './api/server';
import { healthzRoute, metricsRoute, snapshotRoute, statusRoute } from './api/routes';
import { createPeerMonitors, linkStatus } from './wiring/peers';
import { startInstanceSource } from './wiring/instances';
import { startRules, type RulesHandle } from './rules';
import { MeshRuntime } from './mesh/runtime';
import { InflightAggregator } from './mesh/inflight';
import { inflightMetrics, inflightRoute } from './api/inflight';
import { InflightExchange } from './mesh/inflight-exchange';

export { MAX_WAIT_MS } from './api/routes';
export type { ApiRoute } from './api/server';

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
  /** more API routes (paths must not collide with the built-in ones) */
  routes?: ApiRoute[];
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
  /** state-driven routing rules (docs/rules.md), when config.rules is set */
  rules?: RulesHandle;
  /** pool collectors / subscription (docs/mesh.md), when config.mesh sets mode collector or subscriber */
  mesh?: MeshRuntime;
  /** mesh-wide in-flight: the filters' reports (docs/mesh.md), when config.inflight.enabled */
  inflight?: InflightAggregator;
  /** mesh mode: the NATS exchange of the in-flight sums (docs/mesh.md), when config.inflight.enabled */
  inflightExchange?: InflightExchange;
  stop(): Promise<void>;
}

export async function startAgent(input: AgentConfigInput | AgentConfig = {}, opts: StartOptions = {}): Promise<AgentHandle> {
  const config = resolveConfig(input);
  const logger =
    opts.logger ??
    pino({ level: config.log.level, base: { svc: 'switchyard-agent' }, timestamp: pino.stdTimeFunctions.isoTime });
  const events = new EventEmitter<AgentEvents>();
  const w = await wireAgent(config, logger, events, opts);
  const inflight = config.inflight.enabled ? meshInflight(config, w) : undefined;
  const exchange = inflight && w.mesh && config.mesh?.nats ? inflightExchange(config, w, inflight) : undefined;

  const api = await startApiServer({
    host: config.listen.host,
    port: config.listen.port,
    maxConnections: config.listen.maxConnections,
    headersTimeoutMs: config.listen.headersTimeoutMs,
    routes: [healthzRoute(), statusRoute(w.status, () => w.rules?.status(), () => {
      const m = w.mesh?.status();
      return m && exchange ? { ...m, inflight: exchange.status() } : m;
    }), metricsRoute(w.metrics.registry), snapshotRoute(w.publisher),
      ...(inflight ? [inflightRoute(inflight, config.inflight.maxBodyBytes, inflightMetrics(w.metrics.registry, inflight))] : []), ...(opts.routes ?? [])],
  }).catch(async (err) => {
    await exchange?.stop();
    await w.rules?.stop();
    await w.mesh?.stop();
    await w.instances?.stop();
    throw err;
  });

  w.publisher.start();
  exchange?.start();
  for (const m of w.peers.values()) m.start();
  logger.info(
    { url: api.url, peers: config.link.peers.map((p) => ({ name: p.name, probe: p.probe, intervalMs: p.intervalMs })), seq: w.publisher.current.snapshot.seq },
    'switchyard agent listening',
  );

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      await exchange?.stop();
      await w.rules?.stop();
      await w.mesh?.stop();
      await w.instances?.stop();
      logger.info('switchyard agent stopping');
      for (const m of w.peers.values()) m.stop();
      w.publisher.stop(); // answers every held long poll with the current snapshot
      await api.close();
      logger.info('switchyard agent stopped');
    })());

  return {
    url: api.url,
    host: api.host,
    port: api.port,
    config,
    events,
    metrics: w.metrics,
    logger,
    peers: w.peers,
    status: w.status,
    snapshot: () => w.publisher.current,
    publish: () => w.publisher.publish('manual'),
    setInstancesProvider(fn) {
      w.instancesProvider = fn;
    },
    rules: w.rules,
    mesh: w.mesh,
    inflight,
    inflightExchange: exchange,
    stop,
  };
}

/**
 * The aggregation of the filters' in-flight reports; an address counts only while it is an
 * instance the agent serves (the set is refreshed at most once a second: a report per proxy per
 * tick must not rebuild it).
 */
function meshInflight(config: AgentConfig, w: Wired): InflightAggregator {
  const c = config.inflight;
  return new InflightAggregator({ maxProxies: c.maxProxies, maxInstances: c.maxInstances, expireReports: c.expireReports, prefixRecords: c.prefixRecords, prefixLog: c.prefixLog, isInstance: (a) => poolOfAddr(w, a) !== undefined });
}

/** addr -> its pool key ("peer or _/service"), from the records served, rebuilt at most once a second */
const poolCache = new WeakMap<Wired, { at: number; pools: Map<string, string> }>();
function poolOfAddr(w: Wired, addr: string): string | undefined {
  const now = Date.now();
  let c = poolCache.get(w);
  if (!c || now - c.at >= 1000) {
    c = { at: now, pools: new Map((w.instancesProvider?.() ?? []).map((r) => [r.addr, `${r.peer === '' ? '_' : r.peer}/${r.service}`])) };
    poolCache.set(w, c);
  }
  return c.pools.get(addr);
}

/** mesh mode: the agents' sums over NATS, on the mesh runtime's connection */
function inflightExchange(config: AgentConfig, w: Wired, agg: InflightAggregator): InflightExchange {
  const mesh = w.mesh!;
  const services = ((config.inference as { services?: Array<{ name: string; peer?: string }> } | undefined)?.services ?? []);
  return new InflightExchange(agg, config.inflight, {
    id: mesh.id,
    subjectPrefix: config.mesh!.nats!.subjectPrefix,
    connection: () => mesh.natsConnection(),
    pools: services.map((s) => ({ peer: s.peer ?? '', service: s.name })),
    poolOf: (a) => poolOfAddr(w, a),
    isLeader: (pool) => mesh.isLeader(pool),
    isCandidate: () => mesh.mode === 'collector',
    leaderOf: (pool) => mesh.leaderOf(pool),
    registry: w.metrics.registry,
  });
}

interface Wired {
  metrics: AgentMetrics;
  peers: Map<string, PeerMonitor>;
  publisher: SnapshotPublisher;
  instances?: Awaited<ReturnType<typeof startInstanceSource>>;
  instancesProvider?: () => InstanceRecord[] | undefined;
  llmProvider?: () => InstanceLlmRecord[] | undefined;
  rules?: RulesHandle;
  mesh?: MeshRuntime;
  status: (peer?: string) => 'healthy' | 'degraded' | undefined;
}

/** link monitors -> publisher <- instance scraping; nothing runs until the caller starts it. */
async function wireAgent(config: AgentConfig, logger: Logger, events: EventEmitter<AgentEvents>, opts: StartOptions): Promise<Wired> {
  // the publisher and the metrics refer to each other (waiter gauge, publish counters): late-bound
  let publisher: SnapshotPublisher | undefined;
  const metrics = createMetrics({ defaultMetrics: opts.defaultMetrics, waiterCount: () => publisher?.waiterCount ?? 0 });
  const peers = createPeerMonitors(config.link.peers, {
    metrics,
    logger,
    events,
    onStateChange: () => publisher?.publish('state_change'), // listeners see the new snapshot
  });
  const w: Wired = {
    metrics,
    peers,
    publisher: undefined as unknown as SnapshotPublisher,
    status: (peer) => linkStatus(peers, peer),
  };
  publisher = new SnapshotPublisher({
    publishIntervalMs: config.publishIntervalMs,
    collectPeers: () => [...peers.values()].map((m) => m.record()),
    collectInstances: () => w.instancesProvider?.(),
    collectLlm: () => w.llmProvider?.(),
    collectRules: () => w.rules?.decisions(),
    registry: metrics.registry,
    onPublish: (p, reason) => {
      metrics.snapshotSeq.set(p.snapshot.seq);
      metrics.publishes.inc({ reason });
      events.emit('publish', p, reason);
    },
  });
  w.publisher = publisher;
  const pub = publisher;
  const startSource = () =>
    startInstanceSource(config.inference, {
      registry: metrics.registry,
      logger,
      onHealthChange: () => {
        pub.publish('instances');
        w.rules?.instancesChanged();
        w.mesh?.localHealthChanged();
      },
    });
  if (config.mesh && config.mesh.mode !== 'local') {
    // the mesh owns the scraping (always on a collector, only as a fallback on a subscriber)
    const mesh = new MeshRuntime(config.mesh, config.inference, {
      registry: metrics.registry,
      logger,
      startSource,
      onChange: () => {
        pub.publish('instances');
        w.rules?.instancesChanged();
      },
    });
    w.mesh = mesh;
    await mesh.start();
    w.instancesProvider = () => mesh.records();
    w.llmProvider = () => mesh.llmRecords();
  } else {
    w.instances = await startSource();
    if (w.instances) w.instancesProvider = w.instances.records;
    if (w.instances?.llmRecords) w.llmProvider = w.instances.llmRecords;
  }
  // Rules: a decision switch changes the snapshot, so it publishes at once.
  if (config.rules) {
    w.rules = await startRules({
      config: config.rules,
      logger,
      registry: metrics.registry,
      peers,
      instances: () => w.instancesProvider?.(),
      onChange: () => pub.publish('state_change'),
    });
    // the first decisions are in force from here: publish them without waiting for a change
    pub.publish('state_change');
  }
  return w;
}
