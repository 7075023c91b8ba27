// Per-request work, from the RequestView the root context hands over (plugin/view.ts):
//  on request headers:
//   0. rule decisions (issue 8): one authority lookup in the rules plan; a local-reply decision
//      answers here; route/split replace the decision's route header; link-status replaces the
//      link-status header (it wins over the link service's status); every other declared route
//      header is removed, on every request, so a client never chooses a rule's outcome;
//   1. one authority lookup gives the route: its link status is set (replace) in the link-status
//      header; on authorities with no link service a client-sent copy is stripped;
//   2. load-aware choice: for routes with a load-aware service pick an instance and set (replace)
//      the ORIGINAL_DST endpoint header; a client-sent endpoint, degraded or debug header is
//      always removed; services with a `request` block hold the headers and choose once the body
//      is read (plugin/body.ts, through onRequestBody and applyPick);
//  on response headers: the debug header is replaced when this request produced one and removed
//  otherwise, and an upstream-set copy of the other filter-owned headers (route headers included)
//  never reaches the client (an echoing upstream would otherwise reveal instance addresses and link state).
//  adapter streams (lib/choice/adapter-streams.ts): a LoRA request answered 200 counts as running
//  its adapter at the instance from its first response body byte to its end;
//  in-band learning (plugin/inband.ts, docs/inband.md): the chosen instance's slot, generation,
//  start time and our in-flight count to it before this request are kept; response headers and
//  end of stream feed the per-instance estimates, and the ORCA headers are read and stripped.
// No decoding of agent data on this path. In-band on: one clock read per stream phase (choice,
// response headers, end of stream), since the tick's clock is refreshMs coarse. Values only looked
// at (:authority, :status, a client's link-status copy) are read into the scratch area
// (abi/host.ts peekHeader): no object per request for them; an authority equal to the last one
// seen is not matched again (RequestView.matchAuthority).
import {
  Context, RootContext, FilterHeadersStatusValues, FilterDataStatusValues, send_local_response, HeaderPair, GrpcStatusValues,
} from "@solo-io/proxy-runtime/assembly";
import {
  getHeader, replaceHeader, removeHeader, peekHeader, Peek, MAP_REQUEST_HEADERS, MAP_RESPONSE_HEADERS,
} from "../abi/host";
import { STATUS_DEGRADED, ALL_INELIGIBLE_REJECT } from "../lib/config";
import { pick, Pick, priceAll, rankFallbacks, subsetMask, PICKER_P2C } from "../lib/choose";
import { ACTION_ROUTE, ACTION_SPLIT, ACTION_LINK_STATUS, ACTION_LOCAL_REPLY, requestIdPoint, randomPoint, splitIndex } from "../lib/rule-decisions";
import { NO_HOLD } from "../lib/inflight";
import { getU } from "../lib/slot-array";
import { RequestView, NOT_LINKED } from "./view";
import { ServicePlan, LoadAware } from "./loadaware";
import { BodyHold, beginHold, bodyChunk } from "./body";
import { probePick } from "../lib/choice/scorer-inband";
import { clockMs, recordHeaders, stripOrcaHeaders, responseStatus } from "./inband";
import { AdapterStreams, NO_TICKET } from "../lib/choice/adapter-streams";

const AUTHORITY_KEY = String.UTF8.encode(":authority");
/** Header values the request path only looks at (abi/host.ts peekHeader): one per VM, callbacks never nest. */
const PEEK = new Peek();

export class SwitchyardStream extends Context {
  /** In-flight hold (slot and generation, lib/inflight.ts) of the chosen instance. */
  held: i64 = NO_HOLD;
  debug: string | null = null;
  /** the applied rule decision's debug value (rules.debug), pre-built per snapshot */
  ruleDebug: string | null = null;
  /** Request-aware services: the held request while its body is read (plugin/body.ts). */
  hold: BodyHold | null = null;
  /** In-band bookkeeping (plugin/inband.ts): the service, slot and generation, start time, answer. */
  inbandPlan: ServicePlan | null = null;
  inbandSlot: i32 = -1;
  inbandGen: u32 = 0;
  startMs: f64 = 0;
  /** Our in-flight count to the chosen instance before this request (lib/inband.ts waitQueue: the backlog it was sent with). */
  sentWith: i32 = 0;
  headersMs: f64 = 0;
  headersSeen: bool = false;
  status: i32 = 0;
  /** Adapter streams: the table, the adapter's hash and the slot it was sent to (−1: not armed), the ticket once it streams. */
  adapterStreams: AdapterStreams | null = null;
  adapterHash: u32 = 0;
  adapterSlot: i32 = -1;
  adapterTicket: i64 = NO_TICKET;
  /** The gateway's endpoint subset for this request (services with gatewaySubset; null: none given). */
  subset: StaticArray<u8> | null = null;

  constructor(context_id: u32, root: RootContext, private view: RequestView | null) {
    super(context_id, root);
  }

  requestView(): RequestView | null { return this.view; }

  onRequestHeaders(_n: u32, _endOfStream: bool): FilterHeadersStatusValues {
    const v = this.view;
    if (v == null) return FilterHeadersStatusValues.Continue;
    const au = PEEK;
    let route = -1;
    let ri = -1;
    if (peekHeader(MAP_REQUEST_HEADERS, AUTHORITY_KEY, au)) {
      v.matchAuthority(au.ptr, au.len);
      route = v.matchedRoute;
      ri = v.matchedRule;
      au.buf = null;
    }
    let written: i32 = -1;
    let ruleStatus: i32 = NOT_LINKED;
    if (ri >= 0) {
      const a = unchecked(v.rules.applies[ri]);
      unchecked(v.ruleCounters[ri]).add(1);
      if (v.rulesDebug) this.ruleDebug = a.debug;
      const kind = a.kind;
      if (kind == ACTION_ROUTE) {
        replaceHeader(MAP_REQUEST_HEADERS, unchecked(v.routeHeaders[a.header]), a.value);
        written = a.header;
      } else if (kind == ACTION_SPLIT) {
        const id = getHeader(MAP_REQUEST_HEADERS, v.requestIdHeader);
        const point = id != null ? requestIdPoint(id, a.total) : randomPoint(v.rulesRng.next(), a.total);
        replaceHeader(MAP_REQUEST_HEADERS, unchecked(v.routeHeaders[a.header]), unchecked(a.values[splitIndex(a.cum, point)]));
        written = a.header;
      } else if (kind == ACTION_LINK_STATUS) {
        ruleStatus = a.linkStatus;
      } else if (kind == ACTION_LOCAL_REPLY) {
        let headers = unchecked(v.ruleReplyHeaders[ri]);
        if (this.ruleDebug != null) {
          headers = headers.slice(0);
          headers.push(new HeaderPair(v.debugHeader, String.UTF8.encode(this.ruleDebug!)));
        }
        send_local_response(<u32>a.replyStatus, "switchyard_rule_local_reply", a.replyBody, headers, GrpcStatusValues.InvalidCode);
        return FilterHeadersStatusValues.StopIteration;
      }
    }
    const rh = v.routeHeaders;
    for (let i = 0; i < rh.length; i++) if (i != written) removeHeader(MAP_REQUEST_HEADERS, unchecked(rh[i]));

    if (ruleStatus != NOT_LINKED) {
      // an active rule's link-status wins over the link service's status for its authorities
      replaceHeader(MAP_REQUEST_HEADERS, v.linkHeader, unchecked(v.statusValues[ruleStatus]));
    } else {
      this.applyLinkStatus(v, route);
    }
    // The debug header is a response header only; a client-sent copy must not reach the upstream.
    removeHeader(MAP_REQUEST_HEADERS, v.debugHeader);

    if (!v.loadAwareEnabled) {
      // An ORIGINAL_DST cluster may route on this header even where load-aware choice is not
      // configured: a client-sent value would let the client pick any ip:port. Always strip it.
      v.stripEndpoints();
      return FilterHeadersStatusValues.Continue;
    }
    return this.chooseInstance(v, route, _endOfStream);
  }

  private applyLinkStatus(v: RequestView, route: i32): void {
    const status = route < 0 ? NOT_LINKED : unchecked(v.linkStatus[route]);
    if (status != NOT_LINKED) {
      // replace, never add: whatever the client sent is overwritten.
      replaceHeader(MAP_REQUEST_HEADERS, v.linkHeader, unchecked(v.statusValues[status]));
      const m = v.metrics;
      if (status == STATUS_DEGRADED) m.decisionDegraded.add(1); else m.decisionNormal.add(1);
      if (unchecked(v.linkFailMode[route])) m.failMode.add(1);
    } else if (v.stripUnmatched) {
      if (peekHeader(MAP_REQUEST_HEADERS, v.linkHeader, PEEK)) {
        PEEK.buf = null;
        removeHeader(MAP_REQUEST_HEADERS, v.linkHeader);
        v.metrics.headerStripped.add(1);
      }
    }
  }

  private chooseInstance(v: RequestView, route: i32, endOfStream: bool): FilterHeadersStatusValues {
    const la = v.loadAware;
    // An unsanitised ORIGINAL_DST header lets a client route anywhere: never pass one through.
    removeHeader(MAP_REQUEST_HEADERS, v.degradedHeader);
    const found: ServicePlan | null = route < 0 ? null : unchecked(v.plans[route]);
    if (found == null) {
      v.stripEndpoints();
      return FilterHeadersStatusValues.Continue;
    }
    const sp = found!;
    if (sp.cfg.gatewaySubset) {
      // the endpoints the gateway allows for this request: read, then removed (ours to honour)
      const sub = getHeader(MAP_REQUEST_HEADERS, v.gatewaySubsetHeader);
      if (sub != null) {
        removeHeader(MAP_REQUEST_HEADERS, v.gatewaySubsetHeader);
        const mask = new StaticArray<u8>(sp.plan.n);
        subsetMask(sp.plan, String.UTF8.decode(sub!), mask);
        this.subset = mask;
      }
    }
    if (sp.req != null && beginHold(this, v, sp, endOfStream)) return FilterHeadersStatusValues.StopIteration;
    if (la.xvm.on && this.subset == null && sp.cfg.picker == PICKER_P2C) la.xvm.readPair(sp.plan, la.rng, v.nowMs, la.inflight);
    const p = pick(sp.plan, la.inflight.total, v.nowMs, sp.cfg.picker, sp.cfg.band, la.rng, sp.inbandOn ? la.inband.adj : null, this.subset);
    return this.applyPick(v, sp, p, "") ? FilterHeadersStatusValues.Continue : FilterHeadersStatusValues.StopIteration;
  }

  /**
   * Writes a choice (or the all-ineligible policy) into the request headers and takes the in-flight
   * hold. Returns false when a local reply was sent. `note` extends the debug header.
   */
  applyPick(v: RequestView, sp: ServicePlan, p: Pick, note: string): bool {
    const la = v.loadAware;
    const plan = sp.plan;
    if (p.index < 0) {
      v.stripEndpoints();
      la.allIneligiblePending++;
      if (sp.cfg.debug) this.debug = "none eligible: " + plan.n.toString() + " instances" + (this.subset != null ? " (endpoint subset)" : "") + note;
      // with an endpoint subset, forwarding degraded would let regular load balancing leave it
      if (sp.cfg.allIneligible == ALL_INELIGIBLE_REJECT || this.subset != null) {
        const headers: Array<HeaderPair> = [new HeaderPair(v.retryAfterName, String.UTF8.encode(sp.cfg.retryAfterS.toString()))];
        if (this.debug != null) headers.push(new HeaderPair(v.debugHeader, String.UTF8.encode(this.debug!)));
        send_local_response(503, "switchyard_all_instances_ineligible", String.UTF8.encode("no eligible instance for " + sp.cfg.service + "\n"),
          headers, GrpcStatusValues.Unavailable);
        return false;
      }
      // Forward on the default route: the route table sends `x-degraded: true` to the regular cluster.
      replaceHeader(MAP_REQUEST_HEADERS, v.degradedHeader, v.trueValue);
      return true;
    }
    let i = p.index;
    let probe = false;
    if (p.probe && sp.inbandOn && sp.prober.due()) {
      // the probe share (docs/inband.md): an idle, priced-out instance gets this request
      const k = probePick(plan, la.inband, sp.prober, la.inflight.total.dataStart, v.nowMs, la.rng);
      if (k >= 0) { i = k; probe = true; la.inbandCounters!.probes++; }
    }
    const slot = unchecked(plan.slot[i]);
    if (sp.cfg.debug) {
      this.debug = "instance=" + unchecked(plan.addr[i]) + " w_ms=" + plan.waitMs(i, unchecked(la.inflight.total[slot])).toString() +
        " rho=" + unchecked(plan.rho[i]).toString() + " eligible=" + p.eligible.toString() + " considered=" + p.considered.toString() + note +
        (sp.inbandOn && slot < la.inband.size() ? " inband=" + la.inband.factorOf(slot).toString() + (probe ? " probe" : "") : "");
    }
    this.writeEndpoint(v, sp, p, i);
    this.sentWith = la.inflight.own(slot); // this proxy's requests: what the in-band pile learns from (not the mesh increase)
    this.held = la.inflight.acquire(slot);
    la.xvm.sent(slot, la.inflight, v.nowMs);
    unchecked(plan.chosen[i]++);
    if (sp.inbandOn && slot < la.inband.size()) {
      this.inbandPlan = sp;
      this.inbandSlot = slot;
      this.inbandGen = getU(la.inflight.gen.dataStart, slot);
      this.startMs = clockMs();
      la.inband.sent(slot, this.startMs, probe ? sp.prober.idleMs : -1);
    }
    return true;
  }

  /**
   * The pick into the endpoint header: a remote pick alone into remoteEndpointHeader when one is
   * configured (ORIGINAL_DST to the peer's gateway), otherwise into endpointHeader followed by the
   * service's fallbacks ("pick,next,...": override_host walks them on retries). The other header
   * is removed, so only the filter's word reaches the router.
   */
  private writeEndpoint(v: RequestView, sp: ServicePlan, p: Pick, i: i32): void {
    const plan = sp.plan;
    // a client copy of the gateway's header, where this service does not write it
    if (v.gatewayDestinationOn && (!sp.cfg.gatewayDestination || unchecked(plan.remote[i]) != 0)) removeHeader(MAP_REQUEST_HEADERS, v.gatewayDestinationHeader);
    if (v.remoteEndpointHeader.byteLength > 0) {
      if (unchecked(plan.remote[i]) != 0) {
        removeHeader(MAP_REQUEST_HEADERS, v.endpointHeader);
        replaceHeader(MAP_REQUEST_HEADERS, v.remoteEndpointHeader, unchecked(plan.addrBytes[i]));
        return;
      }
      removeHeader(MAP_REQUEST_HEADERS, v.remoteEndpointHeader);
    }
    const nf = sp.cfg.fallbacks;
    if (nf <= 0 || plan.n < 2) {
      replaceHeader(MAP_REQUEST_HEADERS, v.endpointHeader, unchecked(plan.addrBytes[i]));
      if (sp.cfg.gatewayDestination) replaceHeader(MAP_REQUEST_HEADERS, v.gatewayDestinationHeader, unchecked(plan.addrBytes[i]));
      return;
    }
    const la = v.loadAware;
    // the O(1) path priced two candidates only: price them all (no skip counted twice)
    if (!p.scored) priceAll(plan, la.inflight.total.dataStart, v.nowMs, sp.inbandOn ? la.inband.adj.dataStart : 0);
    const order = la.fallbackScratch;
    const k = rankFallbacks(plan, i, nf, order);
    let value = unchecked(plan.addr[i]);
    for (let j = 0; j < k; j++) value += "," + unchecked(plan.addr[unchecked(order[j])]);
    const bytes = String.UTF8.encode(value);
    replaceHeader(MAP_REQUEST_HEADERS, v.endpointHeader, bytes);
    // the Inference Extension's endpoint protocol: the same ordered list an EPP would return
    if (sp.cfg.gatewayDestination) replaceHeader(MAP_REQUEST_HEADERS, v.gatewayDestinationHeader, bytes);
  }

  onRequestBody(len: usize, endOfStream: bool): FilterDataStatusValues {
    const h = this.hold;
    const v = this.view;
    if (h == null || v == null || !h.waiting) return FilterDataStatusValues.Continue;
    return bodyChunk(this, v!, h!, len, endOfStream);
  }

  /** A LoRA request was sent to in-flight slot `slot`: it counts as running there once its answer streams. */
  armAdapter(streams: AdapterStreams, hash: u32, slot: i32): void {
    this.adapterStreams = streams;
    this.adapterHash = hash;
    this.adapterSlot = slot;
  }

  onResponseHeaders(_n: u32, endOfStream: bool): FilterHeadersStatusValues {
    const v = this.view;
    if (v == null) return FilterHeadersStatusValues.Continue;
    // an error answer, or one with no body, never ran the adapter there
    if (this.adapterSlot >= 0 && (endOfStream || responseStatus() != 200)) this.adapterSlot = -1;
    // (null tests by address: `!= null` on a string is a call to String.__ne)
    let d = this.debug;
    const rd = this.ruleDebug;
    if (changetype<usize>(rd) != 0) d = changetype<usize>(d) == 0 ? rd : d! + "; " + rd!;
    if (changetype<usize>(d) != 0) replaceHeader(MAP_RESPONSE_HEADERS, v.debugHeader, String.UTF8.encode(d!));
    else removeHeader(MAP_RESPONSE_HEADERS, v.debugHeader);
    const rh = v.routeHeaders;
    for (let i = 0; i < rh.length; i++) removeHeader(MAP_RESPONSE_HEADERS, unchecked(rh[i]));
    removeHeader(MAP_RESPONSE_HEADERS, v.endpointHeader);
    if (v.remoteEndpointHeader.byteLength > 0) removeHeader(MAP_RESPONSE_HEADERS, v.remoteEndpointHeader);
    if (v.gatewayDestinationOn) removeHeader(MAP_RESPONSE_HEADERS, v.gatewayDestinationHeader);
    removeHeader(MAP_RESPONSE_HEADERS, v.degradedHeader);
    removeHeader(MAP_RESPONSE_HEADERS, v.linkHeader);
    const ip = this.inbandPlan;
    if (ip != null && !this.headersSeen) {
      const la = v.loadAware;
      this.headersSeen = true;
      if (this.inbandLive(la)) {
        this.headersMs = clockMs();
        this.status = recordHeaders(la.inband, la.inflight, this.inbandSlot, this.startMs, this.sentWith, this.headersMs, ip.cfg.inband);
      }
      else if (ip.cfg.inband.stripOrca) stripOrcaHeaders();
    }
    return FilterHeadersStatusValues.Continue;
  }

  onResponseBody(len: usize, endOfStream: bool): FilterDataStatusValues {
    // the first byte of a streamed answer is the first token: the adapter runs there now (a body
    // that ends in its first chunk was not streamed and is over)
    if (this.adapterSlot >= 0 && len > 0) {
      if (!endOfStream) this.adapterTicket = this.adapterStreams!.start(this.adapterSlot, this.adapterHash);
      this.adapterSlot = -1;
    }
    return FilterDataStatusValues.Continue;
  }

  /** The slot still names the address this request went to (not freed and reused since). */
  private inbandLive(la: LoadAware): bool {
    const s = this.inbandSlot;
    return s >= 0 && s < la.inflight.gen.length && getU(la.inflight.gen.dataStart, s) == this.inbandGen && la.inband.valid(s, this.inbandGen);
  }

  /** End of stream (or reset): the time to end of stream, or a reset counted as an error. */
  private recordDone(): void {
    const v = this.view;
    if (this.inbandPlan == null || v == null) return;
    const la = v.loadAware;
    if (this.inbandLive(la)) la.inband.done(this.inbandSlot, this.startMs, this.headersMs, clockMs(), this.headersSeen, this.status);
    this.inbandPlan = null;
  }

  private release(): void {
    if (this.adapterTicket != NO_TICKET) {
      this.adapterStreams!.end(this.adapterTicket, this.adapterHash);
      this.adapterTicket = NO_TICKET;
    }
    this.adapterSlot = -1;
    const v = this.view;
    const h = this.hold;
    if (h != null && h.waiting && v != null) { h.waiting = false; v.loadAware.holds.remove(this); }
    if (this.held != NO_HOLD && v != null) {
      v.loadAware.inflight.release(this.held);
      v.loadAware.xvm.ended(this.held, v.loadAware.inflight);
      this.held = NO_HOLD;
    }
  }

  onDone(): bool { this.recordDone(); this.release(); return true; }

  onDelete(): void { this.recordDone(); this.release(); }
}
