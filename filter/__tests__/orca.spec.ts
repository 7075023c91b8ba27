import { parseOrcaHeader, parseOrcaBinary, decodeBase64, parseNumber, decodeOrcaProto, OrcaReport, MAX_ORCA_BYTES } from "../assembly/lib/orca";

const Q = "queue";
const KV = "kv";

describe("ORCA endpoint-load-metrics: TEXT", () => {
  it("reads utilisation, rates and the configured named metrics", () => {
    const r = parseOrcaHeader("TEXT application_utilization=0.5, cpu_utilization=0.7,rps_fractional=120.5,eps=3,named_metrics.queue=4,named_metrics.kv=0.8,named_metrics.other=9",
      Q, KV, new OrcaReport());
    expect(r.ok).toBe(true);
    expect(r.appUtil).toBe(0.5);
    expect(r.cpuUtil).toBe(0.7);
    expect(r.rps).toBe(120.5);
    expect(r.eps).toBe(3);
    expect(r.queue).toBe(4);
    expect(r.kvCache).toBe(0.8);
    expect(r.utilization()).toBe(0.5);
  });

  it("uses the configured names, not fixed ones", () => {
    const r = parseOrcaHeader("TEXT named_metrics.queue=4,named_metrics.waiting=7", "waiting", KV, new OrcaReport());
    expect(r.ok).toBe(true);
    expect(r.queue).toBe(7);
  });

  it("refuses malformed values with a reason, never traps", () => {
    const r = new OrcaReport();
    expect(parseOrcaHeader("TEXT cpu_utilization", Q, KV, r).ok).toBe(false);
    expect(r.error.includes("key=value")).toBe(true);
    expect(parseOrcaHeader("TEXT cpu_utilization=abc", Q, KV, r).ok).toBe(false);
    expect(parseOrcaHeader("TEXT cpu_utilization=0.5,,eps=1", Q, KV, r).ok).toBe(false);
    expect(parseOrcaHeader("TEXT ", Q, KV, r).ok).toBe(false);
    expect(parseOrcaHeader("cpu_utilization=0.5", Q, KV, r).ok).toBe(false);
    expect(r.error.includes("prefix")).toBe(true);
    expect(parseOrcaHeader("TEXT =1", Q, KV, r).ok).toBe(false);
    expect(parseOrcaHeader("TEXT cpu_utilization=1e", Q, KV, r).ok).toBe(false);
    // bounded: a huge value and too many entries are refused
    expect(parseOrcaHeader("TEXT a=" + "1".repeat(MAX_ORCA_BYTES), Q, KV, r).ok).toBe(false);
    let many = "TEXT ";
    for (let i = 0; i < 100; i++) many += "k" + i.toString() + "=1,";
    expect(parseOrcaHeader(many, Q, KV, r).ok).toBe(false);
  });

  it("drops negative and non-finite values, keeps the rest", () => {
    const r = parseOrcaHeader("TEXT cpu_utilization=-1,eps=1e400,rps_fractional=5", Q, KV, new OrcaReport());
    expect(r.ok).toBe(true);
    expect(isNaN(r.cpuUtil)).toBe(true);
    expect(isNaN(r.eps)).toBe(true);
    expect(r.rps).toBe(5);
  });

  it("parseNumber accepts decimals only", () => {
    expect(parseNumber("1.5e2")).toBe(150);
    expect(parseNumber("-0.25")).toBe(-0.25);
    expect(isNaN(parseNumber("0x10"))).toBe(true);
    expect(isNaN(parseNumber("Infinity"))).toBe(true);
    expect(isNaN(parseNumber("."))).toBe(true);
  });
});

describe("ORCA endpoint-load-metrics: JSON", () => {
  it("reads original and camelCase names and named metrics", () => {
    const r = parseOrcaHeader("JSON {\"applicationUtilization\": 0.4, \"cpu_utilization\": 0.6, \"rps_fractional\": 10, \"eps\": 1, \"named_metrics\": {\"queue\": 2, \"kv\": 0.5}}",
      Q, KV, new OrcaReport());
    expect(r.ok).toBe(true);
    expect(r.appUtil).toBe(0.4);
    expect(r.cpuUtil).toBe(0.6);
    expect(r.rps).toBe(10);
    expect(r.eps).toBe(1);
    expect(r.queue).toBe(2);
    expect(r.kvCache).toBe(0.5);
  });

  it("refuses malformed JSON and non-objects", () => {
    const r = new OrcaReport();
    expect(parseOrcaHeader("JSON {\"cpu_utilization\": ", Q, KV, r).ok).toBe(false);
    expect(r.error.includes("invalid JSON")).toBe(true);
    expect(parseOrcaHeader("JSON [1,2]", Q, KV, r).ok).toBe(false);
    expect(parseOrcaHeader("JSON {\"named_metrics\": 3}", Q, KV, r).ok).toBe(false);
  });

  it("ignores values of the wrong type", () => {
    const r = parseOrcaHeader("JSON {\"cpu_utilization\": \"x\", \"eps\": true, \"named_metrics\": {\"queue\": \"3\"}}", Q, KV, new OrcaReport());
    expect(r.ok).toBe(true);
    expect(isNaN(r.cpuUtil)).toBe(true);
    expect(isNaN(r.eps)).toBe(true);
    expect(isNaN(r.queue)).toBe(true);
  });
});

describe("ORCA endpoint-load-metrics-bin (OrcaLoadReport protobuf)", () => {
  // cpu 0.5, application_utilization 0.25, rps_fractional 100, eps 2, named_metrics {queue: 3, kv: 0.7},
  // an unknown varint field 10 = 5 (skipped)
  const FULL = "CQAAAAAAAOA/SQAAAAAAANA/MQAAAAAAAFlAOQAAAAAAAABAQhAKBXF1ZXVlEQAAAAAAAAhAQg0KAmt2EWZmZmZmZuY/UAU=";

  it("decodes every field the filter uses and skips unknown ones", () => {
    const r = parseOrcaBinary(FULL, Q, KV, new OrcaReport());
    expect(r.ok).toBe(true);
    expect(r.cpuUtil).toBe(0.5);
    expect(r.appUtil).toBe(0.25);
    expect(r.rps).toBe(100);
    expect(r.eps).toBe(2);
    expect(r.queue).toBe(3);
    expect(r.kvCache).toBe(0.7);
  });

  it("skips unknown fields of every wire type, each up to the last byte, and reads what follows", () => {
    const proto = (bytes: i32[]): OrcaReport => {
      const b = new Uint8Array(bytes.length);
      for (let i = 0; i < bytes.length; i++) b[i] = <u8>bytes[i];
      return decodeOrcaProto(b, Q, KV, new OrcaReport());
    };
    const CPU: i32[] = [0x09, 0, 0, 0, 0, 0, 0, 0xe0, 0x3f]; // field 1 (double) 0.5
    // field 4 (length-delimited, "abc"), field 11 (fixed32), field 12 (fixed64), field 13 (varint 300), then cpu
    const r = proto([0x22, 3, 0x61, 0x62, 0x63, 0x5d, 1, 2, 3, 4, 0x61, 1, 2, 3, 4, 5, 6, 7, 8, 0x68, 0xac, 0x02].concat(CPU));
    expect(r.ok).toBe(true);
    expect(r.cpuUtil).toBe(0.5);
    // each unknown field last, exactly filling the input
    expect(proto(CPU.concat([0x22, 3, 0x61, 0x62, 0x63])).ok).toBe(true);
    expect(proto(CPU.concat([0x5d, 1, 2, 3, 4])).ok).toBe(true);
    expect(proto(CPU.concat([0x61, 1, 2, 3, 4, 5, 6, 7, 8])).ok).toBe(true);
    // one byte short
    expect(proto(CPU.concat([0x22, 4, 0x61, 0x62, 0x63])).ok).toBe(false);
    expect(proto(CPU.concat([0x5d, 1, 2, 3])).ok).toBe(false);
    expect(proto(CPU.concat([0x61, 1, 2, 3, 4, 5, 6, 7])).ok).toBe(false);
  });

  it("refuses a named_metrics entry whose own tag or key is cut short", () => {
    const proto = (bytes: i32[]): OrcaReport => {
      const b = new Uint8Array(bytes.length);
      for (let i = 0; i < bytes.length; i++) b[i] = <u8>bytes[i];
      return decodeOrcaProto(b, Q, KV, new OrcaReport());
    };
    expect(proto([0x42, 1, 0x80]).ok).toBe(false);             // entry of 1 byte: a tag varint that does not end
    expect(proto([0x42, 3, 0x0a, 5, 0x71]).ok).toBe(false);    // key of 5 bytes in an entry of 3
    expect(proto([0x42, 2, 0x11, 0]).ok).toBe(false);          // value double cut short
    expect(proto([0x42, 0]).ok).toBe(true);                    // an empty entry is a valid (ignored) one
  });

  it("reads the same report through the BIN prefix of endpoint-load-metrics", () => {
    const r = parseOrcaHeader("BIN " + FULL, Q, KV, new OrcaReport());
    expect(r.ok).toBe(true);
    expect(r.queue).toBe(3);
  });

  it("takes the deprecated integer rps when rps_fractional is absent", () => {
    const r = parseOrcaBinary("GCo=", Q, KV, new OrcaReport());
    expect(r.ok).toBe(true);
    expect(r.rps).toBe(42);
  });

  it("refuses truncated, malformed and non-base64 input, never traps", () => {
    const r = new OrcaReport();
    // the FULL report cut inside the kv entry
    expect(parseOrcaBinary("CQAAAAAAAOA/SQAAAAAAANA/MQAAAAAAAFlAOQAAAAAAAABAQhAKBXF1ZXVlEQAAAAAAAAhAQg0KAms=", Q, KV, r).ok).toBe(false);
    expect(parseOrcaBinary("Cw==", Q, KV, r).ok).toBe(false);            // wire type 3 (group)
    expect(parseOrcaBinary("Qn8KAQ==", Q, KV, r).ok).toBe(false);        // map entry longer than the input
    expect(parseOrcaBinary("gICAgICAgICAgIA=", Q, KV, r).ok).toBe(false); // varint longer than 10 bytes
    expect(parseOrcaBinary("CQAA", Q, KV, r).ok).toBe(false);            // double cut short
    expect(parseOrcaBinary("not base64!", Q, KV, r).ok).toBe(false);
    expect(r.error.includes("base64")).toBe(true);
  });

  it("decodes base64 with and without padding, standard and URL-safe", () => {
    expect(decodeBase64("GCo=")!.length).toBe(2);
    expect(decodeBase64("GCo")![1]).toBe(0x2a);
    expect(decodeBase64("-_8")![0]).toBe(0xfb);
    expect(decodeBase64("A") == null).toBe(true);
  });
});
