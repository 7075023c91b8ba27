// Per-request work, on request headers:
//  1. link status: match `:authority`, set (replace) the link-status header from the precomputed
//     view; strip a client-sent copy on other authorities;
//  2. load-aware choice: for load-aware authorities pick an instance and set (replace) the
//     ORIGINAL_DST endpoint header; a client-sent endpoint or degraded header is always removed.
// No decoding of agent data and no host call for time on this path.
import {
  Context, RootContext, FilterHeadersStatusValues, send_local_response, HeaderPair, GrpcStatusValues,
} from "@solo-io/proxy-runtime/assembly";
import {
  getHeader, replaceHeader, removeHeader, MAP_REQUEST_HEADERS, MAP_RESPONSE_HEADERS,
} from "../abi/host";
import { STATUS_DEGRADED, ALL_INELIGIBLE_REJECT } from "../lib/config";
import { pick } from "../lib/choose";
import { NO_HOLD } from "../lib/inflight";
import { SwitchyardRoot } from "./root";

const AUTHORITY_KEY = String.UTF8.encode(":authority");

export class SwitchyardStream extends Context {
  /** In-flight hold (slot and generation, lib/inflight.ts) of the chosen instance. */
  held: i64 = NO_HOLD;
  debug: string | null = null;

  constructor(context_id: u32, root: RootContext) {
    super(context_id, root);
  }

  onRequestHeaders(_n: u32, _endOfStream: bool): FilterHeadersStatusValues {
    const root = changetype<SwitchyardRoot>(this.root_context);
    const cfg = root.config;
    if (cfg == null) return FilterHeadersStatusValues.Continue;
    const authority = getHeader(MAP_REQUEST_HEADERS, AUTHORITY_KEY);

    const idx = authority == null ? -1 : root.matcher.matchRaw(authority);
    if (idx >= 0) {
      const status = unchecked(root.view.status[idx]);
      // replace, never add: whatever the client sent is overwritten.
      replaceHeader(MAP_REQUEST_HEADERS, root.linkHeader, unchecked(root.statusValues[status]));
      const m = root.metrics!;
      if (status == STATUS_DEGRADED) m.decisionDegraded.add(1); else m.decisionNormal.add(1);
      if (root.view.isFailMode(idx)) m.failMode.add(1);
    } else if (cfg.link.stripUnmatched) {
      if (getHeader(MAP_REQUEST_HEADERS, root.linkHeader) != null) {
        removeHeader(MAP_REQUEST_HEADERS, root.linkHeader);
        root.metrics!.headerStripped.add(1);
      }
    }

    if (!cfg.loadAware.enabled) {
      // An ORIGINAL_DST cluster may route on this header even where load-aware choice is not
      // configured: a client-sent value would let the client pick any ip:port. Always strip it.
      removeHeader(MAP_REQUEST_HEADERS, root.loadAware.endpointHeader);
      return FilterHeadersStatusValues.Continue;
    }
    return this.chooseInstance(root, authority);
  }

  private chooseInstance(root: SwitchyardRoot, authority: ArrayBuffer | null): FilterHeadersStatusValues {
    const la = root.loadAware;
    // An unsanitised ORIGINAL_DST header lets a client route anywhere: never pass one through.
    removeHeader(MAP_REQUEST_HEADERS, la.degradedHeader);
    const idx = authority == null ? -1 : root.loadAwareMatcher.matchRaw(authority);
    if (idx < 0) {
      removeHeader(MAP_REQUEST_HEADERS, la.endpointHeader);
      return FilterHeadersStatusValues.Continue;
    }
    const sp = unchecked(la.plans[idx]);
    const plan = sp.plan;
    const p = pick(plan, la.inflight.total, root.tickNowMs, sp.cfg.picker, sp.cfg.band, la.rng);
    if (p.index < 0) {
      removeHeader(MAP_REQUEST_HEADERS, la.endpointHeader);
      la.allIneligiblePending++;
      if (sp.cfg.debug) this.debug = "none eligible: " + plan.n.toString() + " instances";
      if (sp.cfg.allIneligible == ALL_INELIGIBLE_REJECT) {
        const headers: Array<HeaderPair> = [new HeaderPair(String.UTF8.encode("retry-after"), String.UTF8.encode(sp.cfg.retryAfterS.toString()))];
        if (this.debug != null) headers.push(new HeaderPair(la.debugHeader, String.UTF8.encode(this.debug!)));
        send_local_response(503, "switchyard_all_instances_ineligible", String.UTF8.encode("no eligible instance for " + sp.cfg.service + "\n"),
          headers, GrpcStatusValues.Unavailable);
        return FilterHeadersStatusValues.StopIteration;
      }
      // Forward on the default route: the route table sends `x-degraded: true` to the regular cluster.
      replaceHeader(MAP_REQUEST_HEADERS, la.degradedHeader, la.trueValue);
      return FilterHeadersStatusValues.Continue;
    }
    const i = p.index;
    const slot = unchecked(plan.slot[i]);
    if (sp.cfg.debug) {
      this.debug = "instance=" + unchecked(plan.addr[i]) + " w_ms=" + plan.waitMs(i, unchecked(la.inflight.total[slot])).toString() +
        " rho=" + unchecked(plan.rho[i]).toString() + " eligible=" + p.eligible.toString() + " considered=" + p.considered.toString();
    }
    replaceHeader(MAP_REQUEST_HEADERS, la.endpointHeader, unchecked(plan.addrBytes[i]));
    this.held = la.inflight.acquire(slot);
    unchecked(plan.chosen[i]++);
    return FilterHeadersStatusValues.Continue;
  }

  onResponseHeaders(_n: u32, _endOfStream: bool): FilterHeadersStatusValues {
    const d = this.debug;
    if (d != null) {
      const root = changetype<SwitchyardRoot>(this.root_context);
      replaceHeader(MAP_RESPONSE_HEADERS, root.loadAware.debugHeader, String.UTF8.encode(d));
    }
    return FilterHeadersStatusValues.Continue;
  }

  private release(): void {
    if (this.held != NO_HOLD) {
      changetype<SwitchyardRoot>(this.root_context).loadAware.inflight.release(this.held);
      this.held = NO_HOLD;
    }
  }

  onDone(): bool { this.release(); return true; }

  onDelete(): void { this.release(); }
}
