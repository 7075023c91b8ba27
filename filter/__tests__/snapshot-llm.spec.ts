// The LLM section (type 4) on the filter side: the golden fixture accept-llm.bin (decoded by the
// agent's oracle too: test/agent/snapshot-llm.test.ts) and the per-token value rules (D1: out of
// range reads as unknown, the instance is kept).
import { decodeSnapshot } from "../assembly/lib/snapshot";
import { MODEL_BASE, MODEL_LOADED, MODEL_WAITING, llmTermOrNaN, kvUsageOrNaN, kvSeqsOrNaN, kvTokensOrNaN, InstanceLlm, KvCapacity, mergeKvCapacity } from "../assembly/lib/snapshot-llm";
import { fixture } from "./fixtures";

describe("snapshot LLM section", () => {
  it("accept-llm.bin: models, flags, terms, KV usage, bounds", () => {
    const r = decodeSnapshot(fixture("accept-llm.bin"));
    if (r.snapshot == null) throw new Error("rejected: " + r.error);
    const s = r.snapshot!;
    expect(s.instances.length).toBe(3);
    expect(s.llm.length).toBe(4);
    const a = s.llm[0];
    expect(a.service).toBe("llm");
    expect(a.addr).toBe("10.0.0.7:8000");
    expect(a.prefillMsPerToken).toBe(<f32>0.125);
    expect(a.decodeMsPerToken).toBe(<f32>6.25);
    expect(a.kvCacheUsage).toBe(<f32>0.4375);
    expect(a.kvSeqs).toBe(<f32>24.5);
    expect(a.maxLoras).toBe(2);
    expect(a.models.length).toBe(5);
    expect(a.models[0]).toBe("meta-llama/Llama-3.1-8B-Instruct");
    expect(a.modelFlags[0]).toBe(MODEL_BASE);
    expect(a.models[1]).toBe("sql-lora");
    expect(a.modelFlags[1]).toBe(MODEL_LOADED);
    expect(a.modelFlags[2]).toBe(MODEL_LOADED | MODEL_WAITING);
    expect(a.modelFlags[3]).toBe(MODEL_WAITING);
    expect(a.modelFlags[4]).toBe(<u8>0);
    expect(s.llm[1].addr).toBe("[fd00::7]:8000");
    expect(isNaN(s.llm[1].prefillMsPerToken)).toBe(true);
    expect(s.llm[1].models.length).toBe(0);
    for (let i = 2; i < 4; i++) {
      expect(isNaN(s.llm[i].prefillMsPerToken)).toBe(true);
      expect(isNaN(s.llm[i].decodeMsPerToken)).toBe(true);
      expect(isNaN(s.llm[i].kvCacheUsage)).toBe(true);
      expect(isNaN(s.llm[i].kvSeqs)).toBe(true);
    }
    expect(isNaN(s.llm[1].kvSeqs)).toBe(true);
    expect(s.llm[2].maxLoras).toBe(65535);
    expect(s.llm[2].modelFlags[0]).toBe(MODEL_BASE);
    expect(s.llm[3].models[0].length).toBe(255);
  });

  it("a snapshot without the section has no LLM records", () => {
    const s = decodeSnapshot(fixture("accept-full.bin")).snapshot!;
    expect(s.llm.length).toBe(0);
  });

  it("per-token terms: [1e-6, 60000] ms, anything else unknown; KV usage [0, 1]", () => {
    expect(llmTermOrNaN(<f32>0.08)).toBe(<f32>0.08);
    expect(llmTermOrNaN(<f32>60000)).toBe(<f32>60000);
    expect(isNaN(llmTermOrNaN(<f32>0))).toBe(true);
    expect(isNaN(llmTermOrNaN(<f32>-1))).toBe(true);
    expect(isNaN(llmTermOrNaN(<f32>60001))).toBe(true);
    expect(isNaN(llmTermOrNaN(<f32>Infinity))).toBe(true);
    expect(kvUsageOrNaN(<f32>0)).toBe(<f32>0);
    expect(kvUsageOrNaN(<f32>1)).toBe(<f32>1);
    expect(isNaN(kvUsageOrNaN(<f32>1.01))).toBe(true);
    expect(isNaN(kvUsageOrNaN(<f32>-0.1))).toBe(true);
    // kvSeqs: sequences the KV cache holds, 1..65535; below one sequence, above the bound, NaN or
    // infinite: unknown (the filter then sheds on the backlog per slot)
    expect(kvSeqsOrNaN(<f32>1)).toBe(<f32>1);
    expect(kvSeqsOrNaN(<f32>65535)).toBe(<f32>65535);
    expect(isNaN(kvSeqsOrNaN(<f32>0.99))).toBe(true);
    expect(isNaN(kvSeqsOrNaN(<f32>65536))).toBe(true);
    expect(isNaN(kvSeqsOrNaN(<f32>Infinity))).toBe(true);
    expect(isNaN(kvSeqsOrNaN(<f32>NaN))).toBe(true);
  });

  it("accept-llm-decode-line.bin: section type 5 merged by address; out of range unknown; no line without the section", () => {
    const r = decodeSnapshot(fixture("accept-llm-decode-line.bin"));
    if (r.snapshot == null) throw new Error("rejected: " + r.error);
    const s = r.snapshot!;
    expect(s.llm.length).toBe(4);
    expect(s.llm[0].decodeIdleMs).toBe(<f32>10.75);
    expect(s.llm[0].decodeMsPerSeq).toBe(<f32>0.1875);
    expect(isNaN(s.llm[2].decodeIdleMs)).toBe(true); // -1 ms: unknown, so neither term is used
    expect(isNaN(s.llm[1].decodeIdleMs)).toBe(true);
    const old = decodeSnapshot(fixture("accept-llm.bin")).snapshot!;
    expect(isNaN(old.llm[0].decodeIdleMs)).toBe(true);
  });
});

describe("snapshot LLM KV capacity (section type 6)", () => {
  it("kvTokens: valid 1 .. 2^31 tokens, anything else unknown", () => {
    expect(kvTokensOrNaN(<f32>424000)).toBe(<f32>424000);
    expect(kvTokensOrNaN(<f32>1)).toBe(<f32>1);
    expect(kvTokensOrNaN(<f32>2147483648)).toBe(<f32>2147483648);
    expect(isNaN(kvTokensOrNaN(<f32>0))).toBe(true);
    expect(isNaN(kvTokensOrNaN(<f32>-16))).toBe(true);
    expect(isNaN(kvTokensOrNaN(<f32>4294967296))).toBe(true);
    expect(isNaN(kvTokensOrNaN(<f32>Infinity))).toBe(true);
    expect(isNaN(kvTokensOrNaN(<f32>NaN))).toBe(true);
  });

  it("merged into the LLM record of the same service and address; the others stay unknown", () => {
    const a = new InstanceLlm(); a.service = "llm"; a.addr = "10.0.0.1:80";
    const b = new InstanceLlm(); b.service = "llm"; b.addr = "10.0.0.2:80";
    const k = new KvCapacity(); k.service = "llm"; k.addr = "10.0.0.2:80"; k.kvTokens = 96000;
    const o = new KvCapacity(); o.service = "other"; o.addr = "10.0.0.1:80"; o.kvTokens = 5;
    mergeKvCapacity([a, b], [k, o]);
    expect(isNaN(a.kvTokens)).toBe(true);
    expect(b.kvTokens).toBe(<f32>96000);
  });
});
