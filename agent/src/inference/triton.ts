// What the agent reads from the models a Triton server serves (its HTTP/REST API,
// GET /v2/models/<model>/config: the model configuration, model_config.proto as JSON):
//   - the slot count: Triton exports no slot gauge, and without one the estimator infers from
//     `running`, which Triton does not export either, so an instance got 1 slot and a busy one read
//     rho > 1 (saturated). A model runs `instance_group[].count` execution instances per GPU listed
//     in the group (`gpus`; Triton fills the list in the configuration it serves), `count` for a
//     CPU/model-placed group; one instance when the group is absent. The dynamic batcher's batches
//     are not counted as slots: fewer slots price the instance busier, never cheaper.
//   - ensembles (platform "ensemble", `ensemble_scheduling.step[].model_name`): Triton counts a
//     request at the ensemble AND at every model it calls, so summing the page counted one request
//     several times (and averaged the ensemble's E[S] with its steps'). By default the composing
//     models are left out, each request is measured once, at its top-level model; an ensemble's
//     slots are its tightest step's (nested ensembles: the tightest of theirs).
import type { Exposition } from './exposition';

/** models of one page whose configuration is fetched; more are measured without one */
export const MAX_TRITON_MODELS = 64;
export const MAX_CONFIG_BODY_BYTES = 1024 * 1024;
/** nested ensembles deeper than this are not followed (a cycle in a broken repository) */
const MAX_DEPTH = 8;

export interface TritonModelConfig {
  name: string;
  ensemble: boolean;
  /** execution instances (slots) of a non-ensemble model */
  instances: number;
  /** models an ensemble calls */
  steps: string[];
}

const MODEL_CONFIG = 'model config';

/** Parses the JSON of /v2/models/<model>/config; throws naming the field. */
export function parseTritonModelConfig(body: string, model: string): TritonModelConfig {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(body);
  } catch (e) {
    throw new Error(`${MODEL_CONFIG} of ${JSON.stringify(model)}: not JSON (${(e as Error).message})`);
  }
  if (typeof o !== 'object' || o === null || Array.isArray(o)) throw new Error(`${MODEL_CONFIG} of ${JSON.stringify(model)}: not an object`);
  const name = typeof o.name === 'string' && o.name.length > 0 ? o.name : model;
  const ensemble = o.platform === 'ensemble';
  const steps: string[] = [];
  if (ensemble) {
    const st = (o.ensemble_scheduling as { step?: unknown } | undefined)?.step;
    if (!Array.isArray(st)) throw new Error(`${MODEL_CONFIG} of ${JSON.stringify(model)}: ensemble_scheduling.step: must be an array`);
    st.forEach((x, i) => {
      const m = (x as { model_name?: unknown })?.model_name;
      if (typeof m !== 'string' || m.length === 0) throw new Error(`${MODEL_CONFIG} of ${JSON.stringify(model)}: ensemble_scheduling.step[${i}].model_name: must be a non-empty string`);
      steps.push(m);
    });
  }
  let instances = 0;
  const groups = o.instance_group;
  if (groups !== undefined && !Array.isArray(groups)) throw new Error(`${MODEL_CONFIG} of ${JSON.stringify(model)}: instance_group: must be an array`);
  (groups ?? []).forEach((g: unknown, i: number) => {
    const r = g as { count?: unknown; kind?: unknown; gpus?: unknown };
    const count = r.count === undefined ? 1 : r.count;
    if (typeof count !== 'number' || !Number.isInteger(count) || count < 0) throw new Error(`${MODEL_CONFIG} of ${JSON.stringify(model)}: instance_group[${i}].count: must be an integer >= 0`);
    const gpus = Array.isArray(r.gpus) && r.gpus.length > 0 && (r.kind === undefined || r.kind === 'KIND_GPU' || r.kind === 'KIND_AUTO') ? r.gpus.length : 1;
    instances += count * gpus;
  });
  if (!ensemble && (groups === undefined || groups.length === 0)) instances = 1;
  return { name, ensemble, instances, steps };
}

/** Distinct `model` labels of the page's request counters (first MAX_TRITON_MODELS). */
export function modelsOnPage(exp: Exposition, names: string[]): string[] {
  const out = new Set<string>();
  for (const n of names)
    for (const s of exp.samples.get(n) ?? []) {
      const m = s.labels.model;
      if (m !== undefined && m.length > 0) out.add(m);
      if (out.size >= MAX_TRITON_MODELS) return [...out];
    }
  return [...out];
}

export interface TritonPlan {
  /** models left out of the sums (called by an ensemble) */
  exclude: Set<string>;
  /** slots of the instance: the sum over its top-level models; undefined when none is known */
  slots?: number;
}

/**
 * Which models count and how many slots the instance has, from the configurations known
 * (`configs`, by model name) for the models on the page. `ensembles` 'all': nothing excluded.
 */
export function planTriton(onPage: string[], configs: Map<string, TritonModelConfig>, ensembles: 'top-level' | 'all'): TritonPlan {
  const exclude = new Set<string>();
  if (ensembles === 'top-level') for (const m of onPage) for (const s of configs.get(m)?.steps ?? []) if (s !== m) exclude.add(s);
  const slotsOf = (m: string, depth: number): number | undefined => {
    const c = configs.get(m);
    if (!c || depth > MAX_DEPTH) return undefined;
    if (!c.ensemble) return c.instances;
    let min: number | undefined;
    for (const s of c.steps) {
      const v = slotsOf(s, depth + 1);
      if (v === undefined) return undefined; // a step without a configuration: the ensemble's slots are unknown
      min = min === undefined ? v : Math.min(min, v);
    }
    return min;
  };
  let slots: number | undefined;
  for (const m of onPage) {
    if (exclude.has(m)) continue;
    const v = slotsOf(m, 0);
    if (v !== undefined && v > 0) slots = (slots ?? 0) + v;
  }
  return { exclude, slots };
}

/** The page without the samples of the excluded models (a shallow copy; samples shared). */
export function withoutModels(exp: Exposition, exclude: Set<string>): Exposition {
  if (exclude.size === 0) return exp;
  const samples = new Map<string, typeof exp.samples extends Map<string, infer V> ? V : never>();
  let n = 0;
  for (const [k, v] of exp.samples) {
    const kept = v.filter((s) => !exclude.has(s.labels.model ?? ''));
    samples.set(k, kept);
    n += kept.length;
  }
  return { ...exp, samples, sampleCount: n };
}


/** The address of Triton's HTTP endpoint for an instance scraped at `addr` (httpPort replaces the port). */
export function tritonHttpAddr(addr: string, httpPort?: number): string {
  if (httpPort === undefined) return addr;
  return `${addr.slice(0, addr.lastIndexOf(':'))}:${httpPort}`;
}
