// Request-aware choice glue (services with a `request` block): on request headers the stream is
// held (StopIteration) and registered; the body is buffered (StopIterationAndBuffer) up to
// request.maxBodyBytes; when it is complete it is parsed (lib/request/openai.ts), the model routed
// (aliases, splits), the prompt hashed in blocks and looked up in the prefix index, the criticality
// resolved, and the choice made (lib/choose-request.ts); the endpoint header is set and the stream
// continued (Envoy >= 1.35 with allow_on_headers_stop_iteration routes on the mutated headers).
// An invalid body gets the configured behaviour: the body-blind choice, or a local 400 (413 when
// too large). With Envoy's default a held stream sees no body callback at all: the tick's watchdog
// gives such a stream the body-blind choice after request.holdTimeoutMs and continues it, so a
// misconfigured Envoy costs latency, never a hang (counted: switchyard.request.hold_timeout.*).
import {
  FilterDataStatusValues, send_local_response, HeaderPair, GrpcStatusValues, continue_request, proxy_set_effective_context,
} from "@solo-io/proxy-runtime/assembly";
import { getHeader, removeHeader, replaceHeader, readBuffer, setBuffer, MAP_REQUEST_HEADERS } from "../abi/host";
import { withModel, withPriority } from "../lib/request/rewrite";
import { ReqError, OpenAiRequest, promptTokenEstimate, outTokenEstimate } from "../lib/request/openai";
import { apiOfPath } from "../lib/request/endpoint";
import { hashPromptBlocks, modelSeed } from "../lib/request/prefix";
import { ON_INVALID_REJECT } from "../lib/request/config";
import { routeModel, basisPointsOf } from "../lib/request/model-route";
import { resolveCriticality, CRIT_SHEDDABLE, CRITICALITY_NAMES } from "../lib/criticality";
import { pickForRequest } from "../lib/choose-request";
import { pick } from "../lib/choose";
import { ServicePlan } from "./loadaware";
import { RequestView } from "./view";
import {
  RequestPlan, RC_PARSED, RC_INVALID, RC_REJECTED, RC_SHED_SHEDDABLE, RC_SHED_STANDARD, RC_SHED_OVERLOADED, RC_HOLD_TIMEOUT, RC_PREFIX_HIT, RC_UNKNOWN_MODEL,
} from "./request-plan";
import { SwitchyardStream } from "./stream";

const PATH_KEY = String.UTF8.encode(":path");
const REQUEST_ID_KEY = String.UTF8.encode("x-request-id");
const CONTENT_LENGTH_KEY = String.UTF8.encode("content-length");
const BUFFER_HTTP_REQUEST_BODY: u32 = 0;

export class BodyHold {
  waiting: bool = true;
  deadlineMs: f64 = 0;
  requestId: ArrayBuffer | null = null;
  criticality: string | null = null;
  /** The criticality of the request's objective (request.objectives via objectiveHeader), -1: none. */
  objectiveCrit: i32 = -1;
  constructor(public sp: ServicePlan, public req: RequestPlan, public api: u8) {}
}

/** The held streams, for the watchdog (bounded by the streams Envoy has open). */
export class Holds {
  list: Array<SwitchyardStream> = [];
  add(s: SwitchyardStream): void { this.list.push(s); }
  remove(s: SwitchyardStream): void {
    const i = this.list.indexOf(s);
    if (i < 0) return;
    const last = this.list.length - 1;
    if (i != last) this.list[i] = this.list[last];
    this.list.length = last;
  }
  /** Releases every stream held past its deadline with the body-blind choice. */
  expire(nowMs: f64): void {
    for (let i = this.list.length - 1; i >= 0; i--) {
      if (i >= this.list.length) continue;
      const s = this.list[i];
      const h = s.hold;
      if (h == null || nowMs < h.deadlineMs) continue;
      this.remove(s);
      proxy_set_effective_context(s.context_id);
      holdExpired(s, h!);
    }
  }
}

/**
 * On request headers of a request-aware service: holds the stream when its path is an inference
 * endpoint (returns true: the caller returns StopIteration; a local reply may have been sent).
 * Returns false for the body-blind choice.
 */
export function beginHold(s: SwitchyardStream, v: RequestView, sp: ServicePlan, endOfStream: bool): bool {
  const req = sp.req!;
  const cfg = req.cfg;
  const critName = req.critHeader;
  const crit = getHeader(MAP_REQUEST_HEADERS, critName);
  // the filter's header: trusted callers set it, nobody upstream reads it
  if (crit != null) removeHeader(MAP_REQUEST_HEADERS, critName);
  const path = getHeader(MAP_REQUEST_HEADERS, PATH_KEY);
  const api = path == null ? <u8>0 : apiOfPath(String.UTF8.decode(path!));
  if (api == 0) return false;
  if (endOfStream) {
    // an inference call without a body
    req.count(RC_INVALID);
    if (cfg.onInvalid != ON_INVALID_REJECT) return false;
    req.count(RC_REJECTED);
    send_local_response(400, "switchyard_invalid_request_body", String.UTF8.encode("request body is empty\n"), [], GrpcStatusValues.InvalidArgument);
    return true;
  }
  const h = new BodyHold(sp, req, api);
  h.deadlineMs = v.nowMs + <f64>cfg.holdTimeoutMs;
  h.requestId = getHeader(MAP_REQUEST_HEADERS, REQUEST_ID_KEY);
  h.criticality = crit == null ? null : String.UTF8.decode(crit!);
  if (cfg.objectives.size > 0) {
    // the objective header stays: the gateway and its metrics read it too
    const ob = getHeader(MAP_REQUEST_HEADERS, req.objectiveHeader);
    if (ob != null) {
      const name = String.UTF8.decode(ob!);
      if (cfg.objectives.has(name)) h.objectiveCrit = cfg.objectives.get(name);
    }
  }
  s.hold = h;
  v.loadAware.holds.add(s);
  return true;
}

function release(s: SwitchyardStream, v: RequestView, h: BodyHold): void {
  h.waiting = false;
  v.loadAware.holds.remove(s);
}

/** A request body chunk of a held stream. */
export function bodyChunk(s: SwitchyardStream, v: RequestView, h: BodyHold, len: usize, eos: bool): FilterDataStatusValues {
  const req = h.req;
  const cfg = req.cfg;
  if (len > <usize>cfg.maxBodyBytes) {
    release(s, v, h);
    return invalid(s, v, h, 413, "request body larger than " + cfg.maxBodyBytes.toString() + " bytes (request.maxBodyBytes)");
  }
  if (!eos) {
    // the watchdog is for a body that never comes, not for a slow upload
    h.deadlineMs = v.nowMs + <f64>cfg.holdTimeoutMs;
    return FilterDataStatusValues.StopIterationAndBuffer;
  }
  release(s, v, h);
  const body = readBuffer(BUFFER_HTTP_REQUEST_BODY, <u32>len);
  if (body == null) return invalid(s, v, h, 400, "request body unreadable");
  const parsed = req.parser.parse(body!, h.api);
  if (parsed.error != ReqError.None) return invalid(s, v, h, parsed.error == ReqError.TooLarge ? 413 : 400, parsed.message());
  return chooseWithBody(s, v, h, body!, parsed);
}

function chooseWithBody(s: SwitchyardStream, v: RequestView, h: BodyHold, body: ArrayBuffer, r: OpenAiRequest): FilterDataStatusValues {
  const req = h.req;
  const cfg = req.cfg;
  const sp = h.sp;
  const plan = sp.plan;
  const la = v.loadAware;
  req.count(RC_PARSED);
  const rule = cfg.rule(r.model);
  const rid = h.requestId;
  const bp = rid != null ? basisPointsOf(rid!) : <i32>(la.rng.next() * 10000) % 10000;
  const target = routeModel(rule, r.model, bp);
  const lp = req.lp;
  const col = lp.modelColumn(target);
  if (lp.hasData && col < 0) {
    req.count(RC_UNKNOWN_MODEL);
    return invalid(s, v, h, 400, "model \"" + target + "\" is not served by " + sp.cfg.service);
  }
  const crit = resolveCriticality(h.criticality, rule == null ? -1 : rule!.criticality, cfg.defaultCriticality, h.objectiveCrit);
  const rc = req.rc;
  rc.mesh = la.inflight; // the other proxies' recent sends (mesh in-flight; unknown: none)
  rc.modelCol = col;
  rc.promptTokens = promptTokenEstimate(r, cfg.bytesPerToken);
  rc.outTokens = outTokenEstimate(r, cfg.defaultMaxTokens);
  const now = <u64>v.nowMs;
  const nh = hashPromptBlocks(body, r.spans, modelSeed(target), cfg.prefixBlockBytes, cfg.prefixMaxBlocks, req.hashes);
  const n = plan.n;
  for (let i = 0; i < n; i++) unchecked(rc.cachedBlocks[i] = 0);
  req.index.lookup(req.hashes, nh, now, req.match);
  rc.hashes = req.hashes;
  rc.nh = nh;
  const m = req.match;
  for (let k = 0; k < m.slots.length; k++) {
    const slot = unchecked(m.slots[k]);
    for (let i = 0; i < n; i++) if (unchecked(plan.slot[i]) == slot) unchecked(rc.cachedBlocks[i] = unchecked(m.blocks[k]));
  }
  const out = pickForRequest(plan, lp, la.inflight.total, la.pending, v.nowMs, cfg.picker, sp.cfg.band, la.rng, rc, req.cp, crit, req.out, s.subset);
  if (out.shed) {
    req.count(crit == CRIT_SHEDDABLE ? RC_SHED_SHEDDABLE : RC_SHED_STANDARD);
    if (out.overloaded) req.count(RC_SHED_OVERLOADED);
    const headers: Array<HeaderPair> = [new HeaderPair(v.retryAfterName, String.UTF8.encode(sp.cfg.retryAfterS.toString()))];
    send_local_response(429, "switchyard_shed_" + CRITICALITY_NAMES[crit],
      String.UTF8.encode(sp.cfg.service + " is saturated: " + CRITICALITY_NAMES[crit] + " request shed\n"), headers, GrpcStatusValues.ResourceExhausted);
    return FilterDataStatusValues.StopIterationNoBuffer;
  }
  const p = out.pick;
  let note = "";
  if (p.index >= 0) {
    const slot = unchecked(plan.slot[p.index]);
    const cached = unchecked(rc.cachedBlocks[p.index]);
    if (cached > 0) req.count(RC_PREFIX_HIT);
    req.index.record(req.hashes, nh, <u16>slot, now);
    if (lp.hasData) req.adapters.sent(lp, col, p.index, slot, v.nowMs);
    if (sp.cfg.debug) {
      note = " model=" + target + " crit=" + CRITICALITY_NAMES[crit] + " prompt_tokens=" + (<i32>rc.promptTokens).toString() +
        " cached_blocks=" + cached.toString() + " cost_ms=" + unchecked(plan.cost[p.index]).toString();
    }
  }
  const sent = s.applyPick(v, sp, p, note);
  if (sent && p.index >= 0 && lp.hasData && col >= 0 && !unchecked(lp.isBase[col])) {
    s.armAdapter(req.rc.streams, unchecked(lp.hashes[col]), unchecked(plan.slot[p.index]));
  }
  // also without a pick (forwarded degraded): the default route serves the routed model, and an
  // alias may be a name no server knows
  if (sent) {
    const renamed = target != r.model && r.modelStart >= 0;
    if (renamed || cfg.priorityOn) rewriteBody(body, r, renamed ? target : null, cfg.priorityOn, unchecked(cfg.priorities[crit]));
  }
  return sent ? FilterDataStatusValues.Continue : FilterDataStatusValues.StopIterationNoBuffer;
}

/**
 * Routed as another model (alias, split): the upstream is asked for that model. With
 * request.priority, the criticality's vLLM priority is set. content-length follows.
 */
function rewriteBody(body: ArrayBuffer, r: OpenAiRequest, target: string | null, withPrio: bool, priority: i32): void {
  let nb = target != null ? withModel(body, r.modelStart, r.modelEnd, target!) : body;
  if (withPrio) {
    const pb = withPriority(nb, priority);
    if (pb != null) nb = pb!;
  }
  setBuffer(BUFFER_HTTP_REQUEST_BODY, 0, <u32>body.byteLength, nb);
  if (getHeader(MAP_REQUEST_HEADERS, CONTENT_LENGTH_KEY) != null) {
    replaceHeader(MAP_REQUEST_HEADERS, CONTENT_LENGTH_KEY, String.UTF8.encode(nb.byteLength.toString()));
  }
}

/** An invalid body: the body-blind choice (fallback) or a local reply with the reason. */
function invalid(s: SwitchyardStream, v: RequestView, h: BodyHold, status: u32, why: string): FilterDataStatusValues {
  const req = h.req;
  req.count(RC_INVALID);
  if (req.cfg.onInvalid == ON_INVALID_REJECT) {
    req.count(RC_REJECTED);
    send_local_response(status, "switchyard_invalid_request_body", String.UTF8.encode(why + "\n"), [], GrpcStatusValues.InvalidArgument);
    return FilterDataStatusValues.StopIterationNoBuffer;
  }
  return bodyBlind(s, v, h.sp, " fallback=\"" + why + "\"") ? FilterDataStatusValues.Continue : FilterDataStatusValues.StopIterationNoBuffer;
}

function bodyBlind(s: SwitchyardStream, v: RequestView, sp: ServicePlan, note: string): bool {
  const la = v.loadAware;
  const p = pick(sp.plan, la.inflight.total, v.nowMs, sp.cfg.picker, sp.cfg.band, la.rng, sp.inbandOn ? la.inband.adj : null, s.subset);
  return s.applyPick(v, sp, p, sp.cfg.debug ? note : "");
}

/** Watchdog: no body callback in time (Envoy's default holds the body until we continue). */
function holdExpired(s: SwitchyardStream, h: BodyHold): void {
  const v = s.requestView();
  if (v == null) return;
  h.waiting = false;
  h.req.count(RC_HOLD_TIMEOUT);
  if (bodyBlind(s, v!, h.sp, " fallback=\"no request body callback within request.holdTimeoutMs\"")) continue_request();
}
