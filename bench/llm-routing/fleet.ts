// Discrete-event driver over N LlmEngine instances in virtual time (nothing sleeps): arrivals in
// time order; before each event every engine is advanced to its time (advanceTo), so a policy
// decides on the fleet as it is then; each policy's metrics scrape runs on its own interval and
// sees only what vLLM's /metrics would show (scrape.ts). Completions reach the policy when the
// engine step that produced them has ended (the proxy sees the end of the response).
import { LlmEngine, type LlmEngineConfig, type LlmRequest, type StepResult } from '../../sim/inference/llm/engine';
import { advanceTo } from '../../sim/inference/llm/virtual';
import { tokenize } from '../../sim/inference/llm/tokens';
import { promptText, toHttp, type WorkloadRequest } from '../../sim/inference/llm/workloads';
import { renderLlmVllm } from '../../sim/inference/llm/render';
import { scrape, type Scraped } from './scrape';

export type Criticality = 'critical' | 'standard' | 'sheddable';

export interface InstanceSpec {
  name: string;
  cfg: Partial<LlmEngineConfig>;
}

/** A workload request prepared once and shared by every policy's run (same sample path). */
export interface BenchRequest {
  idx: number;
  w: WorkloadRequest;
  criticality: Criticality;
  text: string;
  tokens: number[];
  measured: boolean;
}

/** What a policy sees of a request: the OpenAI body's fields (and the criticality header). */
export interface RouteRequest {
  idx: number;
  model: string;
  text: string;
  promptBytes: number;
  maxTokens: number;
  criticality: Criticality;
  /** the HTTP request as the client sends it (streamed: `"stream": true`), built on demand */
  wire(): { path: string; body: string };
}

export interface PolicyCtx {
  instances: InstanceSpec[];
  /** instances whose engine serves `model` (base model or adapter): the InferencePool / cluster */
  candidates(model: string): number[];
  seed: number;
}

export interface RoutingPolicy {
  readonly name: string;
  /** metrics scrape interval (ms); 0 = never scraped */
  readonly scrapeMs: number;
  init(ctx: PolicyCtx): void;
  onScrape?(nowMs: number, instance: number, m: Scraped): void;
  /** the same scrape as the /metrics page the simulator serves (vLLM's names), for a policy that
   *  parses it itself (the real agent code); rendered only for policies that define this */
  onMetrics?(nowMs: number, instance: number, text: string): void;
  /** instance index, or -1 = rejected locally (429) */
  route(nowMs: number, r: RouteRequest): number;
  /** the response ended (last token) */
  onComplete?(nowMs: number, instance: number, r: RouteRequest): void;
  /** the first token reached the client (streaming) */
  onFirstToken?(nowMs: number, instance: number, r: RouteRequest): void;
  /** the run is over (every request served or shed) */
  finish?(nowMs: number): void;
  /** engine settings of this policy's deployment, over the fleet's (e.g. vLLM --scheduling-policy priority) */
  readonly engine?: Partial<LlmEngineConfig>;
  /** the vLLM `priority` of the request just routed, as its body reached the instance (undefined: none) */
  priorityOf?(r: RouteRequest): number | undefined;
}

export interface Outcome {
  idx: number;
  instance: number;
  shed: boolean;
  arrivalMs: number;
  ttftMs: number;
  e2eMs: number;
  promptTokens: number;
  cachedTokens: number;
  preemptions: number;
  /** from arrival to the engine first scheduling it (NaN: shed) */
  queuedMs: number;
}

export interface RunResult {
  policy: string;
  outcomes: Outcome[];
  /** per instance: requests sent */
  sent: number[];
  endMs: number;
  routeCpuMs: number;
}

export function prepare(ws: WorkloadRequest[], crit: (i: number) => Criticality, measureFromMs: number, measureToMs: number): BenchRequest[] {
  return ws.map((w, idx) => {
    const text = promptText(w);
    return { idx, w, criticality: crit(idx), text, tokens: tokenize(text), measured: w.atMs >= measureFromMs && w.atMs < measureToMs };
  });
}

export function runFleet(instances: InstanceSpec[], reqs: BenchRequest[], policy: RoutingPolicy, seed: number): RunResult {
  const engines = instances.map((s) => new LlmEngine({ ...s.cfg, ...policy.engine }));
  const served = new Map<string, number[]>();
  const candidates = (model: string): number[] => {
    let c = served.get(model);
    if (!c) {
      c = engines.map((e, i) => (e.resolveModel(model) ? i : -1)).filter((i) => i >= 0);
      served.set(model, c);
    }
    return c;
  };
  policy.init({ instances, candidates, seed });
  const n = engines.length;
  // events produced by engine steps, released to the policy once the clock passes their time
  const pendingDone: Array<Array<{ t: number; r: LlmRequest; first: boolean }>> = engines.map(() => []);
  const owner = new Map<LlmRequest, { b: BenchRequest; rr: RouteRequest; inst: number }>();
  const outcomes: Outcome[] = new Array(reqs.length);
  const sent = new Array(n).fill(0);
  const onStep = (i: number) => (s: StepResult) => {
    for (const r of s.firstTokens) pendingDone[i].push({ t: s.endMs, r, first: true });
    for (const r of s.finished) pendingDone[i].push({ t: s.endMs, r, first: false });
  };
  const stepCbs = engines.map((_, i) => onStep(i));
  // every event due by t, across instances in time order (per instance in step order): a policy
  // that keeps a clock (the filter's host) sees time move forward only
  const due: Array<{ t: number; i: number; r: LlmRequest; first: boolean }> = [];
  const release = (t: number): void => {
    due.length = 0;
    for (let i = 0; i < n; i++) {
      const q = pendingDone[i];
      let k = 0;
      while (k < q.length && q[k].t <= t) {
        const ev = q[k++];
        due.push({ t: ev.t, i, r: ev.r, first: ev.first });
      }
      if (k) q.splice(0, k);
    }
    if (due.length > 1) due.sort((a, b) => a.t - b.t || a.i - b.i);
    for (const ev of due) {
      const i = ev.i;
      const o = owner.get(ev.r);
      if (!o) continue;
      if (ev.first) policy.onFirstToken?.(ev.t, i, o.rr);
      else {
        policy.onComplete?.(ev.t, i, o.rr);
        owner.delete(ev.r);
        const r = ev.r;
        outcomes[o.b.idx] = {
          idx: o.b.idx, instance: i, shed: false, arrivalMs: r.arrivalMs,
          ttftMs: (r.firstTokenMs as number) - r.arrivalMs, e2eMs: (r.finishedMs as number) - r.arrivalMs,
          promptTokens: r.promptTokens.length, cachedTokens: r.cachedTokens, preemptions: r.preemptions,
          queuedMs: (r.firstScheduledMs as number) - r.arrivalMs,
        };
      }
    }
  };
  const advanceAll = (t: number): void => {
    for (let i = 0; i < n; i++) advanceTo(engines[i], t, stepCbs[i]);
    release(t);
  };
  const phase = policy.scrapeMs > 0 ? (seed % 97) * (policy.scrapeMs / 97) : Infinity;
  let nextScrape = policy.scrapeMs > 0 ? phase : Infinity;
  let routeCpu = 0;
  for (const b of reqs) {
    const t = b.w.atMs;
    while (nextScrape <= t) {
      advanceAll(nextScrape);
      for (let i = 0; i < n; i++) {
        policy.onScrape?.(nextScrape, i, scrape(engines[i]));
        if (policy.onMetrics) policy.onMetrics(nextScrape, i, renderLlmVllm({ engine: engines[i], modelName: engines[i].cfg.models[0], nowS: nextScrape / 1000 }));
      }
      nextScrape += policy.scrapeMs;
    }
    advanceAll(t);
    const rr: RouteRequest = { idx: b.idx, model: b.w.model, text: b.text, promptBytes: b.text.length, maxTokens: b.w.maxTokens, criticality: b.criticality, wire: () => toHttp(b.w, true) };
    const c0 = performance.now();
    const inst = policy.route(t, rr);
    routeCpu += performance.now() - c0;
    if (inst < 0) {
      outcomes[b.idx] = { idx: b.idx, instance: -1, shed: true, arrivalMs: t, ttftMs: NaN, e2eMs: NaN, promptTokens: b.tokens.length, cachedTokens: 0, preemptions: 0, queuedMs: NaN };
      continue;
    }
    if (!candidates(b.w.model).includes(inst)) throw new Error(`${policy.name}: instance ${inst} does not serve ${b.w.model}`);
    const r = engines[inst].submit({ model: b.w.model, promptTokens: b.tokens, maxTokens: b.w.maxTokens, priority: policy.priorityOf?.(rr) }, t);
    owner.set(r, { b, rr, inst });
    sent[inst]++;
  }
  // drain: keep scraping so feedback-driven policies stay consistent, until every engine is idle
  let t = reqs.length ? reqs[reqs.length - 1].w.atMs : 0;
  while (engines.some((e) => e.hasWork()) || pendingDone.some((q) => q.length)) {
    t += 100;
    advanceAll(t);
  }
  policy.finish?.(t);
  return { policy: policy.name, outcomes, sent, endMs: t, routeCpuMs: routeCpu };
}
