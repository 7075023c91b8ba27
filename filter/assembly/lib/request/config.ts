// The `request` block of a load-aware service (request-aware choice, docs/contracts.md): how the
// body is read, what an invalid body gets, the cost model's fallbacks, the prefix index bounds,
// model aliases and splits, and criticality. Parsed with the rest of the plugin configuration;
// every problem names its field.
import { JKind, JValue } from "../json";
import { ObjectReader, Problems, join, isHeaderName, reservedHeaderReason } from "../fields";
import { CRIT_STANDARD, criticalityOf, criticalityOfPriority, CRITICALITY_NAMES } from "../criticality";
import { PICKER_BAND, PICKER_P2C } from "../choose";

export const ON_INVALID_FALLBACK: i32 = 0;
export const ON_INVALID_REJECT: i32 = 1;
/** Most entries in `models` and in one model's `split`. */
export const MAX_MODELS: i32 = 1000;
export const MAX_SPLITS: i32 = 16;

export class ModelSplit {
  to: string = "";
  /** Share of the requests for the model sent to `to`, in basis points (1/100 %). */
  basisPoints: i32 = 0;
}

export class ModelRule {
  name: string = "";
  /** Another model name this one is served as ("" = none). */
  aliasOf: string = "";
  /** CRIT_* or -1 = the service default. */
  criticality: i32 = -1;
  split: Array<ModelSplit> = [];
}

export class RequestConfig {
  /** Envoy >= 1.35 with PluginConfig allow_on_headers_stop_iteration: true (required to be stated). */
  allowOnHeadersStopIteration: bool = false;
  /**
   * Half of Envoy's default per_connection_buffer_limit_bytes (1 MiB): the buffered body reaches
   * this with room for the chunk that crosses it, so the filter (request.onInvalid), not Envoy's
   * 413, decides on an oversized body that arrives in several chunks (the listener's limit must
   * stay >= maxBodyBytes + the largest read; docs/operations.md).
   */
  maxBodyBytes: i32 = 524288;
  onInvalid: i32 = ON_INVALID_FALLBACK;
  /** A held request that saw no body callback for this long gets the body-blind choice (no hang). */
  holdTimeoutMs: i32 = 1000;
  /** Prompt bytes per token, for the token estimate of a prompt. */
  bytesPerToken: f64 = 4;
  /** Output tokens assumed when a request states no max_tokens. */
  defaultMaxTokens: i32 = 256;
  /** Prefill ms per token assumed for an instance whose snapshot has none. */
  fallbackPrefillMsPerToken: f64 = 0.1;
  /** Extra cost (ms) of an instance that must first load the requested LoRA adapter. */
  adapterLoadMs: f64 = 200;
  /** KV-cache use at which a cached prefix is assumed evicted (its saving counts 0) and the instance full. */
  kvCacheFull: f64 = 0.95;
  /**
   * Share of the learned decode time per token a request still pays in an idle batch (the step's
   * fixed cost); the rest grows with the occupancy of the batch it joins (score-request.ts).
   */
  decodeIdleShare: f64 = 0;
  prefixBlockBytes: i32 = 64;
  prefixMaxBlocks: i32 = 256;
  /** The index's entries while the fleet's KV capacity is unknown (an instance without it in the snapshot). */
  prefixEntries: i32 = 32768;
  /**
   * Memory bound of the index: once every instance's KV capacity is known, the index holds twice
   * as many entries as the fleet's KV caches hold index blocks (prefix.ts indexEntriesFor), at most
   * this many (16 B each: 262,144 = 4 MiB per worker VM).
   */
  prefixMaxEntries: i32 = 262144;
  prefixMaxAgeMs: i32 = 600000;
  criticalityHeader: string = "x-switchyard-criticality";
  defaultCriticality: i32 = CRIT_STANDARD;
  /** Header naming the request's Inference Extension objective (InferenceObjective), looked up in `objectives`. */
  objectiveHeader: string = "x-gateway-inference-objective";
  /** objective name → criticality of its priority (criticalityOfPriority: negative = sheddable). */
  objectives: Map<string, i32> = new Map();
  /** Pool pressure (least loaded eligible instance's backlog per slot) at which sheddable requests get a 429. */
  shedSheddableAt: f64 = 1;
  /** ... and standard ones. Critical requests are never shed. */
  shedStandardAt: f64 = 2;
  /**
   * Where the agent publishes the instance's KV capacity (kvSeqs), the pressure is the backlog as a
   * share of it instead, and these thresholds apply (docs/architecture-choice.md, "Shedding").
   */
  shedKvSheddableAt: f64 = 0.6;
  shedKvStandardAt: f64 = 0.7;
  /** The pool's backlog over its summed KV capacity at which sheddable / standard requests are shed wherever they go, while the pool is overloaded (1000: in effect never). */
  shedPoolSheddableAt: f64 = 0.15;
  shedPoolStandardAt: f64 = 0.2;
  /** The share of a pool's non-critical requests shed lately from which the pool thresholds apply. */
  shedOverloadShare: f64 = 0.3;
  models: Array<ModelRule> = [];
  /**
   * Picker of the request-aware choice (PICKER_*; the service's loadAware `picker` is for its
   * body-blind choice). Default band: every model-eligible candidate is priced for the request
   * anyway, and a draw of two misses the cheap one (docs/architecture-choice.md, "Picker").
   */
  picker: i32 = PICKER_BAND;
  /** request.priority set: the vLLM `priority` written into the body per criticality (CRIT_* index). */
  priorityOn: bool = false;
  priorities: StaticArray<i32> = new StaticArray<i32>(3);

  rule(model: string): ModelRule | null {
    for (let i = 0; i < this.models.length; i++) if (this.models[i].name == model) return this.models[i];
    return null;
  }
}

export const REQUEST_KEYS: Array<string> = ["api", "allowOnHeadersStopIteration", "maxBodyBytes", "onInvalid", "holdTimeoutMs",
  "bytesPerToken", "defaultMaxTokens", "fallbackPrefillMsPerToken", "adapterLoadMs", "kvCacheFull", "decodeIdleShare", "prefix", "criticalityHeader", "objectiveHeader", "objectives",
  "criticality", "shedding", "models", "priority", "picker"];

function modelName(r: ObjectReader, key: string, required: bool): string {
  const s = r.str(key, "", required);
  if (r.has(key) && (s.length == 0 || s.length > 256)) r.problems.add(join(r.path, key), "must be 1-256 characters");
  return s;
}

export function parseRequestConfig(r: ObjectReader): RequestConfig {
  const c = new RequestConfig();
  const p = r.problems;
  r.oneOf("api", "openai", ["openai"]);
  c.allowOnHeadersStopIteration = r.bool("allowOnHeadersStopIteration", false);
  if (p.ok && !c.allowOnHeadersStopIteration) {
    p.add(join(r.path, "allowOnHeadersStopIteration"), "must be true: reading the body before choosing holds the request headers, " +
      "which Envoy allows only from 1.35 with the Wasm PluginConfig allow_on_headers_stop_iteration: true (set it there, then here)");
  }
  c.maxBodyBytes = r.int("maxBodyBytes", c.maxBodyBytes, 1, 16777216);
  c.onInvalid = r.oneOf("onInvalid", "fallback", ["fallback", "reject-400"]) == "reject-400" ? ON_INVALID_REJECT : ON_INVALID_FALLBACK;
  c.holdTimeoutMs = r.int("holdTimeoutMs", c.holdTimeoutMs, 1, 60000);
  c.bytesPerToken = r.num("bytesPerToken", c.bytesPerToken, 1, 16);
  c.defaultMaxTokens = r.int("defaultMaxTokens", c.defaultMaxTokens, 0, 1000000);
  c.fallbackPrefillMsPerToken = r.num("fallbackPrefillMsPerToken", c.fallbackPrefillMsPerToken, 0, 1000);
  c.adapterLoadMs = r.num("adapterLoadMs", c.adapterLoadMs, 0, 600000);
  c.kvCacheFull = r.num("kvCacheFull", c.kvCacheFull, 0.5, 1);
  c.decodeIdleShare = r.num("decodeIdleShare", c.decodeIdleShare, 0, 1);
  const px = r.obj("prefix", ["blockBytes", "maxBlocks", "entries", "maxEntries", "maxAgeMs"]);
  if (px != null) {
    c.prefixBlockBytes = px.int("blockBytes", c.prefixBlockBytes, 8, 4096);
    if (c.prefixBlockBytes % 8 != 0) p.add(join(px.path, "blockBytes"), "must be a multiple of 8");
    c.prefixMaxBlocks = px.int("maxBlocks", c.prefixMaxBlocks, 1, 4096);
    c.prefixEntries = px.int("entries", c.prefixEntries, 1, 1048576);
    c.prefixMaxEntries = px.int("maxEntries", c.prefixMaxEntries, 1, 1048576);
    c.prefixMaxAgeMs = px.int("maxAgeMs", c.prefixMaxAgeMs, 0, 86400000);
  }
  c.criticalityHeader = r.str("criticalityHeader", c.criticalityHeader);
  if (!isHeaderName(c.criticalityHeader)) p.add(join(r.path, "criticalityHeader"), "must be a lowercase header name");
  else {
    const why = reservedHeaderReason(c.criticalityHeader);
    if (why.length > 0) p.add(join(r.path, "criticalityHeader"), why);
  }
  c.defaultCriticality = criticalityOf(r.oneOf("criticality", "standard", CRITICALITY_NAMES));
  c.objectiveHeader = r.str("objectiveHeader", c.objectiveHeader);
  if (!isHeaderName(c.objectiveHeader)) p.add(join(r.path, "objectiveHeader"), "must be a lowercase header name");
  else {
    const why = reservedHeaderReason(c.objectiveHeader);
    if (why.length > 0) p.add(join(r.path, "objectiveHeader"), why);
    else if (c.objectiveHeader == c.criticalityHeader) p.add(join(r.path, "objectiveHeader"), "must differ from criticalityHeader");
  }
  const objs = r.arr("objectives");
  if (objs != null) parseObjectives(objs, join(r.path, "objectives"), p, c);
  const sh = r.obj("shedding", ["sheddableAt", "standardAt", "kvSheddableAt", "kvStandardAt", "poolSheddableAt", "poolStandardAt", "overloadShare"]);
  if (sh != null) {
    c.shedSheddableAt = sh.num("sheddableAt", c.shedSheddableAt, 0, 1000);
    c.shedStandardAt = sh.num("standardAt", c.shedStandardAt, 0, 1000);
    if (p.ok && c.shedStandardAt < c.shedSheddableAt) p.add(join(sh.path, "standardAt"), "must be at least sheddableAt");
    c.shedKvSheddableAt = sh.num("kvSheddableAt", c.shedKvSheddableAt, 0, 1000);
    c.shedKvStandardAt = sh.num("kvStandardAt", c.shedKvStandardAt, 0, 1000);
    if (p.ok && c.shedKvStandardAt < c.shedKvSheddableAt) p.add(join(sh.path, "kvStandardAt"), "must be at least kvSheddableAt");
    c.shedPoolSheddableAt = sh.num("poolSheddableAt", c.shedPoolSheddableAt, 0, 1000);
    c.shedPoolStandardAt = sh.num("poolStandardAt", c.shedPoolStandardAt, 0, 1000);
    if (p.ok && c.shedPoolStandardAt < c.shedPoolSheddableAt) p.add(join(sh.path, "poolStandardAt"), "must be at least poolSheddableAt");
    c.shedOverloadShare = sh.num("overloadShare", c.shedOverloadShare, 0.01, 1);
  }
  c.picker = r.oneOf("picker", "band", ["band", "p2c"]) == "p2c" ? PICKER_P2C : PICKER_BAND;
  const models = r.arr("models");
  if (models != null) parseModels(models, join(r.path, "models"), p, c);
  const pr = r.obj("priority", CRITICALITY_NAMES);
  if (pr != null) {
    // vLLM --scheduling-policy priority: lower is served first, requests without one have 0
    c.priorityOn = true;
    for (let k = 0; k < 3; k++) c.priorities[k] = pr.int(CRITICALITY_NAMES[k], 0, -1000000, 1000000, true);
  }
  return c;
}

export const OBJECTIVE_KEYS: Array<string> = ["name", "priority"];

/** request.objectives: [{name, priority}], at most MAX_MODELS, names unique (InferenceObjective names). */
function parseObjectives(items: Array<JValue>, path: string, p: Problems, c: RequestConfig): void {
  if (items.length > MAX_MODELS) { p.add(path, "at most " + MAX_MODELS.toString() + " entries, got " + items.length.toString()); return; }
  for (let i = 0; i < items.length; i++) {
    const at = path + "[" + i.toString() + "]";
    if (items[i].kind != JKind.Obj) { p.add(at, "must be object, got " + items[i].kindName()); continue; }
    const or = new ObjectReader(items[i], at, p, OBJECTIVE_KEYS);
    const name = modelName(or, "name", true);
    const priority = or.int("priority", 0, -1000000, 1000000, true);
    if (c.objectives.has(name)) { p.add(join(at, "name"), "duplicate objective \"" + name + "\""); continue; }
    c.objectives.set(name, criticalityOfPriority(priority));
  }
}

function parseModels(items: Array<JValue>, path: string, p: Problems, c: RequestConfig): void {
  if (items.length > MAX_MODELS) { p.add(path, "at most " + MAX_MODELS.toString() + " entries, got " + items.length.toString()); return; }
  for (let i = 0; i < items.length; i++) {
    const at = path + "[" + i.toString() + "]";
    if (items[i].kind != JKind.Obj) { p.add(at, "must be object, got " + items[i].kindName()); continue; }
    const mr = new ObjectReader(items[i], at, p, ["name", "aliasOf", "criticality", "split"]);
    const m = new ModelRule();
    m.name = modelName(mr, "name", true);
    if (c.rule(m.name) != null) p.add(join(at, "name"), "duplicate model \"" + m.name + "\"");
    m.aliasOf = mr.has("aliasOf") ? modelName(mr, "aliasOf", false) : "";
    if (mr.has("criticality")) m.criticality = criticalityOf(mr.oneOf("criticality", "standard", CRITICALITY_NAMES));
    const split = mr.arr("split");
    if (split != null) {
      const sp = join(at, "split");
      if (split.length > MAX_SPLITS) p.add(sp, "at most " + MAX_SPLITS.toString() + " entries");
      let total: i32 = 0;
      for (let k = 0; k < split.length && k < MAX_SPLITS; k++) {
        const sat = sp + "[" + k.toString() + "]";
        if (split[k].kind != JKind.Obj) { p.add(sat, "must be object, got " + split[k].kindName()); continue; }
        const sr = new ObjectReader(split[k], sat, p, ["to", "percent"]);
        const s = new ModelSplit();
        s.to = modelName(sr, "to", true);
        const pct = sr.num("percent", 0, 0, 100, true);
        s.basisPoints = <i32>Math.round(pct * 100);
        total += s.basisPoints;
        m.split.push(s);
      }
      if (total > 10000) p.add(sp, "percentages add up to more than 100");
    }
    if (m.aliasOf.length > 0 && m.split.length > 0) p.add(at, "aliasOf and split exclude each other");
    c.models.push(m);
  }
}
