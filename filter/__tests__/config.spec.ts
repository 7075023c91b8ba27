import { parseConfig, STATUS_DEGRADED, STATUS_NORMAL, MAX_CONFIG_BYTES } from "../assembly/lib/config";
import { MODEL_MG1, PICKER_BAND, MODEL_CONDITIONAL, PICKER_P2C } from "../assembly/lib/choose";
import { buildRoutes } from "../assembly/lib/routes";

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
    expect(err('{"agent":{"cluster":"a","path":"snap"},"link":{"services":[]}}')).toBe("agent.path: must start with '/', carry no query or fragment, and hold only visible ASCII (no space, CR/LF or control characters; at most 1024)");
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

  it("takes leaseMs up to 600000 and names it above", () => {
    const ok = parseConfig('{"agent":{"cluster":"a"},"leaseMs":600000,"link":{"services":[]}}');
    expect(ok.error).toBe("");
    expect(ok.config!.leaseMs).toBe(600000);
    expect(err('{"agent":{"cluster":"a"},"leaseMs":600001,"link":{"services":[]}}')).toBe("leaseMs: must be between 100 and 600000");
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
    expect(s.model).toBe(MODEL_MG1);
    expect(s.picker).toBe(PICKER_BAND);
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
      .toBe("loadAware.endpointHeader: must differ from link.header (x-cross-cloud-status)");
  });
});

const LA = '{"agent":{"cluster":"a"},"link":{"services":[]},"loadAware":{';

describe("parseConfig refuses what Envoy, HTTP or the mesh own", () => {
  it("refuses reserved header names in every header field, naming the field", () => {
    const names = ["authorization", "content-length", "host", "cookie", "x-forwarded-for", "transfer-encoding", "te",
      "connection", "x-envoy-original-dst-host", "x-request-id", "proxy-authorization", "upgrade", "x-forwarded-proto", "x-b3-traceid"];
    for (let i = 0; i < names.length; i++) {
      const e1 = err('{"agent":{"cluster":"a"},"link":{"header":"' + names[i] + '","services":[]}}');
      expect(e1.startsWith("link.header: must not")).toBe(true, names[i] + ": " + e1);
      const fields = ["endpointHeader", "degradedHeader", "debugHeader"];
      for (let j = 0; j < fields.length; j++) {
        const e2 = err(LA + '"' + fields[j] + '":"' + names[i] + '","services":[]}}');
        expect(e2.startsWith("loadAware." + fields[j] + ": must not")).toBe(true, e2);
      }
    }
    expect(err('{"agent":{"cluster":"a"},"link":{"header":":authority","services":[]}}')).toBe("link.header: must be a lowercase header name");
    expect(parseConfig('{"agent":{"cluster":"a"},"link":{"header":"x-forwarded","services":[]}}').error).toBe("");
  });

  it("refuses CR/LF and control characters in agent.authority and agent.path", () => {
    const bad = ["agent\\r\\nx-evil: 1", "agent\\n", "agent\\u0000", "agent\\t", "a b", "agent:80:80", "agent:123456", "agent:", ":80", "agent/x"];
    for (let i = 0; i < bad.length; i++) {
      const e = err('{"agent":{"cluster":"a","authority":"' + bad[i] + '"},"link":{"services":[]}}');
      expect(e.startsWith("agent.authority: must be host or host:port")).toBe(true, bad[i]);
    }
    expect(parseConfig('{"agent":{"cluster":"a","authority":"agent.ns:8080"},"link":{"services":[]}}').error).toBe("");
    const badPaths = ["/v1\\r\\nx: y", "/v1\\n", "/a b", "/a\\u007f", "/a#f", "/a?b", "/\\u00e9", "v1"];
    for (let i = 0; i < badPaths.length; i++) {
      const e = err('{"agent":{"cluster":"a","path":"' + badPaths[i] + '"},"link":{"services":[]}}');
      expect(e.startsWith("agent.path: must start with '/'")).toBe(true, badPaths[i]);
    }
    expect(err('{"agent":{"cluster":"a","path":"/' + "p".repeat(1024) + '"},"link":{"services":[]}}').startsWith("agent.path")).toBe(true);
    expect(parseConfig('{"agent":{"cluster":"a","path":"/v1/snap-shot_x.~!$&()*+,;=:@%20"},"link":{"services":[]}}').error).toBe("");
  });

  it("refuses cluster and peer names the schema refuses", () => {
    expect(err('{"agent":{"cluster":"a b"},"link":{"services":[]}}')).toBe("agent.cluster: must be 1-255 characters of letters, digits and _ . : | -");
    expect(err('{"agent":{"cluster":"' + "c".repeat(256) + '"},"link":{"services":[]}}').startsWith("agent.cluster")).toBe(true);
    expect(parseConfig('{"agent":{"cluster":"outbound|9000||agent.ns.svc.cluster.local"},"link":{"services":[]}}').error).toBe("");
    expect(err('{"agent":{"cluster":"a"},"link":{"services":[{"authorities":["a.example"],"peer":"-b"}]}}'))
      .toBe("link.services[0].peer: must be 1-63 letters, digits, '.', '_', '-', starting with a letter or digit");
    expect(err('{"agent":{"cluster":"a"},"link":{"services":[{"authorities":["a.example"],"peer":"' + "p".repeat(64) + '"}]}}').startsWith("link.services[0].peer")).toBe(true);
    expect(parseConfig('{"agent":{"cluster":"a"},"link":{"services":[{"authorities":["a.example"],"peer":"' + "p".repeat(63) + '"}]}}').error).toBe("");
  });

  it("holds the cross-field and range boundaries", () => {
    expect(err('{"agent":{"cluster":"a","longPollMs":1000,"timeoutMs":1000},"link":{"services":[]}}')).toBe("agent.timeoutMs: must be greater than agent.longPollMs (1000)");
    expect(parseConfig('{"agent":{"cluster":"a","longPollMs":1000,"timeoutMs":1001},"link":{"services":[]}}').error).toBe("");
    expect(err('{"agent":{"cluster":"a"},"link":{"stalenessMs":0,"services":[]}}')).toBe("link.stalenessMs: must be between 1 and 3600000");
    expect(parseConfig('{"agent":{"cluster":"a"},"link":{"stalenessMs":1,"services":[]}}').error).toBe("");
  });
});

describe("parseConfig bounds and cost", () => {
  it("bounds the number of services and authorities, and the size", () => {
    const svcs = new Array<string>();
    for (let i = 0; i < 1001; i++) svcs.push('{"authorities":["s' + i.toString() + '.example"],"peer":"p"}');
    expect(err('{"agent":{"cluster":"a"},"link":{"services":[' + svcs.join(",") + ']}}')).toBe("link.services: at most 1000 entries, got 1001");
    svcs.pop();
    expect(parseConfig('{"agent":{"cluster":"a"},"link":{"services":[' + svcs.join(",") + ']}}').error).toBe("");
    const auths = new Array<string>();
    for (let i = 0; i < 1001; i++) auths.push('"a' + i.toString() + '.example"');
    expect(err(LA + '"services":[{"service":"s","authorities":[' + auths.join(",") + ']}]}}')).toBe("loadAware.services[0].authorities: at most 1000 entries, got 1001");
    const big = '{"agent":{"cluster":"a"},"link":{"services":[]},"pad":"' + "x".repeat(MAX_CONFIG_BYTES) + '"}';
    expect(err(big)).toBe("configuration: larger than 1048576 bytes");
  });

  it("refuses 80,000 keys and accepts 10,000 wildcard authorities quickly (linear parse and build)", () => {
    const keys = new Array<string>();
    for (let i = 0; i < 80000; i++) keys.push('"k' + i.toString() + '":1');
    expect(err('{"agent":{"cluster":"a"},"link":{"services":[]},' + keys.join(",") + "}")).toBe("k0: unknown field");
    const svcs = new Array<string>();
    for (let i = 0; i < 10; i++) {
      const a = new Array<string>();
      for (let j = 0; j < 1000; j++) a.push('"*.w' + i.toString() + "-" + j.toString() + '.example"');
      svcs.push('{"peer":"p","authorities":[' + a.join(",") + "]}");
    }
    const r = parseConfig('{"agent":{"cluster":"a"},"link":{"services":[' + svcs.join(",") + "]}}");
    expect(r.error).toBe("");
    const routes = buildRoutes(r.config!);
    expect(routes.link[routes.match(String.UTF8.encode("x.w9-999.example"))]).toBe(9);
  });
});
