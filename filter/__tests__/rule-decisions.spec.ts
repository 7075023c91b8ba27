import { parseConfig, RulesConfig, STATUS_DEGRADED } from "../assembly/lib/config";
import {
  planRules, splitIndex, requestIdPoint, randomPoint, decisionProblem, RuleDecision, SplitTarget,
  ACTION_ROUTE, ACTION_SPLIT, ACTION_LOCAL_REPLY, ACTION_LINK_STATUS, MAX_RULE_SETS, Because,
} from "../assembly/lib/rule-decisions";

function route(set: string, authority: string, target: string, header: string = "x-switchyard-route"): RuleDecision {
  const d = new RuleDecision();
  d.set = set;
  d.authorities = [authority];
  d.routeHeader = header;
  d.version = 3;
  d.ruleId = "dc1-primary";
  d.kind = ACTION_ROUTE;
  d.target = target;
  d.sinceMs = 1000;
  return d;
}

function split(weights: Array<u32>): RuleDecision {
  const d = route("payments", "pay.example", "x");
  d.kind = ACTION_SPLIT;
  d.ruleId = "dc1-canary";
  for (let i = 0; i < weights.length; i++) d.targets.push(new SplitTarget("t" + i.toString(), weights[i]));
  return d;
}

/** `sub` when `s` contains it, else `s` itself (a failing match shows the whole message) */
function part(s: string, sub: string): string { return s.includes(sub) ? sub : s; }

function text(b: ArrayBuffer): string { return String.UTF8.decode(b); }

describe("rules configuration", () => {
  it("defaults: the filter owns x-switchyard-route, debug off, with or without a rules section", () => {
    const c = parseConfig('{"agent":{"cluster":"a"},"link":{"services":[]}}').config!;
    expect(c.rules.routeHeaders.length).toBe(1);
    expect(c.rules.routeHeaders[0]).toBe("x-switchyard-route");
    expect(c.rules.debug).toBe(false);
    const d = parseConfig('{"agent":{"cluster":"a"},"link":{"services":[]},"rules":{}}').config!;
    expect(d.rules.routeHeaders[0]).toBe("x-switchyard-route");
  });

  it("accepts declared headers and debug", () => {
    const c = parseConfig('{"agent":{"cluster":"a"},"link":{"services":[]},"rules":{"routeHeaders":["x-route-a","x-route-b"],"debug":true}}').config!;
    expect(c.rules.routeHeaders.length).toBe(2);
    expect(c.rules.routeHeaders[1]).toBe("x-route-b");
    expect(c.rules.debug).toBe(true);
  });

  it("refuses bad route headers, naming the field", () => {
    const base = '{"agent":{"cluster":"a"},"link":{"services":[]},"rules":';
    expect(part(parseConfig(base + '{"routeHeaders":[]}}').error, "rules.routeHeaders")).toBe("rules.routeHeaders");
    expect(part(parseConfig(base + '{"routeHeaders":["X-Route"]}}').error, "rules.routeHeaders[0]")).toBe("rules.routeHeaders[0]");
    expect(part(parseConfig(base + '{"routeHeaders":["host"]}}').error, "rules.routeHeaders[0]")).toBe("rules.routeHeaders[0]");
    expect(part(parseConfig(base + '{"routeHeaders":["x-a","x-a"]}}').error, "rules.routeHeaders[1]: duplicate")).toBe("rules.routeHeaders[1]: duplicate");
    expect(part(parseConfig(base + '{"routeHeaders":["x-cross-cloud-status"]}}').error, "rules.routeHeaders[0]: must differ from link.header")).toBe("rules.routeHeaders[0]: must differ from link.header");
    expect(part(parseConfig(base + '{"routeHeaders":["x-switchyard-debug"]}}').error, "must differ from loadAware.debugHeader")).toBe("must differ from loadAware.debugHeader");
    expect(part(parseConfig(base + '{"routeHeaders":["a","b","c","d","e","f","g","h","i"]}}').error, "rules.routeHeaders")).toBe("rules.routeHeaders");
    expect(part(parseConfig(base + '{"debug":"yes"}}').error, "rules.debug")).toBe("rules.debug");
    expect(part(parseConfig(base + '{"extra":1}}').error, "rules.extra")).toBe("rules.extra");
  });
});

describe("planRules", () => {
  it("plans a route: authority (and Istio short names) to pre-encoded header value", () => {
    const cfg = new RulesConfig();
    const plan = planRules(cfg, [route("payments", "payment-service.prod.svc.cluster.local", "dc2")]);
    expect(plan.size).toBe(1);
    const i = plan.matcher.match("payment-service.prod.svc.cluster.local:8080");
    expect(i).toBe(0);
    expect(plan.matcher.match("payment-service.prod")).toBe(0);
    expect(plan.matcher.match("other.example")).toBe(-1);
    expect(text(plan.applies[0].value)).toBe("dc2");
    expect(plan.applies[0].header).toBe(0);
    expect(plan.applies[0].debug).toBe("rule set=payments rule=dc1-primary version=3");
  });

  it("an empty plan matches nothing", () => {
    const plan = planRules(new RulesConfig(), []);
    expect(plan.match(String.UTF8.encode("pay.example"))).toBe(-1);
  });

  it("refuses a decision whose routeHeader is not declared, keeps the others", () => {
    const cfg = new RulesConfig();
    const plan = planRules(cfg, [route("a", "a.example", "dc1", "x-other"), route("b", "b.example", "dc1")]);
    expect(plan.size).toBe(1);
    expect(plan.refused.length).toBe(1);
    expect(part(plan.refused[0], "set a: routeHeader \"x-other\" is not declared")).toBe("set a: routeHeader \"x-other\" is not declared");
    expect(plan.refusedSets[0]).toBe("a");
    expect(plan.matcher.match("a.example")).toBe(-1);
    expect(plan.matcher.match("b.example")).toBe(0);
  });

  it("uses the index of the declared header", () => {
    const cfg = new RulesConfig();
    cfg.routeHeaders = ["x-r0", "x-r1"];
    const plan = planRules(cfg, [route("a", "a.example", "dc1", "x-r1")]);
    expect(plan.applies[0].header).toBe(1);
  });

  it("an authority bound to two sets goes to the first", () => {
    const plan = planRules(new RulesConfig(), [route("a", "x.example", "dc1"), route("b", "x.example", "dc2")]);
    expect(plan.matcher.match("x.example")).toBe(0);
  });

  it("plans at most MAX_RULE_SETS decisions", () => {
    const ds = new Array<RuleDecision>();
    for (let i = 0; i < MAX_RULE_SETS + 5; i++) ds.push(route("s" + i.toString(), "s" + i.toString() + ".example", "dc1"));
    expect(planRules(new RulesConfig(), ds).size).toBe(MAX_RULE_SETS);
  });

  it("split: cumulative weights and targets", () => {
    const plan = planRules(new RulesConfig(), [split([95, 5])]);
    const a = plan.applies[0];
    expect(a.kind).toBe(ACTION_SPLIT);
    expect(a.total).toBe(100);
    expect(a.cum[0]).toBe(95);
    expect(a.cum[1]).toBe(100);
    expect(text(a.values[1])).toBe("t1");
  });

  it("local reply and link status are pre-encoded", () => {
    const r = route("m", "m.example", "x");
    r.kind = ACTION_LOCAL_REPLY;
    r.replyStatus = 503;
    r.replyHeaderNames = ["retry-after"];
    r.replyHeaderValues = ["120"];
    r.replyBody = "down for maintenance";
    const l = route("l", "l.example", "x");
    l.kind = ACTION_LINK_STATUS;
    l.linkStatus = STATUS_DEGRADED;
    const plan = planRules(new RulesConfig(), [r, l]);
    expect(plan.applies[0].replyStatus).toBe(503);
    expect(text(plan.applies[0].replyNames[0])).toBe("retry-after");
    expect(text(plan.applies[0].replyValues[0])).toBe("120");
    expect(text(plan.applies[0].replyBody)).toBe("down for maintenance");
    expect(plan.applies[1].linkStatus).toBe(STATUS_DEGRADED);
  });
});

describe("split choice", () => {
  it("splitIndex picks the first cumulative weight above the point, skipping zero weights", () => {
    const cum = new StaticArray<u64>(3);
    cum[0] = 95; cum[1] = 95; cum[2] = 100;
    expect(splitIndex(cum, 0)).toBe(0);
    expect(splitIndex(cum, 94)).toBe(0);
    expect(splitIndex(cum, 95)).toBe(2);
    expect(splitIndex(cum, 99)).toBe(2);
  });

  it("a request id always gives the same point; different ids spread over the range", () => {
    const id = String.UTF8.encode("5f0c2b9e-2a43-4c6b-9d1e-7b1f6e0f1a22");
    expect(requestIdPoint(id, 100)).toBe(requestIdPoint(String.UTF8.encode("5f0c2b9e-2a43-4c6b-9d1e-7b1f6e0f1a22"), 100));
    let low: i32 = 0;
    for (let i = 0; i < 10000; i++) {
      if (requestIdPoint(String.UTF8.encode("req-" + i.toString()), 100) < 5) low++;
    }
    // 5 % expected: 500, binomial sd ≈ 21.8; 5 sd either side
    expect(low).toBeGreaterThan(390);
    expect(low).toBeLessThan(610);
  });

  it("randomPoint stays in range", () => {
    expect(randomPoint(0.0, 100)).toBe(0);
    expect(randomPoint(0.999999999, 100)).toBe(99);
    expect(randomPoint(0.5, 0)).toBe(0);
  });
});

describe("decisionProblem (RULES section bounds)", () => {
  it("accepts the shapes the agent publishes", () => {
    expect(decisionProblem(route("payments", "payment-service.prod.svc.cluster.local", "dc1-canary"))).toBe("");
    expect(decisionProblem(split([95, 5]))).toBe("");
  });

  it("refuses out-of-bounds decisions with a reason", () => {
    const badSet = route("-x", "a.example", "dc1");
    expect(part(decisionProblem(badSet), "set name")).toBe("set name");
    const noAuth = route("a", "a.example", "dc1");
    noAuth.authorities = [];
    expect(part(decisionProblem(noAuth), "authorities")).toBe("authorities");
    const badTarget = route("a", "a.example", "dc 1");
    expect(part(decisionProblem(badTarget), "route target")).toBe("route target");
    const zero = split([0, 0]);
    expect(part(decisionProblem(zero), "sum to 0")).toBe("sum to 0");
    const heavy = split([1000001]);
    expect(part(decisionProblem(heavy), "split weight")).toBe("split weight");
    const reply = route("a", "a.example", "x");
    reply.kind = ACTION_LOCAL_REPLY;
    reply.replyStatus = 503;
    reply.replyHeaderNames = ["x-a"];
    reply.replyHeaderValues = ["v\r\nx: y"];
    expect(part(decisionProblem(reply), "reply header 0 value")).toBe("reply header 0 value");
    reply.replyHeaderValues = ["ok"];
    reply.replyBody = "b".repeat(4097);
    expect(part(decisionProblem(reply), "reply body")).toBe("reply body");
    reply.replyBody = "";
    reply.replyStatus = 99;
    expect(part(decisionProblem(reply), "status")).toBe("status");
    const v0 = route("a", "a.example", "dc1");
    v0.version = 0;
    expect(part(decisionProblem(v0), "version")).toBe("version");
    const unknown = route("a", "a.example", "dc1");
    unknown.kind = 9;
    expect(part(decisionProblem(unknown), "unknown action kind")).toBe("unknown action kind");
  });
});

function reply(names: Array<string>, values: Array<string>): RuleDecision {
  const d = route("a", "a.example", "x");
  d.kind = ACTION_LOCAL_REPLY;
  d.replyStatus = 503;
  d.replyHeaderNames = names;
  d.replyHeaderValues = values;
  return d;
}

describe("decisionProblem: each bound inclusive, one past it refused", () => {
  it("set names: 63 characters, letters and digits first, then . _ -", () => {
    expect(decisionProblem(route("a".repeat(63), "a.example", "dc1"))).toBe("");
    expect(part(decisionProblem(route("a".repeat(64), "a.example", "dc1")), "set name")).toBe("set name");
    const ok = ["A", "Z", "a", "z", "0", "9", "a.b", "a_b", "a-b", "Z9.z_0-A"];
    for (let i = 0; i < ok.length; i++) if (decisionProblem(route(ok[i], "a.example", "dc1")) != "") throw new Error("refused set " + ok[i]);
    // the characters just outside each range, first and later
    const bad = ["@", "[", "`", "{", "/", ":", ".a", "_a", "a/", "a:", "a@", "a[", "a`", "a{", "a b", ""];
    for (let i = 0; i < bad.length; i++) if (decisionProblem(route(bad[i], "a.example", "dc1")) == "") throw new Error("accepted set " + bad[i]);
  });

  it("route and split targets: 128 characters, ':' allowed after the first", () => {
    expect(decisionProblem(route("a", "a.example", "t".repeat(128)))).toBe("");
    expect(part(decisionProblem(route("a", "a.example", "t".repeat(129))), "route target")).toBe("route target");
    expect(decisionProblem(route("a", "a.example", "Zone-9:dc_1.a"))).toBe("");
    expect(part(decisionProblem(route("a", "a.example", ":dc1")), "route target")).toBe("route target");
    expect(part(decisionProblem(route("a", "a.example", "dc/1")), "route target")).toBe("route target");
    const s = split([1]);
    s.targets[0].target = "t:1";
    expect(decisionProblem(s)).toBe("");
    s.targets[0].target = "t 1";
    expect(part(decisionProblem(s), "split target 0")).toBe("split target 0");
  });

  it("authorities, split targets, weights, rule id and because at their maxima", () => {
    const d = route("a", "a.example", "dc1");
    for (let i = 1; i < 64; i++) d.authorities.push("a" + i.toString() + ".example");
    expect(decisionProblem(d)).toBe("");
    d.authorities.push("a64.example");
    expect(part(decisionProblem(d), "authorities")).toBe("authorities");
    const w = new Array<u32>();
    for (let i = 0; i < 16; i++) w.push(1);
    const s = split(w);
    expect(decisionProblem(s)).toBe("");
    s.targets.push(new SplitTarget("t16", 1));
    expect(part(decisionProblem(s), "split targets")).toBe("split targets");
    expect(decisionProblem(split([1000000, 0]))).toBe("");
    expect(decisionProblem(split([0, 1]))).toBe("");
    const id = route("a", "a.example", "dc1");
    id.ruleId = "r".repeat(200);
    expect(decisionProblem(id)).toBe("");
    id.ruleId = "r".repeat(201);
    expect(part(decisionProblem(id), "rule id")).toBe("rule id");
    id.ruleId = "";
    expect(part(decisionProblem(id), "rule id")).toBe("rule id");
    const b = route("a", "a.example", "dc1");
    for (let i = 0; i < 64; i++) b.because.push(new Because("v" + i.toString(), true));
    expect(decisionProblem(b)).toBe("");
    b.because.push(new Because("v64", false));
    expect(part(decisionProblem(b), "because")).toBe("because");
  });

  it("local reply: status 200..599, 16 headers, values up to 1024 bytes with spaces and tabs, body up to 4096 bytes", () => {
    const d = reply(["x-a"], ["ok"]);
    d.replyStatus = 200;
    expect(decisionProblem(d)).toBe("");
    d.replyStatus = 599;
    expect(decisionProblem(d)).toBe("");
    d.replyStatus = 199;
    expect(part(decisionProblem(d), "status")).toBe("status");
    d.replyStatus = 600;
    expect(part(decisionProblem(d), "status")).toBe("status");
    const names = new Array<string>(), values = new Array<string>();
    for (let i = 0; i < 16; i++) { names.push("x-h" + i.toString()); values.push("v"); }
    const many = reply(names, values);
    expect(decisionProblem(many)).toBe("");
    many.replyHeaderNames.push("x-h16"); many.replyHeaderValues.push("v");
    expect(part(decisionProblem(many), "reply headers")).toBe("reply headers");
    const uneven = reply(["x-a", "x-b"], ["v"]);
    expect(part(decisionProblem(uneven), "reply headers")).toBe("reply headers");
    // values: the byte bound (a 2-byte character counts twice), SP and HTAB allowed, controls not
    expect(decisionProblem(reply(["x-a"], ["v".repeat(1024)]))).toBe("");
    expect(part(decisionProblem(reply(["x-a"], ["v".repeat(1025)])), "reply header 0 value")).toBe("reply header 0 value");
    expect(decisionProblem(reply(["x-a"], ["é".repeat(512)]))).toBe("");
    expect(part(decisionProblem(reply(["x-a"], ["é".repeat(512) + "v"])), "reply header 0 value")).toBe("reply header 0 value");
    expect(decisionProblem(reply(["x-a"], ["retry in 5 s\t(maintenance) ~!"]))).toBe("");
    expect(decisionProblem(reply(["x-a"], [""]))).toBe("");
    const controls = ["\x01", "\x1f", "\x7f", "a\x00b", "a\rb", "a\nb"];
    for (let i = 0; i < controls.length; i++) {
      if (decisionProblem(reply(["x-a"], [controls[i]])) == "") throw new Error("accepted control character " + i.toString());
    }
    // header names: lower-case tokens of 1..128 characters
    expect(decisionProblem(reply(["x".repeat(128)], ["v"]))).toBe("");
    expect(part(decisionProblem(reply(["x".repeat(129)], ["v"])), "reply header 0 is not")).toBe("reply header 0 is not");
    expect(part(decisionProblem(reply([""], ["v"])), "reply header 0 is not")).toBe("reply header 0 is not");
    expect(part(decisionProblem(reply(["X-A"], ["v"])), "reply header 0 is not")).toBe("reply header 0 is not");
    expect(decisionProblem(reply(["a0z9!#$%&'*+.^_`|~-"], ["v"]))).toBe("");
    expect(part(decisionProblem(reply(["x a"], ["v"])), "reply header 0 is not")).toBe("reply header 0 is not");
    const body = reply([], []);
    body.replyBody = "b".repeat(4096);
    expect(decisionProblem(body)).toBe("");
  });

  it("link status: normal or degraded only", () => {
    const d = route("a", "a.example", "dc1");
    d.kind = ACTION_LINK_STATUS;
    d.linkStatus = STATUS_DEGRADED;
    expect(decisionProblem(d)).toBe("");
    d.linkStatus = 7;
    expect(part(decisionProblem(d), "link status")).toBe("link status");
  });
});
