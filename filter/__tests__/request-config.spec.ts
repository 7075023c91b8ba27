import { parseConfig } from "../assembly/lib/config";
import { ON_INVALID_FALLBACK, ON_INVALID_REJECT } from "../assembly/lib/request/config";
import { CRIT_STANDARD, CRIT_SHEDDABLE, CRIT_CRITICAL } from "../assembly/lib/criticality";
import { PICKER_BAND, PICKER_P2C } from "../assembly/lib/choose";

function withRequest(req: string): string {
  return '{"agent":{"cluster":"a"},"link":{"services":[]},"loadAware":{"services":[{"authorities":["llm.example"],"service":"llm","request":' + req + '}]}}';
}

describe("request config", () => {
  it("defaults when only the Envoy feature is stated", () => {
    const r = parseConfig(withRequest('{"allowOnHeadersStopIteration":true}'));
    expect(r.error).toBe("");
    const c = r.config!.loadAware.services[0].request!;
    expect(c.maxBodyBytes).toBe(524288); // half of Envoy's default buffer limit: the filter, not a 413, decides
    expect(c.onInvalid).toBe(ON_INVALID_FALLBACK);
    expect(c.holdTimeoutMs).toBe(1000);
    expect(c.prefixBlockBytes).toBe(64);
    expect(c.prefixMaxBlocks).toBe(256);
    expect(c.defaultCriticality).toBe(CRIT_STANDARD);
    expect(c.criticalityHeader).toBe("x-switchyard-criticality");
    expect(c.priorityOn).toBe(false);
    // the rest of the documented defaults (docs/contracts.md, request block)
    expect(c.bytesPerToken).toBe(4.0);
    expect(c.defaultMaxTokens).toBe(256);
    expect(c.fallbackPrefillMsPerToken).toBe(0.1);
    expect(c.adapterLoadMs).toBe(200.0);
    expect(c.kvCacheFull).toBe(0.95);
    expect(c.decodeIdleShare).toBe(0.0);
    expect(c.prefixEntries).toBe(32768);
    expect(c.prefixMaxAgeMs).toBe(600000);
    expect(c.shedSheddableAt).toBe(1.0);
    expect(c.shedStandardAt).toBe(2.0);
    expect(c.shedKvSheddableAt).toBe(0.6);
    expect(c.shedKvStandardAt).toBe(0.7);
    expect(c.shedPoolSheddableAt).toBe(0.15);
    expect(c.shedPoolStandardAt).toBe(0.2);
    expect(c.shedOverloadShare).toBe(0.3);
    // the request-aware picker defaults to band, whatever the service's body-blind picker
    expect(c.picker).toBe(PICKER_BAND);
    expect(r.config!.loadAware.services[0].picker).toBe(PICKER_P2C);
  });
  it("request.decodeIdleShare: read in 0..1", () => {
    const r = parseConfig(withRequest('{"allowOnHeadersStopIteration":true,"decodeIdleShare":0.3}'));
    expect(r.error).toBe("");
    expect(r.config!.loadAware.services[0].request!.decodeIdleShare).toBe(0.3);
  });
  it("request.picker: p2c or band; anything else names the field", () => {
    const p = parseConfig(withRequest('{"allowOnHeadersStopIteration":true,"picker":"p2c"}'));
    expect(p.error).toBe("");
    expect(p.config!.loadAware.services[0].request!.picker).toBe(PICKER_P2C);
    const bad = parseConfig(withRequest('{"allowOnHeadersStopIteration":true,"picker":"argmin"}'));
    expect(bad.error.includes("loadAware.services[0].request.picker: must be one of band, p2c")).toBe(true);
  });
  it("reads the vLLM priority per criticality (request.priority)", () => {
    const r = parseConfig(withRequest('{"allowOnHeadersStopIteration":true,"priority":{"critical":-5,"standard":0,"sheddable":7}}'));
    expect(r.error).toBe("");
    const c = r.config!.loadAware.services[0].request!;
    expect(c.priorityOn).toBe(true);
    expect(c.priorities[CRIT_CRITICAL]).toBe(-5);
    expect(c.priorities[CRIT_STANDARD]).toBe(0);
    expect(c.priorities[CRIT_SHEDDABLE]).toBe(7);
  });
  it("a service without a request block stays body-blind", () => {
    const r = parseConfig('{"agent":{"cluster":"a"},"link":{"services":[]},"loadAware":{"services":[{"authorities":["a.example"],"service":"s"}]}}');
    expect(r.config!.loadAware.services[0].request).toBeNull();
  });
  it("refuses the block unless the Envoy feature is stated, naming the Envoy setting", () => {
    const r = parseConfig(withRequest('{}'));
    expect(r.error.startsWith("loadAware.services[0].request.allowOnHeadersStopIteration: must be true")).toBe(true);
    expect(r.error.includes("allow_on_headers_stop_iteration")).toBe(true);
  });
  it("reads models, splits, criticality and shedding", () => {
    const r = parseConfig(withRequest('{"allowOnHeadersStopIteration":true,"onInvalid":"reject-400","criticality":"sheddable",' +
      '"shedding":{"sheddableAt":0.5,"standardAt":3,"kvSheddableAt":0.4,"kvStandardAt":0.9,"poolSheddableAt":0.3,"poolStandardAt":0.35,"overloadShare":0.5},"models":[{"name":"llama-3-8b","criticality":"critical","split":[{"to":"llama-3-8b-v2","percent":10}]},' +
      '{"name":"gpt-4o","aliasOf":"llama-3-70b"}]}'));
    expect(r.error).toBe("");
    const c = r.config!.loadAware.services[0].request!;
    expect(c.onInvalid).toBe(ON_INVALID_REJECT);
    expect(c.defaultCriticality).toBe(CRIT_SHEDDABLE);
    expect(c.shedSheddableAt).toBe(0.5);
    expect(c.shedStandardAt).toBe(3.0);
    expect(c.shedKvSheddableAt).toBe(0.4);
    expect(c.shedKvStandardAt).toBe(0.9);
    expect(c.shedPoolSheddableAt).toBe(0.3);
    expect(c.shedPoolStandardAt).toBe(0.35);
    expect(c.shedOverloadShare).toBe(0.5);
    expect(c.rule("llama-3-8b")!.criticality).toBe(CRIT_CRITICAL);
    expect(c.rule("llama-3-8b")!.split[0].basisPoints).toBe(1000);
    expect(c.rule("gpt-4o")!.aliasOf).toBe("llama-3-70b");
  });
  it("names the field of each problem", () => {
    const cases = [
      ['{"allowOnHeadersStopIteration":true,"maxBodyBytes":0}', "loadAware.services[0].request.maxBodyBytes: must be between"],
      ['{"allowOnHeadersStopIteration":true,"onInvalid":"drop"}', "loadAware.services[0].request.onInvalid: must be one of"],
      ['{"allowOnHeadersStopIteration":true,"decodeIdleShare":1.5}', "loadAware.services[0].request.decodeIdleShare: must be between"],
      ['{"allowOnHeadersStopIteration":true,"prefix":{"blockBytes":60}}', "loadAware.services[0].request.prefix.blockBytes: must be a multiple of 8"],
      ['{"allowOnHeadersStopIteration":true,"criticalityHeader":"x-request-id"}', "loadAware.services[0].request.criticalityHeader: must not be x-request-id"],
      ['{"allowOnHeadersStopIteration":true,"shedding":{"sheddableAt":2,"standardAt":1}}', "loadAware.services[0].request.shedding.standardAt: must be at least"],
      ['{"allowOnHeadersStopIteration":true,"shedding":{"kvSheddableAt":0.8}}', "loadAware.services[0].request.shedding.kvStandardAt: must be at least kvSheddableAt"],
      ['{"allowOnHeadersStopIteration":true,"shedding":{"kvStandardAt":-1}}', "loadAware.services[0].request.shedding.kvStandardAt: must be between"],
      ['{"allowOnHeadersStopIteration":true,"shedding":{"poolSheddableAt":0.5}}', "loadAware.services[0].request.shedding.poolStandardAt: must be at least poolSheddableAt"],
      ['{"allowOnHeadersStopIteration":true,"shedding":{"overloadShare":0}}', "loadAware.services[0].request.shedding.overloadShare: must be between"],
      ['{"allowOnHeadersStopIteration":true,"models":[{"name":"a","split":[{"to":"b","percent":60},{"to":"c","percent":50}]}]}', "loadAware.services[0].request.models[0].split: percentages add up"],
      ['{"allowOnHeadersStopIteration":true,"models":[{"name":"a"},{"name":"a"}]}', "loadAware.services[0].request.models[1].name: duplicate"],
      ['{"allowOnHeadersStopIteration":true,"models":[{"name":"a","aliasOf":"b","split":[{"to":"c","percent":1}]}]}', "loadAware.services[0].request.models[0]: aliasOf and split"],
      ['{"allowOnHeadersStopIteration":true,"api":"anthropic"}', "loadAware.services[0].request.api: must be one of"],
      ['{"allowOnHeadersStopIteration":true,"extra":1}', "loadAware.services[0].request.extra: unknown field"],
      ['{"allowOnHeadersStopIteration":true,"priority":{"critical":0,"standard":1}}', "loadAware.services[0].request.priority.sheddable: required"],
      ['{"allowOnHeadersStopIteration":true,"priority":{"critical":0.5,"standard":1,"sheddable":2}}', "loadAware.services[0].request.priority.critical: must be an integer"],
      ['{"allowOnHeadersStopIteration":true,"priority":{"critical":0,"standard":1,"sheddable":2,"gold":3}}', "loadAware.services[0].request.priority.gold: unknown field"],
    ];
    for (let i = 0; i < cases.length; i++) {
      const r = parseConfig(withRequest(cases[i][0]));
      expect(r.config).toBeNull();
      expect(r.error.startsWith(cases[i][1])).toBe(true, r.error);
    }
  });
});
