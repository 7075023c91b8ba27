// Per-request work: on request headers, match `:authority` and set (replace) the link-status
// header from the precomputed view; strip a client-sent copy elsewhere. Two host calls, no
// decoding of agent data, no allocation besides the authority value the host hands over.
import { Context, RootContext, FilterHeadersStatusValues } from "@solo-io/proxy-runtime/assembly";
import { getHeader, replaceHeader, removeHeader, incrementMetric, MAP_REQUEST_HEADERS } from "../abi/host";
import { STATUS_DEGRADED } from "../lib/config";
import { SwitchyardRoot } from "./root";

const AUTHORITY_KEY = String.UTF8.encode(":authority");

export class SwitchyardStream extends Context {
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
      const m = root.metrics;
      incrementMetric(status == STATUS_DEGRADED ? m.decisionDegraded : m.decisionNormal, 1);
      if (root.view.isFailMode(idx)) incrementMetric(m.failMode, 1);
    } else if (cfg.link.stripUnmatched) {
      if (getHeader(MAP_REQUEST_HEADERS, root.linkHeader) != null) {
        removeHeader(MAP_REQUEST_HEADERS, root.linkHeader);
        incrementMetric(root.metrics.headerStripped, 1);
      }
    }
    return FilterHeadersStatusValues.Continue;
  }
}
