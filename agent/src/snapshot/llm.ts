// Section type 4, LLM: per-instance inference details (models and LoRA adapters served, the
// learned prefill/decode terms, KV-cache usage). The filter's decoder is
// filter/assembly/lib/snapshot-llm.ts; layout and value meanings in docs/contracts.md
// ("Section type 4, LLM").
//
// D1: per-token terms and KV-cache usage out of their range are carried as NaN ("unknown") — an
// instance whose prefill term cannot be trusted is still routable by its E[S]; only structural
// defects (strings, addresses, the model-count bound) reject a document.
import { isEndpointAddress, judge } from './rules';
import type { Reader, SectionCodec, Writer } from './codec';
import { readEndpoint, readRecords, writeRecords } from './records';

export const SECTION_LLM = 4;
/** models (base models and adapters) per instance on the wire; the agent keeps the first ones (loaded, waiting, base, then the rest) */
export const MAX_LLM_MODELS = 64;
export const LLM_TERM_MIN_MS = 1e-6;
export const LLM_TERM_MAX_MS = 60_000;

export const MODEL_BASE = 1;
export const MODEL_LOADED = 2;
export const MODEL_WAITING = 4;
const MODEL_FLAG_MASK = 7;

export interface LlmModel {
  name: string;
  /** MODEL_BASE | MODEL_LOADED | MODEL_WAITING; 0 = an adapter the instance can serve, not resident now */
  flags: number;
}

export interface InstanceLlmRecord {
  service: string;
  addr: string;
  /** ms of prefill per prompt token (learned); NaN unknown */
  prefillMsPerToken: number;
  /** ms per output token while decoding (learned); NaN unknown */
  decodeMsPerToken: number;
  /** 0..1; NaN unknown */
  kvCacheUsage: number;
  /** sequences the KV cache holds (running ÷ usage, smoothed: inference/kv-capacity.ts), 1..65535; NaN unknown */
  kvSeqs: number;
  /** adapters resident at once (vLLM --max-loras); 0 unknown / no LoRA */
  maxLoras: number;
  models: LlmModel[];
  /**
   * The decode line (section type 5, LLM_DECODE): ms per output token = decodeIdleMs +
   * decodeMsPerSeq · running sequences (inference/llm.ts fitDecodeLine). Absent or NaN: unknown;
   * written only when both are known.
   */
  decodeIdleMs?: number;
  decodeMsPerSeq?: number;
  /**
   * Section type 6, LLM_KV: the tokens the instance's KV cache holds (vLLM cache_config_info
   * num_gpu_blocks × block_size), which sizes the filter's prefix index. Absent or NaN: unknown
   * (the filter keeps its configured index size); written only when known.
   */
  kvTokens?: number;
}

export const SECTION_LLM_DECODE = 5;

/** A decode-line term as published: the value when in [0, 60000] ms (judged as f32), NaN otherwise. */
export function decodeLineOrNaN(v: number | undefined): number {
  if (v === undefined) return NaN;
  // Stryker disable next-line BooleanLiteral: equivalent, NaN is neither 'ok' when unknown nor when invalid: NaN either way
  return judge(v, { min: 0, max: LLM_TERM_MAX_MS, nanIsUnknown: true }) === 'ok' ? v : NaN;
}

export interface LlmDecodeRecord {
  service: string;
  addr: string;
  decodeIdleMs: number;
  decodeMsPerSeq: number;
}

/** Section type 5: u16 count, u16 reserved, then per instance str service, str addr,
 *  f32 decodeIdleMs, f32 decodeMsPerSeq (docs/contracts.md, "Section type 5, LLM decode line"). */
export const LLM_DECODE_SECTION: SectionCodec<LlmDecodeRecord[]> = {
  type: SECTION_LLM_DECODE,
  name: 'LLM_DECODE',
  write(w: Writer, records) {
    writeRecords(w, 'llmDecode', records, (r, i) => {
      if (!r.service) throw new RangeError(`llmDecode[${i}].service: must not be empty`);
      w.str(r.service, `llmDecode[${i}].service`);
      w.str(r.addr, `llmDecode[${i}].addr`);
      w.f32(r.decodeIdleMs);
      w.f32(r.decodeMsPerSeq);
    });
  },
  read(r: Reader) {
    return readRecords(r, 'llmDecode', (i): LlmDecodeRecord => {
      const { service, addr } = readEndpoint(r, 'llmDecode', i);
      return { service, addr, decodeIdleMs: r.f32(), decodeMsPerSeq: r.f32() };
    });
  },
};

/** The decode-line records of the LLM records that know both terms (in range). */
export function decodeLines(records: InstanceLlmRecord[]): LlmDecodeRecord[] {
  const out: LlmDecodeRecord[] = [];
  for (const r of records) {
    const a = decodeLineOrNaN(r.decodeIdleMs), b = decodeLineOrNaN(r.decodeMsPerSeq);
    if (Number.isFinite(a) && Number.isFinite(b)) out.push({ service: r.service, addr: r.addr, decodeIdleMs: a, decodeMsPerSeq: b });
  }
  return out;
}

/** Merges decoded decode lines into the LLM records (by service and address; out of range: unknown). */
export function mergeDecodeLines(records: InstanceLlmRecord[], lines: LlmDecodeRecord[]): InstanceLlmRecord[] {
  const by = new Map(lines.map((l) => [`${l.service} ${l.addr}`, l]));
  return records.map((r) => {
    const l = by.get(`${r.service} ${r.addr}`);
    if (!l) return r;
    const a = decodeLineOrNaN(l.decodeIdleMs), b = decodeLineOrNaN(l.decodeMsPerSeq);
    return Number.isFinite(a) && Number.isFinite(b) ? { ...r, decodeIdleMs: a, decodeMsPerSeq: b } : r;
  });
}

export const SECTION_LLM_KV = 6;
export const KV_TOKENS_MAX = 2 ** 31;

/** A KV capacity as published: the value when in [1, 2^31] tokens (judged as f32), NaN otherwise. */
export function kvTokensOrNaN(v: number | undefined): number {
  if (v === undefined) return NaN;
  // Stryker disable next-line BooleanLiteral: equivalent, NaN is neither 'ok' when unknown nor when invalid: NaN either way
  return judge(v, { min: 1, max: KV_TOKENS_MAX, nanIsUnknown: true }) === 'ok' ? v : NaN;
}

export interface LlmKvRecord {
  service: string;
  addr: string;
  kvTokens: number;
}

/** Section type 6: u16 count, u16 reserved, then per instance str service, str addr, f32 kvTokens
 *  (docs/contracts.md, "Section type 6, LLM KV capacity"). */
export const LLM_KV_SECTION: SectionCodec<LlmKvRecord[]> = {
  type: SECTION_LLM_KV,
  name: 'LLM_KV',
  write(w: Writer, records) {
    writeRecords(w, 'llmKv', records, (r, i) => {
      if (!r.service) throw new RangeError(`llmKv[${i}].service: must not be empty`);
      w.str(r.service, `llmKv[${i}].service`);
      w.str(r.addr, `llmKv[${i}].addr`);
      w.f32(r.kvTokens);
    });
  },
  read(r: Reader) {
    return readRecords(r, 'llmKv', (i): LlmKvRecord => {
      const { service, addr } = readEndpoint(r, 'llmKv', i);
      return { service, addr, kvTokens: r.f32() };
    });
  },
};

/** The KV-capacity records of the LLM records that know it (in range). */
export function kvCapacities(records: InstanceLlmRecord[]): LlmKvRecord[] {
  const out: LlmKvRecord[] = [];
  for (const r of records) {
    const t = kvTokensOrNaN(r.kvTokens);
    if (Number.isFinite(t)) out.push({ service: r.service, addr: r.addr, kvTokens: t });
  }
  return out;
}

/** Merges decoded KV capacities into the LLM records (by service and address; out of range: unknown, left out). */
export function mergeKvCapacities(records: InstanceLlmRecord[], kv: LlmKvRecord[]): InstanceLlmRecord[] {
  const by = new Map(kv.map((k) => [`${k.service} ${k.addr}`, k]));
  return records.map((r) => {
    const k = by.get(`${r.service} ${r.addr}`);
    const t = k ? kvTokensOrNaN(k.kvTokens) : NaN;
    return Number.isFinite(t) ? { ...r, kvTokens: t } : r;
  });
}

/** A per-token term as published: the value when in [1e-6, 60000] ms (judged as f32), NaN otherwise. */
export function llmTermOrNaN(v: number): number {
  // Stryker disable next-line BooleanLiteral: equivalent, NaN is neither 'ok' when unknown nor when invalid: NaN either way
  return judge(v, { min: LLM_TERM_MIN_MS, max: LLM_TERM_MAX_MS, nanIsUnknown: true }) === 'ok' ? v : NaN;
}

export function kvUsageOrNaN(v: number): number {
  // Stryker disable next-line BooleanLiteral: equivalent, NaN is neither 'ok' when unknown nor when invalid: NaN either way
  return judge(v, { min: 0, max: 1, nanIsUnknown: true }) === 'ok' ? v : NaN;
}

export function kvSeqsOrNaN(v: number): number {
  // Stryker disable next-line BooleanLiteral: equivalent, NaN is neither 'ok' when unknown nor when invalid: NaN either way
  return judge(v, { min: 1, max: 65535, nanIsUnknown: true }) === 'ok' ? v : NaN;
}

export function sanitizeLlm(r: InstanceLlmRecord): InstanceLlmRecord {
  const p = llmTermOrNaN(r.prefillMsPerToken);
  const d = llmTermOrNaN(r.decodeMsPerToken);
  const k = kvUsageOrNaN(r.kvCacheUsage);
  const q = kvSeqsOrNaN(r.kvSeqs);
  if (Object.is(p, r.prefillMsPerToken) && Object.is(d, r.decodeMsPerToken) && Object.is(k, r.kvCacheUsage) && Object.is(q, r.kvSeqs)) return r;
  return { ...r, prefillMsPerToken: p, decodeMsPerToken: d, kvCacheUsage: k, kvSeqs: q };
}

export const LLM_SECTION: SectionCodec<InstanceLlmRecord[]> = {
  type: SECTION_LLM,
  name: 'LLM',
  write(w: Writer, records) {
    writeRecords(w, 'llm', records, (r, i) => {
      if (!r.service) throw new RangeError(`llm[${i}].service: must not be empty`);
      if (r.models.length > MAX_LLM_MODELS) throw new RangeError(`llm[${i}].models: more than ${MAX_LLM_MODELS}`);
      w.str(r.service, `llm[${i}].service`);
      w.str(r.addr, `llm[${i}].addr`);
      w.f32(r.prefillMsPerToken);
      w.f32(r.decodeMsPerToken);
      w.f32(r.kvCacheUsage);
      w.f32(r.kvSeqs);
      w.u16(Number.isFinite(r.maxLoras) ? Math.min(Math.max(0, Math.floor(r.maxLoras)), 0xffff) : 0);
      w.u8(r.models.length);
      r.models.forEach((m, k) => {
        if (!m.name) throw new RangeError(`llm[${i}].models[${k}].name: must not be empty`);
        w.u8(m.flags & MODEL_FLAG_MASK);
        w.str(m.name, `llm[${i}].models[${k}].name`);
      });
    });
  },
  read(r: Reader) {
    return readRecords(r, 'llm', (i): InstanceLlmRecord => {
      const { service, addr } = readEndpoint(r, 'llm', i);
      const prefillMsPerToken = r.f32();
      const decodeMsPerToken = r.f32();
      const kvCacheUsage = r.f32();
      const kvSeqs = r.f32();
      const maxLoras = r.u16();
      const n = r.u8();
      if (n > MAX_LLM_MODELS) r.fail(`llm[${i}]: ${n} models, more than ${MAX_LLM_MODELS}`);
      const models: LlmModel[] = [];
      for (let k = 0; k < n; k++) {
        const flags = r.u8() & MODEL_FLAG_MASK;
        const name = r.str(`llm[${i}].models`, k, 'name');
        if (!name) r.fail(`llm[${i}]: empty model name`);
        models.push({ name, flags });
      }
      return { service, addr, prefillMsPerToken, decodeMsPerToken, kvCacheUsage, kvSeqs, maxLoras, models };
    });
  },
};

/** The JSON view of one record (NaN -> null, f32 precision, flags spelled out). */
export function llmToJson(r: InstanceLlmRecord): Record<string, unknown> {
  const f32 = (v: number): number | null => (Number.isFinite(Math.fround(v)) ? Math.fround(v) : null);
  return {
    service: r.service,
    addr: r.addr,
    prefillMsPerToken: f32(r.prefillMsPerToken),
    decodeMsPerToken: f32(r.decodeMsPerToken),
    kvCacheUsage: f32(r.kvCacheUsage),
    kvSeqs: f32(r.kvSeqs),
    maxLoras: r.maxLoras,
    ...(r.decodeIdleMs !== undefined && Number.isFinite(r.decodeIdleMs) ? { decodeIdleMs: f32(r.decodeIdleMs), decodeMsPerSeq: f32(r.decodeMsPerSeq ?? NaN) } : {}),
    ...(Number.isFinite(kvTokensOrNaN(r.kvTokens)) ? { kvTokens: f32(r.kvTokens as number) } : {}),
    models: r.models.map((m) => ({ name: m.name, base: (m.flags & MODEL_BASE) !== 0, loaded: (m.flags & MODEL_LOADED) !== 0, waiting: (m.flags & MODEL_WAITING) !== 0 })),
  };
}
