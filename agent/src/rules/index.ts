// startRules(): the agent's entry point into state-driven routing (issue 8). agent.ts calls it
// once with what it already has (config, logger, metrics registry, peer monitors, the inference
// collector's records) and gets decisions() as plain data for the snapshot, status() for
// /status, and the admin API on its own loopback listener.
import * as http from 'node:http';
import { EventEmitter } from 'node:events';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import { ADMIN_HEADERS_TIMEOUT_MS, ADMIN_MAX_CONNECTIONS, ADMIN_REQUEST_TIMEOUT_MS, createAdminHandler } from '../admin/api';
import { checkingIntervalMs, guardConnections, listen, type ConnectionStats } from '../api/guard';
import { loadToken } from '../admin/auth';
import { MemoryStore } from '../overrides/memory';
import type { OverrideStore, StoreStatus } from '../overrides/types';
import type { InstanceRecord } from '../snapshot/codec';
import type { Prober } from '../link/probe';
import { compileRules, type CompiledRules } from './compile';
import type { RuleDecision, SwitchEvent } from './engine';
import { RulesRuntime, type OverrideView } from './runtime';
import type { RulesConfig, VariableConfig } from './schema';
import { Variables, type PeerLike, type VariableState } from './variables';

export type { RuleDecision, SwitchEvent } from './engine';
export type { RuleAction } from './actions';
export type { RulesConfig } from './schema';
export { rulesSchema, checkRulesConfig } from './schema';

export interface RulesContext {
  /** config.rules, validated and defaulted by resolveConfig */
  config: RulesConfig;
  logger: Logger;
  registry: Registry;
  /** the agent's PeerMonitors, by peer name */
  peers?: ReadonlyMap<string, PeerLike>;
  /** the inference collector's records (collector.snapshot()) */
  instances?: () => InstanceRecord[] | undefined;
  /** called after every change of decisions(): publish a snapshot */
  onChange?: (decisions: RuleDecision[]) => void;
  env?: NodeJS.ProcessEnv;
  now?: () => number;
  /** tests: a store instead of the configured one */
  store?: OverrideStore;
  /** tests: a prober factory for probe variables */
  prober?: (cfg: Extract<VariableConfig, { kind: 'probe' }>) => Prober;
}

export interface RulesStatus {
  variables: Array<VariableState & { changedAt: string }>;
  sets: ReturnType<RulesRuntime['setStatuses']>;
  flags: Array<{ name: string; value: boolean; author: string; reason: string; setAtMs: number; expiresAtMs?: number }>;
  overrides: OverrideView[];
  store: StoreStatus & { note?: string };
}

export interface RulesHandle {
  decisions(): RuleDecision[];
  status(): RulesStatus;
  /** the admin API's base URL (undefined when rules.admin.enabled is false) */
  adminUrl?: string;
  /** the admin listener's connection counts (api/guard.ts), when it listens */
  adminConnections?: ConnectionStats;
  /** the admin API handler, for mounting elsewhere */
  handleAdmin(req: http.IncomingMessage, res: http.ServerResponse): void;
  /** evaluate now (a variable the agent knows changed) */
  evaluate(): void;
  /** re-read pool variables now (call on the collector's 'health'/'change' events) */
  instancesChanged(): void;
  events: EventEmitter<{ switch: [SwitchEvent]; change: [RuleDecision[]] }>;
  stop(): Promise<void>;
}

function createRulesMetrics(registry: Registry) {
  const registers = [registry];
  return {
    variable: new Gauge({ name: 'switchyard_rule_variable', help: 'State variable value (0/1)', labelNames: ['variable', 'kind'], registers }),
    variableChanges: new Counter({ name: 'switchyard_rule_variable_changes_total', help: 'State variable changes', labelNames: ['variable'], registers }),
    active: new Gauge({ name: 'switchyard_rule_active', help: '1 for the rule in force in each rule set (override:target for an override by target)', labelNames: ['set', 'rule'], registers }),
    switches: new Counter({ name: 'switchyard_rule_switches_total', help: 'Switches of the decision of a rule set, by cause (initial, rules, override-set, override-end)', labelNames: ['set', 'to', 'cause'], registers }),
    version: new Gauge({ name: 'switchyard_rule_decision_version', help: 'Version of the decision of each rule set', labelNames: ['set'], registers }),
    override: new Gauge({ name: 'switchyard_rule_override_active', help: '1 while an operator override is in force on the rule set', labelNames: ['set'], registers }),
    storeConnected: new Gauge({ name: 'switchyard_rule_store_connected', help: '1 while the flag/override store is reachable (memory: always)', registers }),
    adminRequests: new Counter({ name: 'switchyard_admin_requests_total', help: 'Admin API requests by kind (read/write) and outcome', labelNames: ['method', 'outcome'], registers }),
  };
}

/** Metric label of a rule id: an override by target is one label, whatever the target (bounded cardinality). */
const ruleLabel = (id: string): string => (id.startsWith('override:') ? 'override:target' : id);

/** Compile, start variables and the store, make the first decision, open the admin API. */
export async function startRules(ctx: RulesContext): Promise<RulesHandle> {
  const cfg = ctx.config;
  const now = ctx.now ?? Date.now;
  const compiled: CompiledRules = compileRules(cfg, { peers: ctx.peers ? [...ctx.peers.keys()] : undefined });
  const log = ctx.logger.child({ component: 'rules' });
  const metrics = createRulesMetrics(ctx.registry);
  const events = new EventEmitter<{ switch: [SwitchEvent]; change: [RuleDecision[]] }>();
  const vars = new Variables(compiled.variables, { now, peers: ctx.peers, instances: ctx.instances, prober: ctx.prober });
  const runtime = new RulesRuntime(compiled, vars.values, now, cfg.admin.maxOverrideS * 1000);
  let store: OverrideStore;
  if (ctx.store) store = ctx.store;
  else if (cfg.store.kind === 'etcd') {
    // loaded only when configured: etcd3 reads its gRPC definitions from disk at load time
    const { EtcdStore } = await import('../overrides/etcd');
    store = new EtcdStore({ endpoints: cfg.store.endpoints, prefix: cfg.store.prefix, dialTimeoutMs: cfg.store.dialTimeoutMs, healthIntervalMs: cfg.store.healthIntervalMs, maxEntries: cfg.store.maxEntries, now });
  } else store = new MemoryStore();

  compiled.variables.forEach((v, i) => metrics.variable.set({ variable: v.name, kind: v.kind }, vars.values[i] ? 1 : 0));
  vars.on('change', (c) => {
    metrics.variable.set({ variable: c.name, kind: compiled.variables[c.slot].kind }, c.to ? 1 : 0);
    metrics.variableChanges.inc({ variable: c.name });
    log.info({ event: 'variable_change', variable: c.name, from: c.from, to: c.to, reason: c.reason, at: new Date(c.atMs).toISOString() }, `variable ${c.name} = ${c.to}`);
    schedule();
  });

  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let heartbeat: NodeJS.Timeout[] = [];
  let pending = false;
  // no decision before every probe variable has its first result (startRules waits for them)
  let ready = false;
  let evaluating = false;
  function evaluateNow(): void {
    if (stopped) return;
    // flags applied here change variables: that is this evaluation, not a second one (H counts)
    evaluating = true;
    try {
      vars.applyFlags(runtime.liveFlags(store.flags()));
    } finally {
      evaluating = false;
    }
    const switches = runtime.evaluate(store.overrides());
    for (const d of runtime.decisions()) {
      metrics.version.set({ set: d.set }, d.version);
      metrics.override.set({ set: d.set }, d.override ? 1 : 0);
    }
    for (const s of switches) {
      if (s.from !== undefined) metrics.active.set({ set: s.set, rule: ruleLabel(s.from) }, 0);
      metrics.active.set({ set: s.set, rule: ruleLabel(s.to) }, 1);
      metrics.switches.inc({ set: s.set, to: ruleLabel(s.to), cause: s.cause });
      log.info(
        { event: 'rule_switch', set: s.set, from: s.from ?? null, to: s.to, cause: s.cause, variables: Object.fromEntries(s.because.map((b) => [b.name, b.value])), override: s.override ?? null, at: new Date(s.atMs).toISOString() },
        `rule set ${s.set}: ${s.from ?? '(none)'} -> ${s.to} (${s.cause})`,
      );
      events.emit('switch', s);
    }
    if (switches.length) {
      const d = runtime.decisions();
      events.emit('change', d);
      ctx.onChange?.(d);
    }
    if (timer) clearTimeout(timer);
    timer = undefined;
    const wake = runtime.nextWake(store.flags(), store.overrides());
    if (wake !== undefined) {
      // +1 ms: a timer may fire a hair early against Date.now()
      timer = setTimeout(evaluateNow, Math.max(0, wake - now()) + 1);
      timer.unref();
    }
  }
  // several inputs changing in one tick give one evaluation
  function schedule(): void {
    if (pending || stopped || evaluating || !ready) return;
    pending = true;
    queueMicrotask(() => {
      pending = false;
      evaluateNow();
    });
  }

  store.on('change', schedule);
  store.on('connection', (c) => {
    metrics.storeConnected.set(c.connected ? 1 : 0);
    if (c.connected) log.info({ event: 'store_connected', store: store.kind }, 'flag/override store reachable again: re-listed');
    else log.warn({ event: 'store_disconnected', store: store.kind, error: c.error }, 'flag/override store unreachable: keeping the last known flags and overrides');
  });
  await store.start();
  metrics.storeConnected.set(store.status().connected ? 1 : 0);
  await vars.start();
  ready = true;
  evaluateNow();
  for (const s of compiled.sets) {
    const h = setInterval(evaluateNow, s.config.evaluateIntervalMs);
    h.unref();
    heartbeat.push(h);
  }

  const status = (): RulesStatus => {
    const st = store.status();
    return {
      variables: vars.states.map((s) => ({ ...s, changedAt: new Date(s.changedAtMs).toISOString() })),
      sets: runtime.setStatuses(),
      flags: [...runtime.liveFlags(store.flags())].map(([name, f]) => ({ name, ...f })),
      overrides: runtime.overrideViews(store.overrides()),
      store: st.connected ? st : { ...st, note: `${st.kind} unreachable since ${new Date(st.sinceMs).toISOString()}: the last known flags and overrides stay in force` },
    };
  };

  let tokenInfo: { token?: string; why?: string } = {};
  if (cfg.admin.enabled) tokenInfo = loadToken(cfg.admin, ctx.env ?? process.env);
  if (tokenInfo.why) log.warn({ event: 'admin_no_token' }, tokenInfo.why);
  const handleAdmin = createAdminHandler(
    {
      status,
      decisions: () => runtime.decisions(),
      now,
      maxOverrideS: cfg.admin.maxOverrideS,
      isFlag: (n) => runtime.isFlag(n),
      ruleIds: (set) => {
        const s = compiled.sets.find((x) => x.name === set);
        return s ? new Set(s.byId.keys()) : undefined;
      },
      flags: () => store.flags(),
      overrides: () => store.overrides(),
      putFlag: (n, e) => store.putFlag(n, e),
      deleteFlag: (n) => store.deleteFlag(n),
      putOverride: (s, e) => store.putOverride(s, e),
      deleteOverride: (s) => store.deleteOverride(s),
    },
    { token: tokenInfo.token, noTokenWhy: tokenInfo.why, logger: log.child({ component: 'admin' }), requests: metrics.adminRequests },
  );

  let server: http.Server | undefined;
  let adminConnections: ConnectionStats | undefined;
  let adminUrl: string | undefined;
  if (cfg.admin.enabled) {
    // The main listener's protection (issue 24 #3): connection cap with shedding, header and
    // request times; a port in use is a ListenError (one line), not a stack trace.
    const srv = http.createServer({ connectionsCheckingInterval: checkingIntervalMs(ADMIN_HEADERS_TIMEOUT_MS) }, handleAdmin);
    server = srv;
    adminConnections = guardConnections(srv, { maxConnections: ADMIN_MAX_CONNECTIONS, headersTimeoutMs: ADMIN_HEADERS_TIMEOUT_MS, requestTimeoutMs: ADMIN_REQUEST_TIMEOUT_MS });
    await listen(srv, cfg.admin.host, cfg.admin.port);
    const a = srv.address() as AddressInfo;
    adminUrl = `http://${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}`;
    log.info({ adminUrl, writes: tokenInfo.token ? 'token' : 'disabled', store: store.kind }, 'rules admin API listening');
  }

  return {
    decisions: () => runtime.decisions(),
    status,
    adminUrl,
    adminConnections,
    handleAdmin,
    evaluate: evaluateNow,
    instancesChanged: () => vars.pollPools(),
    events,
    async stop() {
      if (stopped) return;
      stopped = true;
      if (timer) clearTimeout(timer);
      for (const h of heartbeat) clearInterval(h);
      heartbeat = [];
      vars.stop();
      await store.stop();
      if (server) {
        const srv = server;
        await new Promise<void>((r) => {
          srv.close(() => r());
          srv.closeAllConnections();
        });
      }
    },
  };
}
