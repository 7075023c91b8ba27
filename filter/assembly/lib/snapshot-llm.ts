// Per-instance inference details from the snapshot's LLM section (agent side: agent/src/snapshot, docs/contracts.md).
export const MODEL_BASE: u8 = 1;      // flag: a base model the instance serves
export const MODEL_LOADED: u8 = 2;    // flag: a LoRA adapter currently loaded (running)
export const MODEL_WAITING: u8 = 4;   // flag: a LoRA adapter requests are waiting for
export class InstanceLlm {
  service: string = "";
  addr: string = "";
  prefillMsPerToken: f32 = NaN;   // NaN: unknown
  decodeMsPerToken: f32 = NaN;    // NaN: unknown
  kvCacheUsage: f32 = NaN;        // 0..1, NaN: unknown
  kvSeqs: f32 = NaN;              // sequences the KV cache holds, 1..65535, NaN: unknown
  maxLoras: u16 = 0;              // 0: unknown / no LoRA
  decodeIdleMs: f32 = NaN;        // decode line (section type 5): ms per output token at batch 0, NaN unknown
  decodeMsPerSeq: f32 = NaN;      // ... and ms more per running sequence, NaN unknown
  kvTokens: f32 = NaN;            // KV-cache capacity in tokens (section type 6), NaN unknown
  models: Array<string> = [];
  modelFlags: Array<u8> = [];
}

// ---------------------------------------------------------------- decoder (section type 4)
//
// Layout (docs/contracts.md, "Section type 4, LLM"): u16 count, u16 reserved, then per instance
//   u8 serviceLen, service, u8 addrLen, addr, f32 prefillMsPerToken, f32 decodeMsPerToken,
//   f32 kvCacheUsage, f32 kvSeqs, u16 maxLoras, u8 modelCount (<= MAX_LLM_MODELS), then per model
//   u8 flags (bits 0-2 as above, bits 3-7 ignored), u8 nameLen, name (non-empty).
// D1: a structural defect (bad string, empty service or model name, address not ip:port, more
// models than the bound) rejects the document; a number out of its range reads as NaN
// ("unknown"): the instance is not dropped, its size-aware terms are just not known.
import { Reader } from "./snapshot";
import { judge, VALUE_OK, isEndpointAddress } from "./snapshot-rules";

export const SECTION_LLM: u16 = 4;
/** models (base models and adapters) per instance on the wire; more rejects the document */
export const MAX_LLM_MODELS: i32 = 64;
export const LLM_TERM_MIN_MS: f64 = 1e-6;
export const LLM_TERM_MAX_MS: f64 = 60000;
const MODEL_FLAG_MASK: u8 = 7;

/** A per-token term as the filter uses it: the value when in [1e-6, 60000] ms, NaN ("unknown") otherwise. */
export function llmTermOrNaN(v: f32): f32 {
  return judge(v, LLM_TERM_MIN_MS, LLM_TERM_MAX_MS, true) == VALUE_OK ? v : NaN;
}

/** KV-cache usage: the value when in [0, 1], NaN ("unknown") otherwise. */
export function kvUsageOrNaN(v: f32): f32 {
  return judge(v, 0, 1, true) == VALUE_OK ? v : NaN;
}

/** Sequences the KV cache holds: the value when in [1, 65535], NaN ("unknown") otherwise. */
export function kvSeqsOrNaN(v: f32): f32 {
  return judge(v, 1, 65535, true) == VALUE_OK ? v : NaN;
}

// ---------------------------------------------------------------- decoder (section type 5)
//
// LLM decode line (docs/contracts.md, "Section type 5, LLM decode line"): u16 count, u16 reserved,
// then per instance u8 serviceLen, service, u8 addrLen, addr, f32 decodeIdleMs, f32 decodeMsPerSeq.
// Merged into the LLM records by service and address once the whole document is read; a value
// out of [0, 60000] ms reads as NaN (unknown, both terms then left unknown for that instance).
export const SECTION_LLM_DECODE: u16 = 5;

export class DecodeLine {
  service: string = "";
  addr: string = "";
  idleMs: f32 = NaN;
  perSeqMs: f32 = NaN;
}

/** A decode-line term: the value when in [0, 60000] ms, NaN ("unknown") otherwise. */
export function decodeLineOrNaN(v: f32): f32 {
  return judge(v, 0, LLM_TERM_MAX_MS, true) == VALUE_OK ? v : NaN;
}

export function decodeLlmDecode(r: Reader, out: Array<DecodeLine>): void {
  const count = <i32>r.u16();
  r.u16();
  for (let i = 0; i < count && r.err.length == 0; i++) {
    const x = new DecodeLine();
    const at = "llm decode " + i.toString();
    x.service = r.str(at + " service");
    x.addr = r.str(at + " address");
    x.idleMs = decodeLineOrNaN(r.f32());
    x.perSeqMs = decodeLineOrNaN(r.f32());
    if (r.err.length > 0) return;
    if (x.service.length == 0) { r.fail(at + ": empty service"); return; }
    if (!isEndpointAddress(x.addr)) { r.fail(at + ": address is not ip:port"); return; }
    out.push(x);
  }
}

/** The decode lines into the LLM records they name (both terms known, else the record keeps NaN). */
export function mergeDecodeLines(llm: Array<InstanceLlm>, lines: Array<DecodeLine>): void {
  for (let k = 0; k < lines.length; k++) {
    const l = lines[k];
    if (!(l.idleMs == l.idleMs) || !(l.perSeqMs == l.perSeqMs)) continue;
    for (let i = 0; i < llm.length; i++) {
      if (llm[i].addr == l.addr && llm[i].service == l.service) { llm[i].decodeIdleMs = l.idleMs; llm[i].decodeMsPerSeq = l.perSeqMs; }
    }
  }
}

export function decodeLlm(r: Reader, out: Array<InstanceLlm>): void {
  const count = <i32>r.u16();
  r.u16();
  for (let i = 0; i < count && r.err.length == 0; i++) {
    const x = new InstanceLlm();
    const at = "llm " + i.toString();
    x.service = r.str(at + " service");
    x.addr = r.str(at + " address");
    x.prefillMsPerToken = llmTermOrNaN(r.f32());
    x.decodeMsPerToken = llmTermOrNaN(r.f32());
    x.kvCacheUsage = kvUsageOrNaN(r.f32());
    x.kvSeqs = kvSeqsOrNaN(r.f32());
    x.maxLoras = r.u16();
    const n = <i32>r.u8();
    if (r.err.length > 0) return;
    if (x.service.length == 0) { r.fail(at + ": empty service"); return; }
    if (!isEndpointAddress(x.addr)) { r.fail(at + ": address is not ip:port"); return; }
    if (n > MAX_LLM_MODELS) { r.fail(at + ": " + n.toString() + " models, more than " + MAX_LLM_MODELS.toString()); return; }
    for (let k = 0; k < n; k++) {
      const flags = r.u8() & MODEL_FLAG_MASK;
      const name = r.str(at + " model " + k.toString());
      if (r.err.length > 0) return;
      if (name.length == 0) { r.fail(at + ": empty model name"); return; }
      x.models.push(name);
      x.modelFlags.push(flags);
    }
    out.push(x);
  }
}

// ---------------------------------------------------------------- decoder (section type 6)
//
// LLM KV capacity (docs/contracts.md, "Section type 6, LLM KV capacity"): u16 count, u16 reserved,
// then per instance u8 serviceLen, service, u8 addrLen, addr, f32 kvTokens (the tokens its KV cache
// holds, vLLM num_gpu_blocks × block_size). Merged into the LLM records by service and address; a
// value out of [1, 2^31] reads as NaN (unknown: the prefix index keeps its configured size).
export const SECTION_LLM_KV: u16 = 6;
export const KV_TOKENS_MAX: f64 = 2147483648;

export class KvCapacity {
  service: string = "";
  addr: string = "";
  kvTokens: f32 = NaN;
}

/** KV capacity in tokens: the value when in [1, 2^31], NaN ("unknown") otherwise. */
export function kvTokensOrNaN(v: f32): f32 {
  return judge(v, 1, KV_TOKENS_MAX, true) == VALUE_OK ? v : NaN;
}

export function decodeLlmKv(r: Reader, out: Array<KvCapacity>): void {
  const count = <i32>r.u16();
  r.u16();
  for (let i = 0; i < count && r.err.length == 0; i++) {
    const x = new KvCapacity();
    const at = "llm kv " + i.toString();
    x.service = r.str(at + " service");
    x.addr = r.str(at + " address");
    x.kvTokens = kvTokensOrNaN(r.f32());
    if (r.err.length > 0) return;
    if (x.service.length == 0) { r.fail(at + ": empty service"); return; }
    if (!isEndpointAddress(x.addr)) { r.fail(at + ": address is not ip:port"); return; }
    out.push(x);
  }
}

/** The KV capacities into the LLM records they name (a record naming none is ignored). */
export function mergeKvCapacity(llm: Array<InstanceLlm>, kv: Array<KvCapacity>): void {
  for (let k = 0; k < kv.length; k++) {
    const c = kv[k];
    for (let i = 0; i < llm.length; i++) if (llm[i].addr == c.addr && llm[i].service == c.service) llm[i].kvTokens = c.kvTokens;
  }
}
