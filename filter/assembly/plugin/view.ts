// What a request needs, handed by the root context to every stream context (the way the
// proxy-wasm SDK examples pass state from root to request): per route (one authority lookup,
// lib/routes.ts) the link status to write and the load-aware plan to choose from, the
// pre-encoded header names and values, and the counters. The root rebuilds the per-route
// arrays when the configuration, the snapshot or its staleness changes, and sets the clock on
// each tick; the stream only reads. Streams never see the root context.
import { PluginConfig } from "../lib/config";
import { RouteTable, buildRoutes, NO_SERVICE } from "../lib/routes";
import { LinkView, REASON_SNAPSHOT } from "../lib/link";
import { RulesPlan, RuleDecision, planRules } from "../lib/rule-decisions";
import { Rng } from "../lib/inflight";
import { HeaderPair } from "@solo-io/proxy-runtime/assembly";
import { log, LOG_WARN, incrementMetric, removeHeader, MAP_REQUEST_HEADERS } from "../abi/host";
import { LoadAware, ServicePlan } from "./loadaware";
import { Metrics, Counter } from "./metrics";

/** linkStatus of a route that is not a link authority. */
export const NOT_LINKED: i32 = -1;

export class RequestView {
  routes: RouteTable = new RouteTable();
  /** Per route: STATUS_NORMAL / STATUS_DEGRADED to write, or NOT_LINKED. */
  linkStatus: StaticArray<i32> = new StaticArray<i32>(0);
  /** Per route: the status came from the fail mode rather than from agent data. */
  linkFailMode: StaticArray<bool> = new StaticArray<bool>(0);
  /** Per route: the load-aware service plan, or null when the authority has no load-aware service. */
  plans: Array<ServicePlan | null> = [];

  stripUnmatched: bool = true;
  loadAwareEnabled: bool = false;
  linkHeader: ArrayBuffer = new ArrayBuffer(0);
  statusValues: StaticArray<ArrayBuffer> = [String.UTF8.encode("normal"), String.UTF8.encode("degraded")];
  endpointHeader: ArrayBuffer = new ArrayBuffer(0);
  /** loadAware.remoteEndpointHeader (empty: remote picks use endpointHeader). */
  remoteEndpointHeader: ArrayBuffer = new ArrayBuffer(0);
  degradedHeader: ArrayBuffer = new ArrayBuffer(0);
  /** Some service writes x-gateway-destination-endpoint: a client copy is stripped from every request. */
  gatewayDestinationOn: bool = false;
  gatewayDestinationHeader: ArrayBuffer = String.UTF8.encode("x-gateway-destination-endpoint");
  gatewaySubsetHeader: ArrayBuffer = String.UTF8.encode("x-gateway-destination-endpoint-subset");
  debugHeader: ArrayBuffer = new ArrayBuffer(0);
  trueValue: ArrayBuffer = String.UTF8.encode("true");
  retryAfterName: ArrayBuffer = String.UTF8.encode("retry-after");

  /** Route headers the filter owns (rules.routeHeaders), pre-encoded. */
  routeHeaders: Array<ArrayBuffer> = [];
  rulesDebug: bool = false;
  /** The decisions in force, planned for the request path (lib/rule-decisions.ts). */
  rules: RulesPlan = new RulesPlan();
  /** Per entry of rules.applies: its request counter and its local-reply headers. */
  ruleCounters: Array<Counter> = [];
  ruleReplyHeaders: Array<Array<HeaderPair>> = [];
  /** Splits without x-request-id draw from here (seeded per VM). */
  rulesRng: Rng = new Rng(1);
  requestIdHeader: ArrayBuffer = String.UTF8.encode("x-request-id");
  /** set, version, rule and since of every decision in the current plan: a snapshot that changes none is not re-planned */
  private rulesKey: string = "";
  /** set → the refusal last logged for it (logged once per distinct refusal) */
  private refusalLogged: Map<string, string> = new Map();

  /**
   * The last :authority seen and what it matched: most requests on a worker repeat the authority
   * of the one before, and then neither copy nor match it again. Valid for the rules plan it was
   * matched against (routes never change within a view).
   */
  private lastAuthority: ArrayBuffer = new ArrayBuffer(0);
  private lastRules: RulesPlan | null = null;
  private lastRoute: i32 = -1;
  private lastRule: i32 = -1;
  /** matchAuthority's answers: the route (routes.match) and the rule decision (rules.match), -1 for none. */
  matchedRoute: i32 = -1;
  matchedRule: i32 = -1;

  /** Time of the last tick (ms): the request path's clock, so it makes no host call for time. */
  nowMs: f64 = 0;

  constructor(cfg: PluginConfig, public loadAware: LoadAware, public metrics: Metrics) {
    this.routes = buildRoutes(cfg);
    const n = this.routes.size;
    this.linkStatus = new StaticArray<i32>(n);
    this.linkFailMode = new StaticArray<bool>(n);
    this.plans = new Array<ServicePlan | null>(n);
    for (let r = 0; r < n; r++) this.linkStatus[r] = NOT_LINKED;
    this.stripUnmatched = cfg.link.stripUnmatched;
    this.loadAwareEnabled = cfg.loadAware.enabled;
    this.linkHeader = String.UTF8.encode(cfg.link.header);
    // Defaults apply without a loadAware section: the filter strips these names regardless.
    this.endpointHeader = String.UTF8.encode(cfg.loadAware.endpointHeader);
    this.remoteEndpointHeader = String.UTF8.encode(cfg.loadAware.remoteEndpointHeader);
    for (let i = 0; i < cfg.loadAware.services.length; i++) if (cfg.loadAware.services[i].gatewayDestination) this.gatewayDestinationOn = true;
    this.degradedHeader = String.UTF8.encode(cfg.loadAware.degradedHeader);
    this.debugHeader = String.UTF8.encode(cfg.loadAware.debugHeader);
    for (let i = 0; i < cfg.rules.routeHeaders.length; i++) this.routeHeaders.push(String.UTF8.encode(cfg.rules.routeHeaders[i]));
    this.rulesDebug = cfg.rules.debug;
  }

  /** Removes every endpoint header the filter owns from the request (a client must never name the upstream). */
  stripEndpoints(): void {
    removeHeader(MAP_REQUEST_HEADERS, this.endpointHeader);
    if (this.remoteEndpointHeader.byteLength > 0) removeHeader(MAP_REQUEST_HEADERS, this.remoteEndpointHeader);
    if (this.gatewayDestinationOn) removeHeader(MAP_REQUEST_HEADERS, this.gatewayDestinationHeader);
  }

  /** Matches the authority whose `len` bytes are at `p` into matchedRoute / matchedRule. */
  matchAuthority(p: usize, len: i32): void {
    const last = this.lastAuthority;
    if (this.lastRules === this.rules && last.byteLength == len && memory.compare(changetype<usize>(last), p, <usize>len) == 0) {
      this.matchedRoute = this.lastRoute;
      this.matchedRule = this.lastRule;
      return;
    }
    const raw = new ArrayBuffer(len);
    memory.copy(changetype<usize>(raw), p, <usize>len);
    const route = this.routes.match(raw);
    const rule = this.rules.match(raw);
    this.lastAuthority = raw;
    this.lastRules = this.rules;
    this.matchedRoute = this.lastRoute = route;
    this.matchedRule = this.lastRule = rule;
  }

  /**
   * Re-plans the rule decisions (null: none in force — no snapshot, or a stale one). Runs off
   * the request path, on snapshot adoption and staleness changes; a plan whose decisions (set,
   * version, rule and since) did not change is kept, with its authority cache.
   */
  refreshRules(cfg: PluginConfig, decisions: Array<RuleDecision> | null): void {
    let key = decisions == null ? "none" : "in force:";
    if (decisions != null) for (let i = 0; i < decisions.length; i++) {
      const d = decisions[i];
      // version restarts with the agent process: ruleId and sinceMs tell two "version 1" apart
      key += d.set + "\u0000" + d.version.toString() + "\u0000" + d.ruleId + "\u0000" + d.sinceMs.toString() + "\u0000";
    }
    if (key == this.rulesKey) return;
    this.rulesKey = key;
    const plan = planRules(cfg.rules, decisions == null ? new Array<RuleDecision>() : decisions!);
    const counters = new Array<Counter>(plan.applies.length);
    const replies = new Array<Array<HeaderPair>>(plan.applies.length);
    for (let i = 0; i < plan.applies.length; i++) {
      const a = plan.applies[i];
      counters[i] = this.metrics.ruleCounter(a.set, a.ruleId);
      const pairs = new Array<HeaderPair>();
      for (let k = 0; k < a.replyNames.length; k++) pairs.push(new HeaderPair(a.replyNames[k], a.replyValues[k]));
      replies[i] = pairs;
    }
    for (let i = 0; i < plan.refused.length; i++) {
      const set = plan.refusedSets[i];
      if (this.refusalLogged.has(set) && this.refusalLogged.get(set) == plan.refused[i]) continue;
      if (this.refusalLogged.size >= 64) this.refusalLogged.clear();
      this.refusalLogged.set(set, plan.refused[i]);
      log(LOG_WARN, "switchyard: rule decision refused: " + plan.refused[i]);
    }
    if (plan.refused.length > 0) incrementMetric(this.metrics.rulesRefused, plan.refused.length);
    this.rules = plan;
    this.ruleCounters = counters;
    this.ruleReplyHeaders = replies;
  }

  /** Re-resolves every route after the link view or the load-aware plans changed. */
  refresh(link: LinkView): void {
    const t = this.routes;
    const plans = this.loadAware.plans;
    for (let r = 0; r < t.size; r++) {
      const li = unchecked(t.link[r]);
      if (li != NO_SERVICE && li < link.status.length) {
        this.linkStatus[r] = link.status[li];
        this.linkFailMode[r] = link.reason[li] != REASON_SNAPSHOT;
      } else {
        this.linkStatus[r] = NOT_LINKED;
        this.linkFailMode[r] = false;
      }
      const pi = unchecked(t.loadAware[r]);
      this.plans[r] = this.loadAwareEnabled && pi != NO_SERVICE && pi < plans.length ? plans[pi] : null;
    }
  }
}
