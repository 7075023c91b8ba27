// What a request needs, handed by the root context to every stream context (the way the
// proxy-wasm SDK examples pass state from root to request): per route (one authority lookup,
// lib/routes.ts) the link status to write and the load-aware plan to choose from, the
// pre-encoded header names and values, and the counters. The root rebuilds the per-route
// arrays when the configuration, the snapshot or its staleness changes, and sets the clock on
// each tick; the stream only reads. Streams never see the root context.
import { PluginConfig } from "../lib/config";
import { RouteTable, buildRoutes, NO_SERVICE } from "../lib/routes";
import { LinkView, REASON_SNAPSHOT } from "../lib/link";
import { LoadAware, ServicePlan } from "./loadaware";
import { Metrics } from "./metrics";

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
  degradedHeader: ArrayBuffer = new ArrayBuffer(0);
  debugHeader: ArrayBuffer = new ArrayBuffer(0);
  trueValue: ArrayBuffer = String.UTF8.encode("true");
  retryAfterName: ArrayBuffer = String.UTF8.encode("retry-after");

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
    this.degradedHeader = String.UTF8.encode(cfg.loadAware.degradedHeader);
    this.debugHeader = String.UTF8.encode(cfg.loadAware.debugHeader);
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
