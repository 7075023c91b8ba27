// Plugin configuration: the JSON that Istio's WasmPlugin `pluginConfig` (or Envoy's
// `configuration` StringValue) delivers. Parsed once per on_configure; every problem is reported
// with the path of the offending field. The schema lives in filter/config.schema.json.
import { parseJson, JKind, JValue } from "./json";
import { ObjectReader, Problems, isHeaderName, join, reservedHeaderReason, onlyChars } from "./fields";
import { checkPattern, shortNames, AuthorityMatcher } from "./authority";
import { MODEL_CONDITIONAL, MODEL_MG1, PICKER_P2C, PICKER_BAND } from "./choose";
import { RequestConfig, parseRequestConfig, REQUEST_KEYS } from "./request/config";

/** Largest configuration accepted (bytes): parsing runs on Envoy's main thread. */
export const MAX_CONFIG_BYTES: i32 = 1024 * 1024;
/** Most entries in link.services and in loadAware.services. */
export const MAX_SERVICES: i32 = 1000;
/** Most entries in one service's `authorities`. */
export const MAX_AUTHORITIES: i32 = 1000;
const MAX_NAME_LENGTH: i32 = 255;
const MAX_PATH_LENGTH: i32 = 1024;

export const STATUS_NORMAL: i32 = 0;
export const STATUS_DEGRADED: i32 = 1;

export class AgentConfig {
  cluster: string = "";
  authority: string = "switchyard-agent";
  path: string = "/v1/snapshot";
  pollMs: i32 = 50;
  longPollMs: i32 = 500;
  timeoutMs: i32 = 1500;
  /** Where the snapshot writer reports this proxy's in-flight counts (loadAware.meshReportMs, lib/mesh-inflight.ts). */
  inflightPath: string = "/v1/inflight";
}

export class LinkService {
  authorities: Array<string> = [];
  peer: string = "";
}

export class LinkConfig {
  header: string = "x-cross-cloud-status";
  stalenessMs: i32 = 1000;
  failMode: i32 = STATUS_DEGRADED;
  stripUnmatched: bool = true;
  services: Array<LinkService> = [];
}

export const ALL_INELIGIBLE_FORWARD: i32 = 0;
export const ALL_INELIGIBLE_REJECT: i32 = 1;

/** Per load-aware service: in-band learning from this proxy's responses (lib/inband.ts, docs/inband.md). */
export class InbandConfig {
  enabled: bool = true;
  tauMs: i32 = 2000;
  refTauMs: i32 = 15000;
  slowdownThreshold: f64 = 5;
  errorTauMs: i32 = 2000;
  errorWeight: f64 = 10;
  probeShare: f64 = 0.01;
  probeIdleMs: i32 = 1000;
  orca: bool = true;
  stripOrca: bool = true;
  orcaQueueMetric: string = "queue";
  orcaKvCacheMetric: string = "kv_cache_utilization";
}

export class LoadAwareService {
  authorities: Array<string> = [];
  service: string = "";
  maxUtilization: f64 = 0.95;
  stalenessMs: i32 = 5000;
  band: f64 = 0.1;
  /** MODEL_CONDITIONAL or MODEL_MG1 (lib/choose.ts). */
  model: i32 = MODEL_CONDITIONAL;
  /** PICKER_P2C or PICKER_BAND (lib/choose.ts). */
  picker: i32 = PICKER_P2C;
  allIneligible: i32 = ALL_INELIGIBLE_FORWARD;
  retryAfterS: i32 = 1;
  debug: bool = false;
  /**
   * Next-best instances written after the pick in endpointHeader ("pick,next,...", cheapest
   * first: lib/choice/fallbacks.ts), for Envoy's override_host policy to walk on retries. 0: the
   * pick alone (what an ORIGINAL_DST cluster needs: it reads one ip:port).
   */
  fallbacks: i32 = 0;
  /**
   * Gateway API Inference Extension endpoint protocol: also write the pick (with its fallbacks)
   * into x-gateway-destination-endpoint, as an endpoint picker (EPP) does, for a route that
   * delivers it through override_host or ORIGINAL_DST. Client copies are stripped.
   */
  gatewayDestination: bool = false;
  /**
   * Honour x-gateway-destination-endpoint-subset: choose only among the listed endpoints; none of
   * them eligible → 503 (never a pick outside the subset). Only for a hop that sets the header
   * itself and removes client copies (docs/install.md); false: the header is not read.
   */
  gatewaySubset: bool = false;
  /** Request-aware choice (lib/request/config.ts); null: body-blind. */
  request: RequestConfig | null = null;
  inband: InbandConfig = new InbandConfig();
}

export class LoadAwareConfig {
  /** False when the configuration has no `loadAware` section at all. */
  enabled: bool = false;
  endpointHeader: string = "x-switchyard-endpoint";
  /**
   * "" (default): every pick goes into endpointHeader. Set: a pick in another cloud (the
   * instance's peer is set; its address is that cloud's gateway, not an endpoint of the local
   * cluster) goes into this header alone, for an ORIGINAL_DST cluster, and local picks stay in
   * endpointHeader for override_host (mTLS kept). Always stripped from client requests.
   */
  remoteEndpointHeader: string = "";
  degradedHeader: string = "x-degraded";
  debugHeader: string = "x-switchyard-debug";
  /**
   * Mesh-wide in-flight (lib/mesh-inflight.ts): the snapshot writer reports this proxy's in-flight
   * counts per instance to the agent this often (ms) and prices the other proxies' answer; 0: off
   * (each proxy knows its own requests only). 0 or 20..10000.
   */
  meshReportMs: i32 = DEFAULT_MESH_REPORT_MS;
  /**
   * Cross-VM in-flight counts (lib/xvm.ts): each worker VM keeps its in-flight count per instance
   * in a gauge of its own (`switchyard.xvm.inflight.<vm>.<slot>`) and reads the other VMs' for the
   * two p2c candidates before a pick; the in-band error price counts the VMs sending. false: the
   * other VMs' counts as of their last tick (refreshMs), no gauges.
   */
  crossVm: bool = true;
  services: Array<LoadAwareService> = [];
}

/** loadAware.meshReportMs default: about the tick (refreshMs 20), see docs/benchmarks/mesh-inflight.md. */
export const DEFAULT_MESH_REPORT_MS: i32 = 50;

/** Most route headers the filter owns for rule decisions. */
export const MAX_ROUTE_HEADERS: i32 = 8;

export class RulesConfig {
  /** Route headers the filter owns: stripped from every request and response, written only by a rule decision. */
  routeHeaders: Array<string> = ["x-switchyard-route"];
  /** Name the set, rule and version of the applied decision in the debug header (loadAware.debugHeader). */
  debug: bool = false;
}

export class PluginConfig {
  agent: AgentConfig = new AgentConfig();
  rules: RulesConfig = new RulesConfig();
  loadAware: LoadAwareConfig = new LoadAwareConfig();
  refreshMs: i32 = 20;
  leaseMs: i32 = 1000;
  /** How long another VM's section of a shared document counts (and a gauge name stays held): ten ticks, and the writer lease at least. */
  sectionMaxAgeMs(): u64 { return <u64>(this.leaseMs > 10 * this.refreshMs ? this.leaseMs : 10 * this.refreshMs); }
  link: LinkConfig = new LinkConfig();

  /** Matcher from authority to index in loadAware.services. */
  loadAwareMatcher(): AuthorityMatcher {
    return matcherOf<LoadAwareService>(this.loadAware.services);
  }

  /** Matcher from authority to index in link.services. */
  linkMatcher(): AuthorityMatcher {
    return matcherOf<LinkService>(this.link.services);
  }
}

/**
 * Every authority of every service, mapped to the service's index; then the Istio short names
 * derived from cluster-local entries (authority.ts shortNames), which never override a name
 * an operator listed (the first pattern added wins).
 */
function matcherOf<T>(services: Array<T>): AuthorityMatcher {
  const m = new AuthorityMatcher();
  for (let i = 0; i < services.length; i++) {
    const a = services[i].authorities;
    for (let j = 0; j < a.length; j++) m.add(a[j], i);
  }
  for (let i = 0; i < services.length; i++) {
    const a = services[i].authorities;
    for (let j = 0; j < a.length; j++) {
      const derived = shortNames(a[j]);
      for (let k = 0; k < derived.length; k++) m.add(derived[k], i);
    }
  }
  return m;
}

export class ConfigResult {
  config: PluginConfig | null = null;
  error: string = "";
}

const MAX_INT: i32 = 0x7fffffff;

/** `host` or `host:port` (1-5 digits) of letters, digits, '.', '-': no CR/LF, no control characters. */
function isAgentAuthority(s: string): bool {
  if (s.length == 0 || s.length > MAX_NAME_LENGTH) return false;
  const colon = s.indexOf(":");
  const host = colon < 0 ? s : s.substring(0, colon);
  if (host.length == 0 || !onlyChars(host, ".-")) return false;
  if (colon < 0) return true;
  const port = s.substring(colon + 1);
  return port.length >= 1 && port.length <= 5 && isDigits(port);
}

function isDigits(s: string): bool {
  for (let i = 0; i < s.length; i++) { const c = s.charCodeAt(i); if (c < 0x30 || c > 0x39) return false; }
  return true;
}

/** '/' then visible ASCII except '?' and '#' (the query is the filter's): no space, CR/LF or control characters. */
function isAgentPath(s: string): bool {
  if (s.length == 0 || s.length > MAX_PATH_LENGTH || s.charCodeAt(0) != 0x2f) return false;
  for (let i = 1; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c <= 0x20 || c >= 0x7f || c == 0x3f || c == 0x23) return false;
  }
  return true;
}

function parseAgent(r: ObjectReader, c: AgentConfig): void {
  c.cluster = requiredName(r, "cluster");
  if (c.cluster.length > 0 && (c.cluster.length > MAX_NAME_LENGTH || !onlyChars(c.cluster, "_.:|-"))) {
    r.problems.add(join(r.path, "cluster"), "must be 1-255 characters of letters, digits and _ . : | -");
  }
  c.authority = r.str("authority", c.authority);
  if (!isAgentAuthority(c.authority)) {
    r.problems.add(join(r.path, "authority"), "must be host or host:port (letters, digits, '.', '-'; at most 255 characters; no control characters)");
  }
  c.path = r.str("path", c.path);
  if (!isAgentPath(c.path)) {
    r.problems.add(join(r.path, "path"), "must start with '/', carry no query or fragment, and hold only visible ASCII (no space, CR/LF or control characters; at most 1024)");
  }
  c.inflightPath = r.str("inflightPath", c.inflightPath);
  if (!isAgentPath(c.inflightPath)) {
    r.problems.add(join(r.path, "inflightPath"), "must start with '/', carry no query or fragment, and hold only visible ASCII (no space, CR/LF or control characters; at most 1024)");
  }
  c.pollMs = r.int("pollMs", c.pollMs, 10, 60000);
  c.longPollMs = r.int("longPollMs", c.longPollMs, 0, 30000);
  c.timeoutMs = r.int("timeoutMs", c.longPollMs + 1000, 10, 60000);
  if (r.problems.ok && c.timeoutMs <= c.longPollMs) {
    r.problems.add(join(r.path, "timeoutMs"), "must be greater than agent.longPollMs (" + c.longPollMs.toString() + ")");
  }
}

function parseStrings(items: Array<JValue>, path: string, p: Problems): Array<string> {
  const out = new Array<string>();
  for (let i = 0; i < items.length; i++) {
    const at = path + "[" + i.toString() + "]";
    if (items[i].kind != JKind.Str) { p.add(at, "must be string, got " + items[i].kindName()); continue; }
    const s = items[i].s;
    const why = checkPattern(s);
    if (why.length > 0) { p.add(at, why); continue; }
    out.push(s);
  }
  return out;
}

/** The required, non-empty `authorities` list of a service entry. */
function readAuthorities(sr: ObjectReader): Array<string> {
  const auths = sr.arr("authorities", true);
  if (auths == null) return [];
  if (auths.length == 0) sr.problems.add(join(sr.path, "authorities"), "must not be empty");
  if (auths.length > MAX_AUTHORITIES) {
    sr.problems.add(join(sr.path, "authorities"), "at most " + MAX_AUTHORITIES.toString() + " entries, got " + auths.length.toString());
    return [];
  }
  return parseStrings(auths, join(sr.path, "authorities"), sr.problems);
}

/** A required string field that must not be empty. */
function requiredName(r: ObjectReader, key: string): string {
  const s = r.str(key, "", true);
  if (r.has(key) && s.length == 0) r.problems.add(join(r.path, key), "must not be empty");
  return s;
}

/** A service list of at most MAX_SERVICES entries (null when absent, empty when too long). */
function readServices(r: ObjectReader): Array<JValue> | null {
  const services = r.arr("services", true);
  if (services != null && services.length > MAX_SERVICES) {
    r.problems.add(join(r.path, "services"), "at most " + MAX_SERVICES.toString() + " entries, got " + services.length.toString());
    return [];
  }
  return services;
}

/** Peer names as the agent writes them (agent link.peers[].name). */
function isPeerName(s: string): bool {
  if (s.length == 0 || s.length > 63) return false;
  const c = s.charCodeAt(0);
  if (c == 0x2e || c == 0x5f || c == 0x2d) return false;
  return onlyChars(s, "._-");
}

function parseLink(r: ObjectReader, c: LinkConfig): void {
  c.header = parseHeaderField(r, "header", c.header);
  c.stalenessMs = r.int("stalenessMs", c.stalenessMs, 1, 3600000);
  const fm = r.oneOf("failMode", "degraded", ["degraded", "normal"]);
  c.failMode = fm == "normal" ? STATUS_NORMAL : STATUS_DEGRADED;
  c.stripUnmatched = r.bool("stripUnmatched", c.stripUnmatched);
  const services = readServices(r);
  if (services == null) return;
  const spath = join(r.path, "services");
  for (let i = 0; i < services.length; i++) {
    const at = spath + "[" + i.toString() + "]";
    const sv = services[i];
    if (sv.kind != JKind.Obj) { r.problems.add(at, "must be object, got " + sv.kindName()); continue; }
    const sr = new ObjectReader(sv, at, r.problems, ["authorities", "peer"]);
    const svc = new LinkService();
    svc.authorities = readAuthorities(sr);
    svc.peer = requiredName(sr, "peer");
    if (svc.peer.length > 0 && !isPeerName(svc.peer)) {
      sr.problems.add(join(sr.path, "peer"), "must be 1-63 letters, digits, '.', '_', '-', starting with a letter or digit");
    }
    c.services.push(svc);
  }
}

function parseHeaderField(r: ObjectReader, key: string, def: string): string {
  const h = r.str(key, def);
  if (!isHeaderName(h)) { r.problems.add(join(r.path, key), "must be a lowercase header name"); return h; }
  const why = reservedHeaderReason(h);
  if (why.length > 0) r.problems.add(join(r.path, key), why);
  return h;
}

function parseRules(r: ObjectReader, c: RulesConfig): void {
  c.debug = r.bool("debug", c.debug);
  const items = r.arr("routeHeaders");
  if (items == null) return;
  const path = join(r.path, "routeHeaders");
  if (items.length == 0 || items.length > MAX_ROUTE_HEADERS) {
    r.problems.add(path, "must hold 1.." + MAX_ROUTE_HEADERS.toString() + " header names, got " + items.length.toString());
    return;
  }
  const out = new Array<string>();
  for (let i = 0; i < items.length; i++) {
    const at = path + "[" + i.toString() + "]";
    if (items[i].kind != JKind.Str) { r.problems.add(at, "must be string, got " + items[i].kindName()); continue; }
    const h = items[i].s;
    if (!isHeaderName(h)) { r.problems.add(at, "must be a lowercase header name"); continue; }
    const why = reservedHeaderReason(h);
    if (why.length > 0) { r.problems.add(at, why); continue; }
    if (out.includes(h)) { r.problems.add(at, "duplicate \"" + h + "\""); continue; }
    out.push(h);
  }
  c.routeHeaders = out;
}

function parseLoadAware(r: ObjectReader, c: LoadAwareConfig): void {
  c.enabled = true;
  c.endpointHeader = parseHeaderField(r, "endpointHeader", c.endpointHeader);
  if (r.has("remoteEndpointHeader")) c.remoteEndpointHeader = parseHeaderField(r, "remoteEndpointHeader", c.remoteEndpointHeader);
  c.degradedHeader = parseHeaderField(r, "degradedHeader", c.degradedHeader);
  c.debugHeader = parseHeaderField(r, "debugHeader", c.debugHeader);
  c.meshReportMs = r.int("meshReportMs", c.meshReportMs, 0, 10000);
  if (c.meshReportMs > 0 && c.meshReportMs < 20) r.problems.add(join(r.path, "meshReportMs"), "must be 0 (off) or 20..10000");
  c.crossVm = r.bool("crossVm", c.crossVm);
  const services = readServices(r);
  if (services == null) return;
  const spath = join(r.path, "services");
  for (let i = 0; i < services.length; i++) {
    const at = spath + "[" + i.toString() + "]";
    const sv = services[i];
    if (sv.kind != JKind.Obj) { r.problems.add(at, "must be object, got " + sv.kindName()); continue; }
    const sr = new ObjectReader(sv, at, r.problems,
      ["authorities", "service", "maxUtilization", "stalenessMs", "model", "picker", "band", "allIneligible", "retryAfterS", "debug", "fallbacks", "gatewayDestination", "gatewaySubset", "request", "inband"]);
    const svc = new LoadAwareService();
    svc.authorities = readAuthorities(sr);
    svc.service = requiredName(sr, "service");
    svc.maxUtilization = sr.num("maxUtilization", svc.maxUtilization, 0.01, 1.0);
    svc.stalenessMs = sr.int("stalenessMs", svc.stalenessMs, 1, 3600000);
    svc.model = sr.oneOf("model", "conditional", ["conditional", "mg1"]) == "mg1" ? MODEL_MG1 : MODEL_CONDITIONAL;
    svc.picker = sr.oneOf("picker", "p2c", ["p2c", "band"]) == "band" ? PICKER_BAND : PICKER_P2C;
    svc.band = sr.num("band", svc.band, 0, 10);
    const policy = sr.oneOf("allIneligible", "forward-degraded", ["forward-degraded", "reject-503"]);
    svc.allIneligible = policy == "reject-503" ? ALL_INELIGIBLE_REJECT : ALL_INELIGIBLE_FORWARD;
    svc.retryAfterS = sr.int("retryAfterS", svc.retryAfterS, 0, 3600);
    svc.debug = sr.bool("debug", svc.debug);
    svc.fallbacks = sr.int("fallbacks", svc.fallbacks, 0, 8); // 8 = MAX_FALLBACKS (a spec checks)
    svc.gatewayDestination = sr.bool("gatewayDestination", svc.gatewayDestination);
    svc.gatewaySubset = sr.bool("gatewaySubset", svc.gatewaySubset);
    const rq = sr.obj("request", REQUEST_KEYS);
    if (rq != null) svc.request = parseRequestConfig(rq);
    const ir = sr.obj("inband", ["enabled", "tauMs", "refTauMs", "slowdownThreshold", "errorTauMs", "errorWeight", "probeShare", "probeIdleMs",
      "orca", "stripOrca", "orcaQueueMetric", "orcaKvCacheMetric"]);
    if (ir != null) parseInband(ir, svc.inband);
    c.services.push(svc);
  }
}

function parseInband(ir: ObjectReader, ib: InbandConfig): void {
  ib.enabled = ir.bool("enabled", ib.enabled);
  ib.tauMs = ir.int("tauMs", ib.tauMs, 10, 600000);
  ib.refTauMs = ir.int("refTauMs", ib.refTauMs, 100, 3600000);
  ib.slowdownThreshold = ir.num("slowdownThreshold", ib.slowdownThreshold, 1, 100);
  ib.errorTauMs = ir.int("errorTauMs", ib.errorTauMs, 10, 600000);
  ib.errorWeight = ir.num("errorWeight", ib.errorWeight, 0, 1000);
  ib.probeShare = ir.num("probeShare", ib.probeShare, 0, 0.01);
  ib.probeIdleMs = ir.int("probeIdleMs", ib.probeIdleMs, 1, 600000);
  ib.orca = ir.bool("orca", ib.orca);
  ib.stripOrca = ir.bool("stripOrca", ib.stripOrca);
  ib.orcaQueueMetric = ir.str("orcaQueueMetric", ib.orcaQueueMetric);
  ib.orcaKvCacheMetric = ir.str("orcaKvCacheMetric", ib.orcaKvCacheMetric);
  if (ib.orcaQueueMetric.length == 0 || ib.orcaQueueMetric.length > 200) ir.problems.add(join(ir.path, "orcaQueueMetric"), "must be 1-200 characters");
  if (ib.orcaKvCacheMetric.length == 0 || ib.orcaKvCacheMetric.length > 200) ir.problems.add(join(ir.path, "orcaKvCacheMetric"), "must be 1-200 characters");
}

/**
 * Every header the filter owns (writes, or strips as its own) is named by one field: no two fields
 * may name the same header (issue 24 #5: request.criticalityHeader set to link.header stripped the
 * filter's own link status, so that service never crossed). The criticality header of several
 * services may be the same name: it is one purpose. Defaults apply without a loadAware or rules
 * section (the filter strips those names regardless). The refusal names the later field.
 */
function checkOwnedHeaders(c: PluginConfig, p: Problems): void {
  const names = [c.link.header, c.loadAware.endpointHeader, c.loadAware.degradedHeader, c.loadAware.debugHeader];
  const keys = ["link.header", "loadAware.endpointHeader", "loadAware.degradedHeader", "loadAware.debugHeader"];
  if (c.loadAware.remoteEndpointHeader.length > 0) {
    names.push(c.loadAware.remoteEndpointHeader);
    keys.push("loadAware.remoteEndpointHeader");
  }
  for (let k = 0; k < c.rules.routeHeaders.length; k++) {
    names.push(c.rules.routeHeaders[k]);
    keys.push("rules.routeHeaders[" + k.toString() + "]");
  }
  const fixed = names.length;
  for (let i = 0; i < c.loadAware.services.length; i++) {
    const rq = c.loadAware.services[i].request;
    if (rq == null) continue;
    names.push(rq.criticalityHeader);
    keys.push("loadAware.services[" + i.toString() + "].request.criticalityHeader");
  }
  // Linear: the first field to name each header, by name.
  const first = new Map<string, i32>();
  for (let j = 0; j < names.length; j++) {
    if (!first.has(names[j])) { first.set(names[j], j); continue; }
    const i = first.get(names[j]);
    if (i >= fixed && j >= fixed) continue; // criticality headers of two services
    p.add(keys[j], "must differ from " + keys[i] + " (" + names[j] + ")");
    return;
  }
}

export function parseConfig(text: string): ConfigResult {
  const res = new ConfigResult();
  if (text.length == 0) { res.error = "configuration: empty (a JSON object is required)"; return res; }
  if (text.length > MAX_CONFIG_BYTES) {
    res.error = "configuration: larger than " + MAX_CONFIG_BYTES.toString() + " bytes";
    return res;
  }
  const parsed = parseJson(text);
  if (parsed.value == null) { res.error = "configuration: invalid JSON: " + parsed.error; return res; }
  const root = parsed.value!;
  if (root.kind != JKind.Obj) { res.error = "configuration: must be a JSON object, got " + root.kindName(); return res; }
  const p = new Problems();
  const r = new ObjectReader(root, "", p, ["agent", "refreshMs", "leaseMs", "link", "loadAware", "rules"]);
  const c = new PluginConfig();
  const agent = r.obj("agent", ["cluster", "authority", "path", "inflightPath", "pollMs", "longPollMs", "timeoutMs"], true);
  if (agent != null) parseAgent(agent, c.agent);
  c.refreshMs = r.int("refreshMs", c.refreshMs, 1, 10000);
  c.leaseMs = r.int("leaseMs", c.leaseMs, 100, 600000);
  if (p.ok && c.leaseMs <= c.refreshMs) p.add("leaseMs", "must be greater than refreshMs (" + c.refreshMs.toString() + ")");
  const link = r.obj("link", ["header", "stalenessMs", "failMode", "stripUnmatched", "services"], true);
  if (link != null) parseLink(link, c.link);
  const la = r.obj("loadAware", ["endpointHeader", "remoteEndpointHeader", "degradedHeader", "debugHeader", "meshReportMs", "crossVm", "services"]);
  if (la != null) parseLoadAware(la, c.loadAware);
  const rules = r.obj("rules", ["routeHeaders", "debug"]);
  if (rules != null) parseRules(rules, c.rules);
  if (p.ok) checkOwnedHeaders(c, p);
  if (!p.ok) { res.error = p.first; return res; }
  res.config = c;
  return res;
}
