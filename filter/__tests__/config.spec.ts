import { parseConfig, STATUS_DEGRADED, STATUS_NORMAL } from "../assembly/lib/config";

const MINIMAL = '{"agent":{"cluster":"switchyard_agent"},"link":{"services":[{"authorities":["payment.example","*.pay.example"],"peer":"cloud-b"}]}}';

function err(json: string): string {
  const r = parseConfig(json);
  expect(r.config).toBeNull();
  return r.error;
}

describe("parseConfig", () => {
  it("applies the documented defaults", () => {
    const r = parseConfig(MINIMAL);
    expect(r.error).toBe("");
    const c = r.config!;
    expect(c.agent.cluster).toBe("switchyard_agent");
    expect(c.agent.authority).toBe("switchyard-agent");
    expect(c.agent.path).toBe("/v1/snapshot");
    expect(c.agent.pollMs).toBe(50);
    expect(c.agent.longPollMs).toBe(500);
    expect(c.agent.timeoutMs).toBe(1500);
    expect(c.refreshMs).toBe(20);
    expect(c.leaseMs).toBe(1000);
    expect(c.link.header).toBe("x-cross-cloud-status");
    expect(c.link.stalenessMs).toBe(1000);
    expect(c.link.failMode).toBe(STATUS_DEGRADED);
    expect(c.link.stripUnmatched).toBe(true);
    expect(c.link.services.length).toBe(1);
    expect(c.link.services[0].peer).toBe("cloud-b");
    expect(c.link.services[0].authorities.length).toBe(2);
  });

  it("reads every field", () => {
    const r = parseConfig('{"agent":{"cluster":"a","authority":"agent.local","path":"/snap","pollMs":100,"longPollMs":0,"timeoutMs":250},' +
      '"refreshMs":5,"leaseMs":500,"link":{"header":"x-link","stalenessMs":3000,"failMode":"normal","stripUnmatched":false,"services":[]}}');
    expect(r.error).toBe("");
    const c = r.config!;
    expect(c.agent.authority).toBe("agent.local");
    expect(c.agent.path).toBe("/snap");
    expect(c.agent.pollMs).toBe(100);
    expect(c.agent.longPollMs).toBe(0);
    expect(c.agent.timeoutMs).toBe(250);
    expect(c.refreshMs).toBe(5);
    expect(c.leaseMs).toBe(500);
    expect(c.link.header).toBe("x-link");
    expect(c.link.stalenessMs).toBe(3000);
    expect(c.link.failMode).toBe(STATUS_NORMAL);
    expect(c.link.stripUnmatched).toBe(false);
  });

  it("names the field of every problem", () => {
    expect(err("")).toBe("configuration: empty (a JSON object is required)");
    expect(err("[]")).toBe("configuration: must be a JSON object, got array");
    expect(err("{")).toBe("configuration: invalid JSON: expected a string key at offset 1");
    expect(err('{"link":{"services":[]}}')).toBe("agent: required");
    expect(err('{"agent":{},"link":{"services":[]}}')).toBe("agent.cluster: required");
    expect(err('{"agent":{"cluster":""},"link":{"services":[]}}')).toBe("agent.cluster: must not be empty");
    expect(err('{"agent":{"cluster":"a","pollMs":5},"link":{"services":[]}}')).toBe("agent.pollMs: must be between 10 and 60000");
    expect(err('{"agent":{"cluster":"a","pollMs":50.5},"link":{"services":[]}}')).toBe("agent.pollMs: must be an integer");
    expect(err('{"agent":{"cluster":"a","pollMs":"50"},"link":{"services":[]}}')).toBe("agent.pollMs: must be number, got string");
    expect(err('{"agent":{"cluster":"a","path":"snap"},"link":{"services":[]}}')).toBe("agent.path: must start with '/' and carry no query");
    expect(err('{"agent":{"cluster":"a","longPollMs":2000,"timeoutMs":1000},"link":{"services":[]}}')).toBe("agent.timeoutMs: must be greater than agent.longPollMs (2000)");
    expect(err('{"agent":{"cluster":"a","clutser":"b"},"link":{"services":[]}}')).toBe("agent.clutser: unknown field");
    expect(err('{"agent":{"cluster":"a"},"link":{"services":[]},"extra":1}')).toBe("extra: unknown field");
    expect(err('{"agent":{"cluster":"a"}}')).toBe("link: required");
    expect(err('{"agent":{"cluster":"a"},"link":{}}')).toBe("link.services: required");
    expect(err('{"agent":{"cluster":"a"},"link":{"header":"X-Status","services":[]}}')).toBe("link.header: must be a lowercase header name");
    expect(err('{"agent":{"cluster":"a"},"link":{"failMode":"open","services":[]}}')).toBe("link.failMode: must be one of degraded, normal, got \"open\"");
    expect(err('{"agent":{"cluster":"a"},"link":{"services":[{"authorities":["a.example"]}]}}')).toBe("link.services[0].peer: required");
    expect(err('{"agent":{"cluster":"a"},"link":{"services":[{"authorities":[],"peer":"b"}]}}')).toBe("link.services[0].authorities: must not be empty");
    expect(err('{"agent":{"cluster":"a"},"link":{"services":[{"peer":"b","authorities":["ok.example","Bad.Example"]}]}}'))
      .toBe("link.services[0].authorities[1]: invalid character 'B' (use lowercase host names, '*.' only as a prefix, no port)");
    expect(err('{"agent":{"cluster":"a"},"link":{"services":[{"peer":"b","authorities":["*"]}]}}'))
      .toBe("link.services[0].authorities[0]: bare '*' is not allowed; list the authorities");
    expect(err('{"agent":{"cluster":"a"},"link":{"services":[{"peer":"b","authorities":["a.example:80"]}]}}'))
      .toBe("link.services[0].authorities[0]: invalid character ':' (use lowercase host names, '*.' only as a prefix, no port)");
    expect(err('{"agent":{"cluster":"a"},"link":{"services":[{"peer":"b","authorities":[1]}]}}')).toBe("link.services[0].authorities[0]: must be string, got number");
    expect(err('{"agent":{"cluster":"a"},"link":{"services":["x"]}}')).toBe("link.services[0]: must be object, got string");
    expect(err('{"agent":{"cluster":"a"},"refreshMs":100,"leaseMs":100,"link":{"services":[]}}')).toBe("leaseMs: must be greater than refreshMs (100)");
  });

  it("reads a configuration larger than 4 KiB", () => {
    let auths = "";
    for (let i = 0; i < 300; i++) auths += (i > 0 ? "," : "") + "\"svc-" + i.toString() + ".example\"";
    const json = '{"agent":{"cluster":"a"},"link":{"services":[{"peer":"cloud-b","authorities":[' + auths + ']}]}}';
    expect(json.length).toBeGreaterThan(4096);
    const r = parseConfig(json);
    expect(r.error).toBe("");
    expect(r.config!.link.services[0].authorities.length).toBe(300);
    expect(r.config!.linkMatcher().match("svc-299.example")).toBe(0);
  });
});

describe("parseConfig loadAware", () => {
  it("is disabled when absent and reads every field when present", () => {
    expect(parseConfig(MINIMAL).config!.loadAware.enabled).toBe(false);
    const r = parseConfig('{"agent":{"cluster":"a"},"link":{"services":[]},"loadAware":{"endpointHeader":"x-ep","services":[' +
      '{"authorities":["inference.example"],"service":"llm","maxUtilization":0.9,"stalenessMs":2000,"band":0.2,"model":"mg1","picker":"band","allIneligible":"reject-503","retryAfterS":3,"debug":true}]}}');
    expect(r.error).toBe("");
    const la = r.config!.loadAware;
    expect(la.enabled).toBe(true);
    expect(la.endpointHeader).toBe("x-ep");
    expect(la.degradedHeader).toBe("x-degraded");
    const s = la.services[0];
    expect(s.service).toBe("llm");
    expect(s.maxUtilization).toBe(0.9);
    expect(s.stalenessMs).toBe(2000);
    expect(s.band).toBe(0.2);
    expect(s.model).toBe(1);
    expect(s.picker).toBe(1);
    expect(parseConfig('{"agent":{"cluster":"a"},"link":{"services":[]},"loadAware":{"services":[{"authorities":["x.example"],"service":"s"}]}}').config!.loadAware.services[0].picker).toBe(0);
    expect(s.allIneligible).toBe(1);
    expect(s.retryAfterS).toBe(3);
    expect(s.debug).toBe(true);
    expect(r.config!.loadAwareMatcher().match("inference.example:8000")).toBe(0);
  });

  it("names the field of loadAware problems", () => {
    expect(err('{"agent":{"cluster":"a"},"link":{"services":[]},"loadAware":{}}')).toBe("loadAware.services: required");
    expect(err('{"agent":{"cluster":"a"},"link":{"services":[]},"loadAware":{"services":[{"authorities":["x.example"]}]}}')).toBe("loadAware.services[0].service: required");
    expect(err('{"agent":{"cluster":"a"},"link":{"services":[]},"loadAware":{"services":[{"authorities":["x.example"],"service":"s","maxUtilization":1.5}]}}'))
      .toBe("loadAware.services[0].maxUtilization: must be between 0.01 and 1.0");
    expect(err('{"agent":{"cluster":"a"},"link":{"services":[]},"loadAware":{"services":[{"authorities":["x.example"],"service":"s","allIneligible":"drop"}]}}'))
      .toBe("loadAware.services[0].allIneligible: must be one of forward-degraded, reject-503, got \"drop\"");
    expect(err('{"agent":{"cluster":"a"},"link":{"services":[]},"loadAware":{"services":[{"authorities":["x.example"],"service":"s","model":"mm1"}]}}'))
      .toBe("loadAware.services[0].model: must be one of conditional, mg1, got \"mm1\"");
    expect(err('{"agent":{"cluster":"a"},"link":{"services":[]},"loadAware":{"endpointHeader":"x-cross-cloud-status","services":[]}}'))
      .toBe("loadAware.endpointHeader: must differ from link.header");
  });
});
