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
  maxLoras: u16 = 0;              // 0: unknown / no LoRA
  models: Array<string> = [];
  modelFlags: Array<u8> = [];
}
