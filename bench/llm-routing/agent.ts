// The agent of the `switchyard-filter` policy, in virtual time: it scrapes each simulated vLLM
// instance the way the collector does (agent/src/inference/collector.ts) — the simulator's
// /metrics text (sim/inference/llm/render.ts) through the REAL exposition parser, vLLM mappings,
// InstanceEstimator, LLM signal extraction and LlmTermEstimator (agent/src/inference/llm.ts),
// the model list from the instance's /v1/models answer (parseModelsList) and the LoRA gauge
// (modelList) — and builds the document the publisher would (INSTANCES via buildInstanceRecord,
// LLM section), encoded by the real encodeSnapshot().
//
// Differences from the live agent, all deliberate: scrapes take no time and all instances are
// scraped at the driver's scrape instant (the collector spreads them over a random phase <100 ms);
// /v1/models is read once at start (the fleet's model lists do not change during a run).
import { BaselineTracker, type EstimatorState, InstanceEstimator } from '../../agent/src/inference/estimator';
import { buildInstanceRecord, imputeFrom, priorFrom } from '../../agent/src/inference/collector';
import { parseExposition } from '../../agent/src/inference/exposition';
import { extractSignals, hasLoadSignal, resolveMappings } from '../../agent/src/inference/mappings';
import { extractLlmSignals, LlmTermEstimator, modelList, parseModelsList, type LlmSignals, type LlmTerms, type ServedModels } from '../../agent/src/inference/llm';
import { encodeSnapshot, type InstanceRecord, type Snapshot } from '../../agent/src/snapshot/codec';
import type { InstanceLlmRecord } from '../../agent/src/snapshot/llm';
import type { LlmEngine } from '../../sim/inference/llm/engine';
import { KvCapacity } from '../../agent/src/inference/kv-capacity';

export interface LlmAgentSpec {
  /** inference.scrapeIntervalMs (agent default 1000) */
  scrapeIntervalMs: number;
  /** publishIntervalMs (agent default 250) */
  publishIntervalMs: number;
  /** inference.windowS × 1000 (default 10 000) */
  windowMs: number;
  /** inference.staleAfterMs (default 5000) */
  staleAfterMs: number;
  /** inference.baselineWindowS × 1000 (default 300 000) */
  baselineWindowMs: number;
  /** inference.assumedScv (default 1) */
  assumedScv: number;
  /** services[].priorServiceMs (default 1000) */
  priorServiceMs: number;
  /** services[].concurrency (slots); undefined = inferred by the estimator */
  concurrency?: number;
}

export const DEFAULT_LLM_AGENT: LlmAgentSpec = {
  scrapeIntervalMs: 1000, publishIntervalMs: 250, windowMs: 10_000, staleAfterMs: 5000, baselineWindowMs: 300_000, assumedScv: 1, priorServiceMs: 1000,
};

export const LLM_SERVICE = 'llm';

/** GET /v1/models of the LLM simulator (sim/inference/llm/server.ts), as its JSON text. */
export function modelsAnswer(e: LlmEngine): string {
  const data = [
    ...e.cfg.models.map((id) => ({ id, object: 'model', parent: null })),
    ...Object.entries(e.cfg.adapters).map(([id, base]) => ({ id, object: 'model', parent: base })),
  ];
  return JSON.stringify({ object: 'list', data });
}

interface InstRt {
  est: InstanceEstimator;
  llm: LlmTermEstimator;
  goodScrapes: number;
  lastOkAt?: number;
  state?: EstimatorState;
  terms?: LlmTerms;
  signals?: LlmSignals;
  served: ServedModels;
  kv: KvCapacity;
}

export class LlmAgentModel {
  private readonly mappings = resolveMappings('vllm');
  private readonly inst: InstRt[];
  private readonly baseline: BaselineTracker;
  private seq: number;
  publications = 0;
  scrapes = 0;

  constructor(
    readonly spec: LlmAgentSpec,
    readonly addrs: string[],
    /** the /v1/models answer of each instance */
    models: string[],
    /** epoch ms of virtual time 0 */
    readonly epoch0: number,
  ) {
    this.inst = addrs.map((_, i) => ({
      est: new InstanceEstimator({
        windowMs: spec.windowMs, baselineWindowMs: spec.baselineWindowMs, assumedScv: spec.assumedScv, concurrency: spec.concurrency,
        prior: () => priorFrom(this.inst.filter((_x, j) => j !== i).map((x) => x.state)),
      }),
      llm: new LlmTermEstimator({ windowS: spec.windowMs / 1000 }),
      goodScrapes: 0,
      served: parseModelsList(models[i]),
      kv: new KvCapacity(),
    }));
    this.baseline = new BaselineTracker(spec.baselineWindowMs, 0.1);
    this.seq = epoch0 * 1000 - 1;
  }

  /** One scrape of instance i at virtual time t: `text` is its /metrics page. */
  scrape(i: number, t: number, text: string): void {
    this.scrapes++;
    const exp = parseExposition(text);
    const signals = extractSignals(exp, this.mappings);
    if (!hasLoadSignal(signals)) throw new Error('simulated vLLM exposition without load signals');
    const rt = this.inst[i];
    const at = this.epoch0 + t;
    rt.goodScrapes++;
    rt.lastOkAt = at;
    rt.state = rt.est.observe(at, signals);
    rt.signals = extractLlmSignals(exp);
    rt.terms = rt.llm.observe(at, rt.signals);
    rt.kv.observe(signals.running, rt.signals.kvCacheUsage);
    if (rt.state.windowCompletions > 0 && Number.isFinite(rt.state.p99Ms)) this.baseline.add(at, rt.state.p99Ms);
  }

  /** collector.detail() -> record(): the INSTANCES record of instance i at epoch time `now`. */
  record(i: number, now: number): InstanceRecord {
    const rt = this.inst[i];
    let reason: InstanceRecord['reason'] = 'ok';
    if (rt.goodScrapes < 2) reason = 'no_data';
    else if (rt.lastOkAt !== undefined && now - rt.lastOkAt > this.spec.staleAfterMs) reason = 'stale';
    const es = this.spec.priorServiceMs;
    return buildInstanceRecord({
      service: LLM_SERVICE, addr: this.addrs[i], peer: '', reason, state: rt.state,
      imputed: () => imputeFrom(this.inst.map((x) => x.state)), prior: () => ({ es, es2: (1 + this.spec.assumedScv) * es * es }),
      baselineMs: rt.est.baseline.value(now), lastOkAt: rt.lastOkAt, now, concurrency: this.spec.concurrency,
    }).record;
  }

  /** collector.llmRecord(): the LLM section record of instance i. */
  llmRecord(i: number): InstanceLlmRecord {
    const rt = this.inst[i];
    const lora = rt.signals?.lora;
    return {
      service: LLM_SERVICE, addr: this.addrs[i],
      prefillMsPerToken: rt.terms?.prefillMsPerToken ?? NaN,
      decodeMsPerToken: rt.terms?.decodeMsPerToken ?? NaN,
      decodeIdleMs: rt.terms?.decodeIdleMs ?? NaN,
      decodeMsPerSeq: rt.terms?.decodeMsPerSeq ?? NaN,
      kvCacheUsage: rt.signals?.kvCacheUsage ?? NaN,
      kvSeqs: rt.kv.value(),
      kvTokens: rt.signals?.kvTokens ?? NaN,
      maxLoras: lora && Number.isFinite(lora.maxLora) ? lora.maxLora : 0,
      models: modelList([], rt.served, lora).models,
    };
  }

  /** The document the publisher would publish at virtual time t, encoded. */
  publish(t: number): { seq: number; binary: Buffer; snapshot: Snapshot } {
    this.seq += 1;
    this.publications++;
    const at = this.epoch0 + t;
    const snapshot: Snapshot = {
      seq: this.seq, generatedAtMs: Math.floor(at), peers: [],
      instances: this.inst.map((_, i) => this.record(i, at)),
      llm: this.inst.map((_, i) => this.llmRecord(i)),
    };
    return { seq: this.seq, binary: encodeSnapshot(snapshot), snapshot };
  }

  /** Health per instance as last recorded (a flip is published at once, like agent.ts). */
  healthAt(t: number): boolean[] {
    return this.inst.map((_, i) => this.record(i, this.epoch0 + t).healthy);
  }
}
