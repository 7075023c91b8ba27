// Request-aware choice units: model filter and LoRA affinity, the size and prefix scorers, the
// request scoring pass with KV-cache saturation, shedding by criticality, model aliases/splits.
import { RecentSends } from "../assembly/lib/recent-sends";
import { Snapshot, InstanceState } from "../assembly/lib/snapshot";
import { InstanceLlm, MODEL_BASE, MODEL_LOADED, MODEL_WAITING } from "../assembly/lib/snapshot-llm";
import { Candidate, candidateFrom, Plan, MODEL_CONDITIONAL, PICKER_P2C } from "../assembly/lib/choose";
import { LlmPlan, buildLlmPlan } from "../assembly/lib/choice/plan-llm";
import { modelCostMs } from "../assembly/lib/choice/filter-model";
import { serviceMs } from "../assembly/lib/choice/scorer-size";
import { prefixKeep, cachedTokens } from "../assembly/lib/choice/scorer-prefix";
import { RequestCost, CostParams, scoreRequest } from "../assembly/lib/choice/score-request";
import { pickForRequest, RequestPick } from "../assembly/lib/choose-request";
import { CRIT_CRITICAL, CRIT_STANDARD, CRIT_SHEDDABLE, criticalityOf, resolveCriticality, shouldShed, loadAt, poolLoadAt } from "../assembly/lib/criticality";
import { OverloadShares, growthEvidence, EVIDENCE_HOLD_MS, EPISODE_MS } from "../assembly/lib/overload";

function live1(): Map<string, i32> {
  const m = new Map<string, i32>();
  m.set("m", 0);
  return m;
}

/** cost parameters with shedding out of the way (every threshold 100) */
function noShed(): CostParams {
  const cp = new CostParams();
  cp.shed.set(100, 100, 100, 100, Infinity, Infinity, 0.2);
  return cp;
}

/** shouldShed on raw pressures: the chosen instance's, the pool's least, and the two thresholds */
function shed(crit: i32, pressure: f64, pool: f64, sheddableAt: f64, standardAt: f64, overloaded: bool = true): bool {
  return shouldShed(crit, overloaded, loadAt(pressure, sheddableAt), loadAt(pressure, standardAt), loadAt(pool, sheddableAt));
}
import { routeModel, basisPointsOf } from "../assembly/lib/request/model-route";
import { ModelRule, ModelSplit, RequestConfig } from "../assembly/lib/request/config";
import { Rng } from "../assembly/lib/inflight";
import { PendingPrefill } from "../assembly/lib/pending-prefill";
import { LlmFixture, snapOf } from "./llm-fixture";
import { apiOfPath } from "../assembly/lib/request/endpoint";
import { API_CHAT, API_COMPLETIONS, parseOpenAiRequest, ParseLimits } from "../assembly/lib/request/openai";
import { withModel, withPriority, jsonEscape } from "../assembly/lib/request/rewrite";

function inst(addr: string, q: f32 = 0, slots: u16 = 1): InstanceState {
  const s = new InstanceState();
  s.service = "llm"; s.addr = addr; s.healthy = true; s.rho = 0.3; s.esMs = 100; s.es2Ms2 = 20000; s.queueDepth = q; s.slots = slots;
  return s;
}

function llm(addr: string, models: Array<string>, flags: Array<u8>, prefill: f32 = NaN, decode: f32 = NaN, kv: f32 = NaN, maxLoras: u16 = 0): InstanceLlm {
  const l = new InstanceLlm();
  l.service = "llm"; l.addr = addr; l.models = models; l.modelFlags = flags;
  l.prefillMsPerToken = prefill; l.decodeMsPerToken = decode; l.kvCacheUsage = kv; l.maxLoras = maxLoras;
  return l;
}

class Fixture extends LlmFixture {}

function cost(n: i32): RequestCost {
  const rc = new RequestCost();
  rc.cachedBlocks = new StaticArray<i32>(n);
  rc.promptTokens = 1000;
  rc.outTokens = 100;
  return rc;
}

function adapterFleet(): Fixture {
  const snap = snapOf([inst("10.0.0.1:80"), inst("10.0.0.2:80"), inst("10.0.0.3:80"), inst("10.0.0.4:80")], [
    llm("10.0.0.1:80", ["llama-3-8b", "sql-lora", "chat-lora"], [MODEL_BASE, MODEL_LOADED, 0], NaN, NaN, NaN, 2),
    llm("10.0.0.2:80", ["llama-3-8b", "chat-lora"], [MODEL_BASE, MODEL_LOADED | MODEL_WAITING], NaN, NaN, NaN, 1),
    llm("10.0.0.3:80", ["llama-3-8b", "sql-lora"], [MODEL_BASE, MODEL_WAITING], NaN, NaN, NaN, 4),
    llm("10.0.0.4:80", ["mistral-7b"], [MODEL_BASE]),
  ]);
  return new Fixture(snap);
}

function sizeFleet(): Fixture {
  const snap = snapOf([inst("10.0.0.1:80"), inst("10.0.0.2:80"), inst("10.0.0.3:80")], [
    llm("10.0.0.1:80", ["m"], [MODEL_BASE], 0.2, 20, 0.3),
    llm("10.0.0.2:80", ["m"], [MODEL_BASE], 0.2, 20, 0.3),
    llm("10.0.0.3:80", ["m"], [MODEL_BASE], 0.1, 20, 0.3),
  ]);
  return new Fixture(snap);
}

describe("filter-model: model and LoRA affinity", () => {

  it("restricts a base model to the instances that serve it", () => {
    const f = adapterFleet();
    const col = f.lp.modelColumn("llama-3-8b");
    expect(col).toBeGreaterThanOrEqual(0);
    expect(modelCostMs(f.lp, col, 0, 200)).toBe(0.0);
    expect(modelCostMs(f.lp, col, 1, 200)).toBe(0.0);
    expect(modelCostMs(f.lp, col, 3, 200)).toBe(Infinity);
    expect(f.lp.modelColumn("gpt-4")).toBe(-1);
  });

  it("prefers a loaded adapter, then one being loaded, then room to load it; an instance at capacity is out", () => {
    const f = adapterFleet();
    const sql = f.lp.modelColumn("sql-lora");
    expect(modelCostMs(f.lp, sql, 0, 200)).toBe(0.0);       // loaded
    expect(modelCostMs(f.lp, sql, 2, 200)).toBe(200.0);     // waiting: being loaded
    expect(modelCostMs(f.lp, sql, 1, 200)).toBe(Infinity);  // 1 of 1 adapter slots used
    expect(modelCostMs(f.lp, sql, 3, 200)).toBe(Infinity);  // no LoRA capacity known
    const chat = f.lp.modelColumn("chat-lora");
    expect(modelCostMs(f.lp, chat, 0, 200)).toBe(200.0);    // listed, 1 of 2 used: room to load
    const math = f.lp.modelColumn("math-lora");
    expect(math).toBe(-1);                                   // no instance lists it
    expect(modelCostMs(f.lp, sql, 1, 200)).toBe(Infinity);  // does not list sql-lora
  });

  it("an adapter waiting where every LoRA slot is held by running adapters waits for a drain: + E[S]", () => {
    // instance 0: 2 slots, sql-lora and chat-lora running, code-lora waiting (vLLM skips it until
    // a running adapter's requests have all finished); instance 1: code-lora waiting, a slot free
    const f = new Fixture(snapOf([inst("10.0.0.1:80"), inst("10.0.0.2:80")], [
      llm("10.0.0.1:80", ["llama-3-8b", "sql-lora", "chat-lora", "code-lora"], [MODEL_BASE, MODEL_LOADED, MODEL_LOADED, MODEL_WAITING], NaN, NaN, NaN, 2),
      llm("10.0.0.2:80", ["llama-3-8b", "sql-lora", "code-lora"], [MODEL_BASE, MODEL_LOADED, MODEL_WAITING], NaN, NaN, NaN, 2),
    ]));
    const code = f.lp.modelColumn("code-lora");
    expect(modelCostMs(f.lp, code, 0, 200)).toBe(300.0);    // 200 + E[S] 100: no slot free
    expect(modelCostMs(f.lp, code, 1, 200)).toBe(200.0);    // being loaded
    expect(modelCostMs(f.lp, f.lp.modelColumn("sql-lora"), 0, 200)).toBe(0.0);
  });

  it("the request pass sends an adapter request to the instance that has it loaded", () => {
    const f = adapterFleet();
    const rc = cost(4);
    rc.modelCol = f.lp.modelColumn("sql-lora");
    const out = new RequestPick();
    for (let k = 0; k < 20; k++) {
      // one decision each: a pick charges its prefill to the instance chosen, and is a send the
      // next one expects behind it (recent-sends.ts)
      f.pending = new PendingPrefill();
      rc.recent = new RecentSends();
      pickForRequest(f.plan, f.lp, f.inflight, f.pending, 0, 0, 0.1, new Rng(k + 1), rc, new CostParams(), CRIT_STANDARD, out);
      expect(out.pick.index).toBe(0);
    }
    expect(rc.modelExcluded).toBe(2);
  });

  it("a request-aware pick is never replaced by the in-band probe (it would ignore the model filter)", () => {
    const f = adapterFleet();
    const rc = cost(4);
    rc.modelCol = f.lp.modelColumn("mistral-7b");
    const out = new RequestPick();
    f.plan.result.probe = true;
    pickForRequest(f.plan, f.lp, f.inflight, f.pending, 0, 0, 0.1, new Rng(3), rc, new CostParams(), CRIT_STANDARD, out);
    expect(out.pick.index).toBe(3);
    expect(out.pick.probe).toBe(false);
    // the body-blind pick keeps the probe
    expect(f.plan.result.reset().probe).toBe(true);
  });

  it("no LLM data: no restriction", () => {
    const g = new Fixture(snapOf([inst("10.0.0.1:80"), inst("10.0.0.2:80")], []));
    expect(g.lp.hasData).toBe(false);
    const rc = cost(2);
    rc.modelCol = 0;
    const sc = scoreRequest(g.plan, g.lp, g.inflight.dataStart, g.pending, 0, rc, new CostParams());
    expect(sc.eligible).toBe(2);
  });
});

describe("scorer-size and scorer-prefix", () => {
  it("prices prompt and output tokens with the instance's per-token times", () => {
    expect(serviceMs(1000, 0, 100, 0.2, 20, 0.1, 500)).toBeCloseTo(2200);
    expect(serviceMs(1000, 600, 100, 0.2, 20, 0.1, 500)).toBeCloseTo(2080);
    expect(serviceMs(1000, 5000, 100, 0.2, 20, 0.1, 500)).toBeCloseTo(2000); // cached capped at the prompt
  });
  it("falls back to E[S] less the saved prefill, floored at a tenth of E[S]", () => {
    expect(serviceMs(1000, 0, 100, NaN, NaN, 0.1, 500)).toBe(500.0);
    expect(serviceMs(1000, 1000, 100, NaN, NaN, 0.1, 500)).toBeCloseTo(400);
    expect(serviceMs(1000, 1000, 100, NaN, NaN, 1, 500)).toBeCloseTo(50);
    expect(serviceMs(1000, 1000, 100, 0.3, NaN, 0.1, 500)).toBeCloseTo(200); // known prefill, unknown decode
  });
  it("discounts a remembered prefix as the KV cache fills", () => {
    expect(prefixKeep(NaN, 0.95)).toBe(1.0);
    expect(prefixKeep(0.5, 0.95)).toBe(1.0);
    expect(prefixKeep(0.75, 0.95)).toBe(1.0); // full up to kvFull − 0.2 inclusive, exactly
    expect(prefixKeep(0.85, 0.95)).toBeCloseTo(0.5);
    expect(prefixKeep(0.95, 0.95)).toBe(0.0);
    expect(cachedTokens(4, 64, 4, 0.5, 0.95)).toBe(64.0);
    expect(cachedTokens(0, 64, 4, 0.5, 0.95)).toBe(0.0);
  });
});

describe("plan-llm: what an instance's LLM numbers mean", () => {
  it("KV-cache use in [0, 1] is known, ends included; outside it or NaN is unknown", () => {
    const kvs: f32[] = [0, 1, 0.5, <f32>1.01, <f32>-0.01, NaN];
    const inst4 = new Array<InstanceState>(), recs = new Array<InstanceLlm>();
    for (let i = 0; i < kvs.length; i++) {
      const a = "10.0.0." + (i + 1).toString() + ":80";
      inst4.push(inst(a));
      recs.push(llm(a, ["m"], [MODEL_BASE], 0.2, 20, kvs[i]));
    }
    const f = new Fixture(snapOf(inst4, recs));
    expect(f.lp.kv[0]).toBe(0.0);
    expect(f.lp.kv[1]).toBe(1.0);
    expect(f.lp.kv[2]).toBe(0.5);
    expect(isNaN(f.lp.kv[3])).toBe(true);
    expect(isNaN(f.lp.kv[4])).toBe(true);
    expect(isNaN(f.lp.kv[5])).toBe(true);
  });

  it("LoRA room: -1 unknown (no record, or no maxLoras), else free adapter slots floored at 0 (full)", () => {
    const f = new Fixture(snapOf([inst("10.0.0.1:80"), inst("10.0.0.2:80"), inst("10.0.0.3:80"), inst("10.0.0.4:80"), inst("10.0.0.5:80")], [
      llm("10.0.0.2:80", ["b", "x"], [MODEL_BASE, MODEL_LOADED], NaN, NaN, NaN, 0),
      llm("10.0.0.3:80", ["b", "x", "y"], [MODEL_BASE, MODEL_LOADED, MODEL_LOADED], NaN, NaN, NaN, 2),
      llm("10.0.0.4:80", ["b", "x"], [MODEL_BASE, MODEL_LOADED], NaN, NaN, NaN, 3),
      llm("10.0.0.5:80", ["b", "x", "y", "z"], [MODEL_LOADED, MODEL_LOADED, MODEL_LOADED, MODEL_LOADED], NaN, NaN, NaN, 2),
    ]));
    expect(f.lp.loraRoom[0]).toBe(-1);
    expect(f.lp.loraRoom[1]).toBe(-1);
    expect(f.lp.loraRoom[2]).toBe(0);
    expect(f.lp.loraRoom[3]).toBe(2);
    expect(f.lp.loraRoom[4]).toBe(0);
    // no record at all: every per-token time unknown too
    expect(isNaN(f.lp.prefillMs[0])).toBe(true);
    expect(isNaN(f.lp.decodeMs[0])).toBe(true);
    expect(isNaN(f.lp.kv[0])).toBe(true);
  });
});

describe("score-request: size, prefix and KV cache in one pass", () => {

  it("prefill at the pool's rate (the median of the measured ones, one engine model); a cached prefix takes it off", () => {
    const f = sizeFleet();
    const rc = cost(3);
    rc.modelCol = 0;
    rc.promptTokens = 4000;
    const sc = scoreRequest(f.plan, f.lp, f.inflight.dataStart, f.pending, 0, rc, new CostParams());
    expect(sc.eligible).toBe(3);
    // 0.2, 0.2, 0.1 ms/token measured: 0.2 for every one (an instance's own window is interference,
    // docs/inference-llm.md "One price in ms"); + 100 output tokens × 20 ms on an idle batch of
    // 1 slot: occupancy (1 + 0)/(1 + 1)
    expect(f.lp.prefillMs[2]).toBeCloseTo(0.2);
    expect(f.plan.cost[2]).toBeCloseTo(800 + 1000);
    expect(f.plan.cost[0]).toBeCloseTo(800 + 1000);
    // 250 blocks of 64 B = 4000 tokens cached at instance 0: no prefill left there
    rc.cachedBlocks[0] = 250;
    scoreRequest(f.plan, f.lp, f.inflight.dataStart, f.pending, 0, rc, new CostParams());
    expect(f.plan.cost[0]).toBeCloseTo(1000);
    expect(rc.affinity).toBe(0);
  });

  it("a near-full KV cache takes the prefix's value away", () => {
    const g = new Fixture(snapOf([inst("10.0.0.1:80"), inst("10.0.0.2:80")], [
      llm("10.0.0.1:80", ["m"], [MODEL_BASE], 0.2, 20, 0.96),
      llm("10.0.0.2:80", ["m"], [MODEL_BASE], 0.2, 20, 0.3),
    ]));
    const rc = cost(2);
    rc.modelCol = 0;
    rc.cachedBlocks[0] = 250;
    rc.promptTokens = 4000;
    scoreRequest(g.plan, g.lp, g.inflight.dataStart, g.pending, 0, rc, new CostParams());
    expect(g.plan.cost[0]).toBeCloseTo(g.plan.cost[1]);
    expect(rc.pressure).toBe(0.0); // instance 1 is idle; instance 0 alone would count as full
  });

  it("continuous batching: no wait while a slot is free, E[S]/c per request from the full batch on, decode priced on the batch joined", () => {
    // 4 slots each (E[S] 100 ms: 25 ms per slot), prefill 0.2 ms/token, 20 ms per output token
    const g = new Fixture(snapOf([inst("10.0.0.1:80", 2, 4), inst("10.0.0.2:80", 4, 4), inst("10.0.0.3:80", 6, 4)], [
      llm("10.0.0.1:80", ["m"], [MODEL_BASE], 0.2, 20, 0.3),
      llm("10.0.0.2:80", ["m"], [MODEL_BASE], 0.2, 20, 0.3),
      llm("10.0.0.3:80", ["m"], [MODEL_BASE], 0.2, 20, 0.3),
    ]));
    const rc = cost(3);
    rc.modelCol = 0;
    scoreRequest(g.plan, g.lp, g.inflight.dataStart, g.pending, 0, rc, new CostParams());
    expect(g.plan.cost[0]).toBeCloseTo(200 + 2000 * 3.0 / 5.0);            // 2 of 4 slots busy: no wait
    expect(g.plan.cost[1]).toBeCloseTo(200 + 2000 + 25);                     // batch full: it waits for one to finish
    expect(g.plan.cost[2]).toBeCloseTo(200 + 2000 + 3 * 25);                 // and for the 2 beyond the slots
    // our own in-flight requests join the backlog like the scraped ones
    g.inflight[0] = 2;
    scoreRequest(g.plan, g.lp, g.inflight.dataStart, g.pending, 0, rc, new CostParams());
    expect(g.plan.cost[0]).toBeCloseTo(200 + 2000 + 25);
  });

  it("decode: the pool's time per token on the occupancy by default; with decodeIdleShare an idle batch still costs that share", () => {
    expect(new CostParams().decodeIdleShare).toBe(new RequestConfig().decodeIdleShare);
    expect(new RequestConfig().decodeIdleShare).toBe(0.0);
    // 20 slots each, measured 10 and 6.25 ms per output token: the pool's 8.125 for both (no decode
    // line published: the occupancy rule); an idle batch and one with 5 requests running
    const g = new Fixture(snapOf([inst("10.0.0.1:80", 0, 20), inst("10.0.0.2:80", 5, 20)], [
      llm("10.0.0.1:80", ["m"], [MODEL_BASE], 0.1, 10, 0.3),
      llm("10.0.0.2:80", ["m"], [MODEL_BASE], 0.1, 6.25, 0.3),
    ]));
    const rc = cost(2);
    rc.modelCol = 0;
    rc.promptTokens = 100;
    scoreRequest(g.plan, g.lp, g.inflight.dataStart, g.pending, 0, rc, new CostParams());
    expect(g.plan.cost[0]).toBeCloseTo(10 + 812.5 / 21);
    expect(g.plan.cost[1]).toBeCloseTo(10 + 812.5 * 6 / 21);
    expect(g.plan.cost[0]).toBeLessThan(g.plan.cost[1]);
    // with a floor of 0.3
    const floor = new CostParams();
    floor.decodeIdleShare = 0.3;
    scoreRequest(g.plan, g.lp, g.inflight.dataStart, g.pending, 0, rc, floor);
    expect(g.plan.cost[0]).toBeCloseTo(10 + 812.5 * (0.3 + 0.7 / 21));
    expect(g.plan.cost[1]).toBeCloseTo(10 + 812.5 * (0.3 + 0.7 * 6 / 21));
    // a full batch pays the whole time per token whatever the share (and, full, waits for a slot:
    // E[S] 100 ms / 20 slots)
    g.inflight[1] = 15;
    scoreRequest(g.plan, g.lp, g.inflight.dataStart, g.pending, 0, rc, floor);
    expect(g.plan.cost[1]).toBeCloseTo(10 + 812.5 + 5);
    scoreRequest(g.plan, g.lp, g.inflight.dataStart, g.pending, 0, rc, new CostParams());
    expect(g.plan.cost[1]).toBeCloseTo(10 + 812.5 + 5);
  });

  it("the prefill this proxy sent ahead is waited for, and elapses with time", () => {
    const f = sizeFleet();
    const rc = cost(3);
    rc.modelCol = 0;
    const out = new RequestPick();
    f.pending.grow(3);
    // critical: the cheapest, instance 2 (three instances priced alike at the pool's 0.2 ms/token:
    // 200 ms for 1000 tokens; instance 2 measured 0.1 itself, which critical requests' pick adds: picker-calm.ts)
    pickForRequest(f.plan, f.lp, f.inflight, f.pending, 1000, 0, 0.1, new Rng(1), rc, new CostParams(), CRIT_CRITICAL, out);
    expect(out.pick.index).toBe(2);
    expect(f.pending.own[2]).toBeCloseTo(1200);
    scoreRequest(f.plan, f.lp, f.inflight.dataStart, f.pending, 1000, rc, new CostParams());
    // the wait, the delay its prefill adds to the request ahead (a miss: all its prompt uncached),
    // and to those expected behind it while it waits and computes: this VM sent one within one
    // whole prefill (200 ms), all the prefill it sent went to instance 2, so 1 per 200 ms there
    // over its 200 + 200 ms to first token, 2 requests (recent-sends.ts arrivalsAt)
    expect(f.plan.cost[2]).toBeCloseTo(200 + 1000 + 2 * 200 + 2 * 200);
    scoreRequest(f.plan, f.lp, f.inflight.dataStart, f.pending, 1100, rc, new CostParams());
    expect(f.plan.cost[2]).toBeCloseTo(200 + 1000 + 2 * 100 + 1.5 * 200);
    scoreRequest(f.plan, f.lp, f.inflight.dataStart, f.pending, 1300, rc, new CostParams());
    expect(f.plan.cost[2]).toBeCloseTo(200 + 1000);
    // a second request queues behind the first: its prefill adds to the end of the first's
    pickForRequest(f.plan, f.lp, f.inflight, f.pending, 1000, 0, 0.1, new Rng(1), rc, new CostParams(), CRIT_CRITICAL, out);
    expect(f.pending.own[out.pick.index]).toBeGreaterThan(1000);
    // a shed request charges nothing
    const before = f.pending.own[0] + f.pending.own[1] + f.pending.own[2];
    const busy = new Fixture(snapOf([inst("10.0.0.1:80", 5)], [llm("10.0.0.1:80", ["m"], [MODEL_BASE], 0.2, 20, 0.3)]));
    const rb = cost(1);
    rb.modelCol = 0;
    pickForRequest(busy.plan, busy.lp, busy.inflight, busy.pending, 1000, 0, 0.1, new Rng(1), rb, new CostParams(), CRIT_SHEDDABLE, out);
    expect(out.shed).toBe(true);
    expect(busy.pending.aheadMs(0, 1000)).toBe(0.0);
    expect(f.pending.own[0] + f.pending.own[1] + f.pending.own[2]).toBe(before);
  });

  it("the prefill other worker VMs sent ahead (as of the last exchange) adds to this VM's", () => {
    const f = sizeFleet();
    const rc = cost(3);
    rc.modelCol = 0;
    f.pending.grow(3);
    f.pending.others[1] = 1300;               // another VM's prefill on instance 1 done at 1300
    scoreRequest(f.plan, f.lp, f.inflight.dataStart, f.pending, 1000, rc, new CostParams());
    expect(f.plan.cost[1]).toBeCloseTo(200 + 1000 + 2 * 300);
    expect(f.plan.cost[0]).toBeCloseTo(200 + 1000);
    f.pending.charge(1, 1000, 100);           // and this VM's own on top
    scoreRequest(f.plan, f.lp, f.inflight.dataStart, f.pending, 1000, rc, new CostParams());
    // the wait (400) and the delay behind: this VM's one request ahead (its mean charge, 100 ms) and
    // the other VM's 300 ms as 1.5 requests this size (200 ms of prefill), each delayed by its 200 ms
    // prefill (before round 7: 400 ms as 2 requests this size, 200 + 1000 + 2 × 400)
    expect(f.plan.cost[1]).toBeCloseTo(200 + 1000 + 400 + 200 * (1 + 1.5));
    // with it, a critical request (the cheapest) goes to instance 0, not 1
    const out = new RequestPick();
    f.pending.own[2] = 1500;
    pickForRequest(f.plan, f.lp, f.inflight, f.pending, 1000, 0, 0.1, new Rng(1), rc, new CostParams(), CRIT_CRITICAL, out);
    expect(out.pick.index).toBe(0);
  });

  it("a KV cache near full counts as pressure 1, a full one as 2", () => {
    const g = new Fixture(snapOf([inst("10.0.0.1:80"), inst("10.0.0.2:80"), inst("10.0.0.3:80"), inst("10.0.0.4:80")], [
      llm("10.0.0.1:80", ["m"], [MODEL_BASE], 0.2, 20, 0.3),
      llm("10.0.0.2:80", ["m"], [MODEL_BASE], 0.2, 20, 0.74),
      llm("10.0.0.3:80", ["m"], [MODEL_BASE], 0.2, 20, 0.8),
      llm("10.0.0.4:80", ["m"], [MODEL_BASE], 0.2, 20, 0.96),
    ]));
    const rc = cost(4);
    rc.modelCol = 0;
    scoreRequest(g.plan, g.lp, g.inflight.dataStart, g.pending, 0, rc, new CostParams());
    expect(rc.pressureOf[0]).toBe(0.0);
    expect(rc.pressureOf[1]).toBe(0.0);
    expect(rc.pressureOf[2]).toBe(1.0);
    expect(rc.pressureOf[3]).toBe(2.0);
    expect(rc.pressure).toBe(0.0);
  });

  it("shedding is judged on the instance the request would go to, not on the pool's least loaded one", () => {
    // instance 0: the cheapest (fast prefill) but its KV cache is full; instance 1 idle and slow
    const g = new Fixture(snapOf([inst("10.0.0.1:80"), inst("10.0.0.2:80")], [
      llm("10.0.0.1:80", ["m"], [MODEL_BASE], 0.01, 20, 0.97),
      llm("10.0.0.2:80", ["m"], [MODEL_BASE], 2, 20, 0.1),
    ]));
    const rc = cost(2);
    rc.modelCol = 0;
    const out = new RequestPick();
    // band picker, band 0: the cheapest (a sheddable request: standard ones are shed only while
    // the servers show the pool overloaded, lib/overload.ts)
    pickForRequest(g.plan, g.lp, g.inflight, g.pending, 0, 1, 0, new Rng(1), rc, new CostParams(), CRIT_SHEDDABLE, out);
    expect(rc.pressure).toBe(0.0); // the pool's least loaded instance is idle...
    expect(out.shed).toBe(true);   // ...but the request would go to the full one
    // a critical request is not shed and goes where a standard one would still be admitted: the
    // idle instance, although the full one is cheaper by the cost (picker-calm.ts)
    pickForRequest(g.plan, g.lp, g.inflight, g.pending, 0, 1, 0, new Rng(1), rc, new CostParams(), CRIT_CRITICAL, out);
    expect(out.shed).toBe(false);
    expect(out.pick.index).toBe(1);
  });

  it("critical requests: the cheapest instance under the standard threshold or the prefix holder with room; when none is, the cheapest", () => {
    // three instances with the KV capacity published (kvSeqs 10): backlog 8 / 2 / 5
    const ls = new Array<InstanceLlm>();
    const rec = (a: string): InstanceLlm => { const r = llm(a, ["m"], [MODEL_BASE], 1, 20, 0.5); r.kvSeqs = 10; return r; };
    ls.push(rec("10.0.0.1:80")); ls.push(rec("10.0.0.2:80")); ls.push(rec("10.0.0.3:80"));
    const g = new Fixture(snapOf([inst("10.0.0.1:80", 8, 64), inst("10.0.0.2:80", 2, 64), inst("10.0.0.3:80", 5, 64)], ls));
    // the cost order 0 < 2 < 1: prefill this proxy sent ahead to 1 (3 s) and 2 (1.5 s), none to 0
    const ahead = (): PendingPrefill => { const p = new PendingPrefill(); p.charge(1, 0, 3000); p.charge(2, 0, 1500); return p; };
    g.pending = ahead();
    const rc = cost(3);
    rc.modelCol = 0;
    const out = new RequestPick();
    const cp = new CostParams();
    pickForRequest(g.plan, g.lp, g.inflight, g.pending, 0, 1, 0, new Rng(1), rc, cp, CRIT_CRITICAL, out);
    // pressure = backlog ÷ kvSeqs: 0.8 / 0.2 / 0.5 against the shipped kvStandardAt 0.7
    expect(rc.pressureOf[0]).toBeCloseTo(0.8);
    expect(rc.pressureOf[2]).toBeCloseTo(0.5);
    expect(out.pick.index).toBe(2); // instance 0 is the cheapest but over; 2 is cheaper than 1
    expect(out.pick.considered).toBe(2);
    // a standard request at instance 0's pressure would be shed; at instance 2's it is not
    expect(shouldShed(CRIT_STANDARD, true, rc.shedLoadOf[0], rc.stdLoadOf[0], rc.poolShedLoad)).toBe(true);
    expect(shouldShed(CRIT_STANDARD, true, rc.shedLoadOf[2], rc.stdLoadOf[2], rc.poolShedLoad)).toBe(false);
    // the prefix holder qualifies past the standard threshold while it has room (pressure < 1)
    // (each pick charges its prefill to the instance chosen: start from none ahead each time)
    rc.cachedBlocks[0] = 16;
    g.pending = ahead();
    pickForRequest(g.plan, g.lp, g.inflight, g.pending, 0, 1, 0, new Rng(1), rc, cp, CRIT_CRITICAL, out);
    expect(rc.affinity).toBe(0);
    expect(out.pick.index).toBe(0);
    g.inflight[0] = 3;   // backlog 11 of 10: full
    g.pending = ahead();
    pickForRequest(g.plan, g.lp, g.inflight, g.pending, 0, 1, 0, new Rng(1), rc, cp, CRIT_CRITICAL, out);
    expect(out.pick.index).toBe(2);
    g.inflight[0] = 0;
    rc.cachedBlocks[0] = 0;
    // every instance over the standard threshold: the cheapest
    g.pending = ahead();
    cp.shed.set(1, 2, 0.1, 0.1, Infinity, Infinity, 0.2);
    pickForRequest(g.plan, g.lp, g.inflight, g.pending, 0, 1, 0, new Rng(1), rc, cp, CRIT_CRITICAL, out);
    expect(out.pick.index).toBe(0);
    expect(out.shed).toBe(false);
  });

  it("critical requests: an instance's own measured prefill rate prices their prefill; the others keep the pool's (llm-r14a.md)", () => {
    // two instances measure 0.1 ms per token, one 0.5 (an older GPU): the pool's median is 0.1.
    // This proxy sent 80 ms of prefill ahead to each fast one, none to the slow one.
    const g = new Fixture(snapOf([inst("10.0.0.1:80"), inst("10.0.0.2:80"), inst("10.0.0.3:80")], [
      llm("10.0.0.1:80", ["m"], [MODEL_BASE], 0.1, 20, 0.3),
      llm("10.0.0.2:80", ["m"], [MODEL_BASE], 0.1, 20, 0.3),
      llm("10.0.0.3:80", ["m"], [MODEL_BASE], 0.5, 20, 0.3),
    ]));
    expect(g.lp.prefillMs[2]).toBeCloseTo(0.1); // the pool's term, for every candidate
    expect(g.lp.prefillOwn[2]).toBeCloseTo(0.5); // its own, kept beside it
    const ahead = (): PendingPrefill => { const p = new PendingPrefill(); p.charge(0, 0, 80); p.charge(1, 0, 80); return p; };
    const rc = cost(3);
    rc.modelCol = 0;
    const out = new RequestPick();
    // a standard request (band 0) is priced on the pool's rate: the slow instance, nothing ahead
    g.pending = ahead();
    pickForRequest(g.plan, g.lp, g.inflight, g.pending, 0, 1, 0, new Rng(1), rc, noShed(), CRIT_STANDARD, out);
    expect(out.pick.index).toBe(2);
    // its 1,000 uncached tokens take 400 ms more there than the pool's rate says: the critical
    // request waits for the 80 ms ahead (and delays what is queued) on a fast instance instead
    g.pending = ahead();
    pickForRequest(g.plan, g.lp, g.inflight, g.pending, 0, 1, 0, new Rng(1), rc, noShed(), CRIT_CRITICAL, out);
    expect(rc.speedOf[2]).toBeCloseTo(400);
    expect(rc.speedOf[0]).toBeCloseTo(0);
    expect(out.pick.index).toBeLessThan(2);
    // a short prompt has little prefill to be slow at: the slow instance again
    g.pending = ahead();
    rc.promptTokens = 100;
    pickForRequest(g.plan, g.lp, g.inflight, g.pending, 0, 1, 0, new Rng(1), rc, noShed(), CRIT_CRITICAL, out);
    expect(rc.speedOf[2]).toBeCloseTo(40);
    expect(out.pick.index).toBe(2);
  });

  it("critical requests: the own rate stands out within its base model's pool, not across the service's models", () => {
    // pool a: three at 0.1, one at 0.2 (older); pool b (another model): 0.05 and 0.06, apart only by noise of their own
    const g = new Fixture(snapOf([inst("10.0.0.1:80"), inst("10.0.0.2:80"), inst("10.0.0.3:80"), inst("10.0.0.4:80"), inst("10.0.0.5:80"), inst("10.0.0.6:80")], [
      llm("10.0.0.1:80", ["a"], [MODEL_BASE], 0.1, 20, 0.3),
      llm("10.0.0.2:80", ["a"], [MODEL_BASE], 0.1, 20, 0.3),
      llm("10.0.0.3:80", ["a"], [MODEL_BASE], 0.1, 20, 0.3),
      llm("10.0.0.4:80", ["a"], [MODEL_BASE], 0.2, 20, 0.3),
      llm("10.0.0.5:80", ["b"], [MODEL_BASE], 0.05, 20, 0.3),
      llm("10.0.0.6:80", ["b"], [MODEL_BASE], 0.06, 20, 0.3),
    ]));
    // pool a: median 0.1, deviations 0 0 0 0.1, MAD 0: the older one by its whole difference
    expect(g.lp.prefillOwn[0]).toBeCloseTo(0.1);
    expect(g.lp.prefillOwn[3]).toBeCloseTo(0.2);
    // pool b: median 0.055, both 0.005 off, bound 0.015: both the pool's median, nothing to tell them apart
    expect(g.lp.prefillOwn[4]).toBeCloseTo(0.055);
    expect(g.lp.prefillOwn[5]).toBeCloseTo(0.055);
  });

  it("critical requests: an instance whose own prefill rate is unknown, or within the instances' spread, is priced at the pool's", () => {
    const g = new Fixture(snapOf([inst("10.0.0.1:80"), inst("10.0.0.2:80"), inst("10.0.0.3:80"), inst("10.0.0.4:80"), inst("10.0.0.5:80")], [
      llm("10.0.0.1:80", ["m"], [MODEL_BASE], 0.1, 20, 0.3),
      llm("10.0.0.2:80", ["m"], [MODEL_BASE], 0.11, 20, 0.3),
      llm("10.0.0.3:80", ["m"], [MODEL_BASE], 0.12, 20, 0.3),
      llm("10.0.0.4:80", ["m"], [MODEL_BASE], 0.3, 20, 0.3),
      llm("10.0.0.5:80", ["m"], [MODEL_BASE], NaN, 20, 0.3),
    ]));
    expect(isNaN(g.lp.prefillOwn[4])).toBe(true);
    const rc = cost(5);
    rc.modelCol = 0;
    const out = new RequestPick();
    pickForRequest(g.plan, g.lp, g.inflight, g.pending, 0, 1, 0, new Rng(1), rc, noShed(), CRIT_CRITICAL, out);
    // the pool's median 0.115; deviations 0.015 / 0.005 / 0.005 / 0.185: 3 × their median 0.01 is
    // the estimates' own spread: instances 0-2 are priced at the pool's, 3 by the 0.155 beyond it
    const pool = g.lp.prefillMs[0];
    expect(pool).toBeCloseTo(0.115);
    expect(rc.speedOf[0]).toBe(0.0);
    expect(rc.speedOf[1]).toBe(0.0);
    expect(rc.speedOf[2]).toBe(0.0);
    expect(rc.speedOf[3]).toBeCloseTo(1000 * (<f64>(<f32>0.3) - pool - 3 * 0.01), 1);
    expect(rc.speedOf[4]).toBe(0.0); // unknown: the pool's, never cheaper
    // no instance measured a prefill rate: the documented fallback for all, no speed term
    const h = new Fixture(snapOf([inst("10.0.0.1:80"), inst("10.0.0.2:80")], [
      llm("10.0.0.1:80", ["m"], [MODEL_BASE], NaN, 20, 0.3),
      llm("10.0.0.2:80", ["m"], [MODEL_BASE], NaN, 20, 0.3),
    ]));
    const rc2 = cost(2);
    rc2.modelCol = 0;
    pickForRequest(h.plan, h.lp, h.inflight, h.pending, 0, 1, 0, new Rng(1), rc2, noShed(), CRIT_CRITICAL, out);
    expect(rc2.speedOf[0]).toBe(0.0);
    expect(rc2.speedOf[1]).toBe(0.0);
  });

  it("critical requests avoid an instance where their adapter waits for a running adapter to drain", () => {
    // two instances, 2 LoRA slots each: on the first sql-lora and chat-lora run and code-lora waits
    // (cheaper by prefill); on the second code-lora is loaded
    const a = llm("10.0.0.1:80", ["llama-3-8b", "sql-lora", "chat-lora", "code-lora"], [MODEL_BASE, MODEL_LOADED, MODEL_LOADED, MODEL_WAITING], 1, 20, 0.3, 2);
    const b = llm("10.0.0.2:80", ["llama-3-8b", "code-lora"], [MODEL_BASE, MODEL_LOADED], 1, 20, 0.3, 2);
    const ls = new Array<InstanceLlm>(); ls.push(a); ls.push(b);
    const g = new Fixture(snapOf([inst("10.0.0.1:80", 0, 8), inst("10.0.0.2:80", 0, 8)], ls));
    g.pending.charge(1, 0, 2000);   // 2 s of prefill this proxy sent ahead to the second
    const rc = cost(2);
    rc.modelCol = g.lp.modelColumn("code-lora");
    const cp = new CostParams();
    cp.adapterLoadMs = 40;
    scoreRequest(g.plan, g.lp, g.inflight.dataStart, g.pending, 0, rc, cp);
    expect(g.plan.cost[0]).toBeLessThan(g.plan.cost[1]);   // by cost the first (40 + E[S] 100 ms < 2000 ms of prefill ahead)
    expect(rc.drainOf[0]).toBe(<u8>1);
    expect(rc.drainOf[1]).toBe(<u8>0);
    const out = new RequestPick();
    pickForRequest(g.plan, g.lp, g.inflight, g.pending, 0, 1, 0, new Rng(1), rc, cp, CRIT_CRITICAL, out);
    expect(out.pick.index).toBe(1);
    // a standard request goes by cost
    pickForRequest(g.plan, g.lp, g.inflight, g.pending, 0, 1, 0, new Rng(1), rc, cp, CRIT_STANDARD, out);
    expect(out.pick.index).toBe(0);
  });

  it("pressure: backlog per KV capacity where kvSeqs is published (the KV gauge not read), else per slot with the KV floor", () => {
    const a = llm("10.0.0.1:80", ["m"], [MODEL_BASE], 1, 20, 0.97); a.kvSeqs = 20;   // full KV gauge, capacity known
    const b = llm("10.0.0.2:80", ["m"], [MODEL_BASE], 1, 20, 0.97);                  // full KV gauge, capacity unknown
    const c = llm("10.0.0.3:80", ["m"], [MODEL_BASE], 1, 20, 0.1); c.kvSeqs = 0.5;   // out of range: unknown
    const ls = new Array<InstanceLlm>(); ls.push(a); ls.push(b); ls.push(c);
    const g = new Fixture(snapOf([inst("10.0.0.1:80", 5, 4), inst("10.0.0.2:80", 1, 4), inst("10.0.0.3:80", 3, 4)], ls));
    const rc = cost(3);
    rc.modelCol = 0;
    const cp = new CostParams();
    scoreRequest(g.plan, g.lp, g.inflight.dataStart, g.pending, 0, rc, cp);
    expect(rc.pressureOf[0]).toBeCloseTo(0.25);  // 5 / 20: the gauge's 0.97 does not count
    expect(rc.pressureOf[1]).toBe(2.0);          // 1 / 4 per slot, floored at 2 by the full KV cache
    expect(rc.pressureOf[2]).toBeCloseTo(0.75);  // 3 / 4 per slot
    // loads against the shipped thresholds: kv 0.6 / 0.7, per slot 1 / 2
    expect(rc.shedLoadOf[0]).toBeCloseTo(0.25 / 0.6);
    expect(rc.stdLoadOf[0]).toBeCloseTo(0.25 / 0.7);
    expect(rc.shedLoadOf[1]).toBe(2.0);
    expect(rc.stdLoadOf[1]).toBe(1.0);
    expect(rc.poolShedLoad).toBeCloseTo(0.25 / 0.6);
    // a threshold of 0 is reached at once, even at no backlog
    expect(loadAt(0, 0)).toBe(Infinity);
  });

  it("shipped request-aware picker (band): every eligible candidate priced, the cheap one never missed; p2c misses it", () => {
    // 8 equal instances; all but instance 5 prefilling 1.9 s this proxy sent ahead
    const insts = new Array<InstanceState>(), ls = new Array<InstanceLlm>();
    for (let i = 0; i < 8; i++) {
      const a = "10.0.0." + (i + 1).toString() + ":80";
      insts.push(inst(a, 0, 4));
      ls.push(llm(a, ["m"], [MODEL_BASE], 2, 1));
    }
    const ahead = (): PendingPrefill => { const p = new PendingPrefill(); for (let i = 0; i < 8; i++) if (i != 5) p.charge(i, 0, 1900); return p; };
    const g = new Fixture(snapOf(insts, ls));
    const out = new RequestPick();
    const shipped = new RequestConfig().picker;
    let bandHits = 0, p2cHits = 0;
    for (let k = 0; k < 64; k++) {
      // the same pending each time: a pick charges its prefill to the instance chosen
      g.pending = ahead();
      let rc = cost(8);
      rc.modelCol = 0;
      pickForRequest(g.plan, g.lp, g.inflight, g.pending, 0, shipped, 0.1, new Rng(k + 1), rc, new CostParams(), CRIT_STANDARD, out);
      if (out.pick.index == 5) bandHits++;
      g.pending = ahead();
      rc = cost(8);
      rc.modelCol = 0;
      pickForRequest(g.plan, g.lp, g.inflight, g.pending, 0, PICKER_P2C, 0.1, new Rng(k + 1), rc, new CostParams(), CRIT_STANDARD, out);
      if (out.pick.index == 5) p2cHits++;
    }
    expect(bandHits).toBe(64);
    // a draw of two holds instance 5 with probability 1 − (7/8 · 6/7) = 1/4
    expect(p2cHits).toBeLessThan(40);
    expect(p2cHits).toBeGreaterThan(0);
  });

  it("pressure is the least loaded eligible instance's backlog per slot", () => {
    const g = new Fixture(snapOf([inst("10.0.0.1:80", 3), inst("10.0.0.2:80", 1.5)], []));
    const rc = cost(2);
    scoreRequest(g.plan, g.lp, g.inflight.dataStart, g.pending, 0, rc, new CostParams());
    expect(rc.pressure).toBeCloseTo(1.5);
    g.inflight[1] = 2; // our own in-flight requests count
    scoreRequest(g.plan, g.lp, g.inflight.dataStart, g.pending, 0, rc, new CostParams());
    expect(rc.pressure).toBeCloseTo(3);
  });
});

describe("criticality and shedding", () => {
  it("parses the three names only", () => {
    expect(criticalityOf("critical")).toBe(CRIT_CRITICAL);
    expect(criticalityOf("sheddable")).toBe(CRIT_SHEDDABLE);
    expect(criticalityOf("Critical")).toBe(-1);
  });
  it("header over model over service default; an unknown header value is ignored", () => {
    expect(resolveCriticality("critical", CRIT_SHEDDABLE, CRIT_STANDARD)).toBe(CRIT_CRITICAL);
    expect(resolveCriticality("gold", CRIT_SHEDDABLE, CRIT_STANDARD)).toBe(CRIT_SHEDDABLE);
    expect(resolveCriticality(null, -1, CRIT_STANDARD)).toBe(CRIT_STANDARD);
  });
  it("sheds sheddable first, standard next, critical never", () => {
    // (criticality, chosen instance's pressure, pool's least loaded pressure, sheddableAt, standardAt)
    expect(shed(CRIT_SHEDDABLE, 0.99, 0, 1, 2)).toBe(false);
    expect(shed(CRIT_SHEDDABLE, 1, 0, 1, 2)).toBe(true);
    expect(shed(CRIT_STANDARD, 1.5, 0.4, 1, 2)).toBe(false);
    expect(shed(CRIT_STANDARD, 2, 0, 1, 2)).toBe(true);
    expect(shed(CRIT_CRITICAL, 1e9, 1e9, 1, 2)).toBe(false);
    // a pool the servers do not show overloaded never sheds standard, at any pressure (issue 20)
    expect(shed(CRIT_STANDARD, 1e9, 1e9, 1, 2, false)).toBe(false);
    expect(shed(CRIT_SHEDDABLE, 1, 0, 1, 2, false)).toBe(true);
  });
  it("pool at half of sheddableAt (no instance with half its slots free): the sheddable threshold halves; standard unchanged", () => {
    // pool below sheddableAt / 2: the configured thresholds
    expect(shed(CRIT_SHEDDABLE, 0.9, 0.49, 1, 2)).toBe(false);
    expect(shed(CRIT_STANDARD, 1.9, 0.49, 1, 2)).toBe(false);
    // pool at sheddableAt / 2: sheddable at 0.5 where it would go; standard still at 2
    expect(shed(CRIT_SHEDDABLE, 0.5, 0.5, 1, 2)).toBe(true);
    expect(shed(CRIT_SHEDDABLE, 0.49, 0.5, 1, 2)).toBe(false);
    expect(shed(CRIT_STANDARD, 1.99, 1.5, 1, 2)).toBe(false);
    expect(shed(CRIT_STANDARD, 2, 1.5, 1, 2)).toBe(true);
    // no eligible instance at all: +Inf
    expect(shed(CRIT_STANDARD, Infinity, Infinity, 1, 2)).toBe(true);
    expect(shed(CRIT_CRITICAL, 3, 3, 1, 2)).toBe(false);
    // pickForRequest: every instance with 3 of 4 slots busy: sheddable shed, standard and critical sent
    const g = new Fixture(snapOf([inst("10.0.0.1:80", 4, 4), inst("10.0.0.2:80", 3, 4)], []));
    const out = new RequestPick();
    let rc = cost(2);
    pickForRequest(g.plan, g.lp, g.inflight, g.pending, 0, 1, 0, new Rng(5), rc, new CostParams(), CRIT_SHEDDABLE, out);
    expect(rc.pressure).toBeCloseTo(0.75);
    expect(out.shed).toBe(true);
    rc = cost(2);
    pickForRequest(g.plan, g.lp, g.inflight, g.pending, 0, 1, 0, new Rng(5), rc, new CostParams(), CRIT_STANDARD, out);
    expect(out.shed).toBe(false);
    rc = cost(2);
    pickForRequest(g.plan, g.lp, g.inflight, g.pending, 0, 1, 0, new Rng(5), rc, new CostParams(), CRIT_CRITICAL, out);
    expect(out.shed).toBe(false);
    expect(out.pick.index).toBe(1);
    // one instance with most slots free: the configured threshold, sheddable sent there
    const h = new Fixture(snapOf([inst("10.0.0.1:80", 4, 4), inst("10.0.0.2:80", 1, 4)], []));
    rc = cost(2);
    pickForRequest(h.plan, h.lp, h.inflight, h.pending, 0, 1, 0, new Rng(5), rc, new CostParams(), CRIT_SHEDDABLE, out);
    expect(out.shed).toBe(false);
    expect(out.pick.index).toBe(1);
  });
  it("pickForRequest: the shed flag under pressure, the cheapest instance for critical requests", () => {
    // every instance past the standard threshold (2 per slot), no server reporting a growing queue:
    // standard is sent (the servers queue it); once they report growth it is shed
    const calm = new Fixture(snapOf([inst("10.0.0.1:80", 4), inst("10.0.0.2:80", 2.5), inst("10.0.0.3:80", 6)], []));
    const rc0 = cost(3);
    const out = new RequestPick();
    pickForRequest(calm.plan, calm.lp, calm.inflight, calm.pending, 0, 0, 0.1, new Rng(3), rc0, new CostParams(), CRIT_STANDARD, out);
    expect(out.shed).toBe(false);
    const is = [inst("10.0.0.1:80", 4), inst("10.0.0.2:80", 2.5), inst("10.0.0.3:80", 6)];
    for (let i = 0; i < 3; i++) is[i].queueGrowing = true;
    const g = new Fixture(snapOf(is, []));
    const rc = cost(3);
    pickForRequest(g.plan, g.lp, g.inflight, g.pending, 0, 0, 0.1, new Rng(3), rc, new CostParams(), CRIT_STANDARD, out);
    expect(out.shed).toBe(true);
    expect(out.overloaded).toBe(true);
    for (let k = 0; k < 10; k++) {
      pickForRequest(g.plan, g.lp, g.inflight, g.pending, 0, 0, 0.1, new Rng(k + 7), rc, new CostParams(), CRIT_CRITICAL, out);
      expect(out.shed).toBe(false);
      expect(out.pick.index).toBe(1);
    }
  });
});

/** four instances of kvSeqs 10, each with `backlog` requests; `growing` of them report a growing queue */
function kvPool(backlog: f32, growing: i32 = 0): Fixture {
  const ls = new Array<InstanceLlm>(), is = new Array<InstanceState>();
  for (let i = 0; i < 4; i++) {
    const a = "10.0.0." + (i + 1).toString() + ":80";
    const r = llm(a, ["m"], [MODEL_BASE], 0.1, 20, 0.3);
    r.kvSeqs = 10;
    ls.push(r);
    const s = inst(a, backlog, 64);
    s.queueGrowing = i < growing;
    is.push(s);
  }
  return new Fixture(snapOf(is, ls));
}

/** kvPool with LoRA: every instance serves "m" as its base model and "a" as a loaded adapter */
function kvPoolLora(backlog: f32, growing: i32 = 0): Fixture {
  const ls = new Array<InstanceLlm>(), is = new Array<InstanceState>();
  for (let i = 0; i < 4; i++) {
    const a = "10.0.0." + (i + 1).toString() + ":80";
    const r = llm(a, ["m", "a"], [MODEL_BASE, MODEL_LOADED], 0.1, 20, 0.3, 2);
    r.kvSeqs = 10;
    ls.push(r);
    const s = inst(a, backlog, 64);
    s.queueGrowing = i < growing;
    is.push(s);
  }
  return new Fixture(snapOf(is, ls));
}

function pick(g: Fixture, rc: RequestCost, crit: i32, k: i32, nowMs: f64 = 0): RequestPick {
  const out = new RequestPick();
  pickForRequest(g.plan, g.lp, g.inflight, g.pending, nowMs, 0, 0.1, new Rng(k + 1), rc, new CostParams(), crit, out);
  return out;
}

describe("shedding: pool thresholds while the pool is overloaded", () => {
  it("poolLoadAt: the pool's pressure per pool threshold; 0 without a known KV capacity or without a threshold", () => {
    expect(poolLoadAt(0.3, 0.15)).toBeCloseTo(2);
    expect(poolLoadAt(NaN, 0.15)).toBe(0.0);
    expect(poolLoadAt(0.3, Infinity)).toBe(0.0);
    expect(poolLoadAt(0.1, 0)).toBe(Infinity);
  });

  it("shouldShed: at a pool threshold the class is shed wherever it would go; critical never", () => {
    // instance loads low (0.1 of their thresholds), pool at its sheddable threshold only
    expect(shouldShed(CRIT_SHEDDABLE, true, 0.1, 0.1, 0.1, 1, 0.8)).toBe(true);
    expect(shouldShed(CRIT_STANDARD, true, 0.1, 0.1, 0.1, 1, 0.8)).toBe(false);
    // pool at the standard one too
    expect(shouldShed(CRIT_STANDARD, true, 0.1, 0.1, 0.1, 1.2, 1)).toBe(true);
    expect(shouldShed(CRIT_CRITICAL, true, 9, 9, 9, 9, 9)).toBe(false);
    // pool loads 0 (not overloaded): the instance rules alone
    expect(shouldShed(CRIT_SHEDDABLE, true, 0.9, 0.8, 0.1, 0, 0)).toBe(false);
    expect(shouldShed(CRIT_STANDARD, true, 0.9, 0.99, 0.1, 0, 0)).toBe(false);
  });

  it("the pool's pressure: summed backlog over summed KV capacity", () => {
    const g = kvPool(2);
    g.inflight[0] = 4; // backlog 6 / 2 / 2 / 2 of 10 each: 12 / 40
    const rc = cost(4);
    rc.modelCol = 0;
    pick(g, rc, CRIT_CRITICAL, 0);
    expect(rc.poolPressure).toBeCloseTo(0.3);
    // no KV capacity published: no pool pressure
    const h = new Fixture(snapOf([inst("10.0.0.1:80", 2, 8)], [llm("10.0.0.1:80", ["m"], [MODEL_BASE], 0.1, 20, 0.3)]));
    const rh = cost(1);
    rh.modelCol = 0;
    pick(h, rh, CRIT_CRITICAL, 0);
    expect(isNaN(rh.poolPressure)).toBe(true);
  });

  it("shipped defaults: off at normal load; entered on the servers' evidence (a growing queue), the pool then held at poolStandardAt; released when the overload ends", () => {
    const shipped = new CostParams().shed;
    expect(shipped.poolSheddable).toBe(0.15);
    expect(shipped.poolStandard).toBe(0.2);
    expect(shipped.overloadShare).toBe(0.3);
    const rc = cost(4);
    rc.modelCol = 0;
    // normal load, pool at 0.25 (above both pool thresholds), every instance under its own (0.6 / 0.7,
    // and under half the sheddable one, so that one does not halve): nothing shed, however long it lasts
    const normal = kvPool(2.5);
    for (let k = 0; k < 200; k++) {
      expect(pick(normal, rc, CRIT_STANDARD, k).shed).toBe(false);
      expect(pick(normal, rc, CRIT_SHEDDABLE, k).shed).toBe(false);
      normal.pending = new PendingPrefill();
    }
    // overload: one of four servers reports its queue growing (a quarter: evidence); every instance at
    // 0.8 of its KV capacity, standard shed by the instance threshold
    const over = kvPool(8, 1);
    let k = 0;
    while (rc.overload.share("m") < 0.3) {
      expect(pick(over, rc, CRIT_STANDARD, k++, 1000).shed).toBe(true);
      expect(k).toBeLessThan(100);
    }
    // the servers stop queueing under the pool thresholds: the same pool at 0.25 as before, 10 s
    // later, no evidence: held by the share shed; standard and sheddable are shed, critical is sent
    expect(pick(normal, rc, CRIT_STANDARD, 1, 10000).shed).toBe(true);
    expect(pick(normal, rc, CRIT_SHEDDABLE, 2, 10000).shed).toBe(true);
    expect(pick(normal, rc, CRIT_CRITICAL, 3, 10000).shed).toBe(false);
    // held between the two: sheddable shed, standard sent
    const between = kvPool(1.8); // 0.18
    expect(pick(between, rc, CRIT_STANDARD, 4, 10000).shed).toBe(false);
    expect(pick(between, rc, CRIT_SHEDDABLE, 5, 10000).shed).toBe(true);
    // the overload ends: the pool drains under its thresholds, the share decays, and the pool at 0.25 is admitted again
    const calm = kvPool(1);
    for (k = 0; k < 100; k++) { pick(calm, rc, CRIT_STANDARD, k, 11000); calm.pending = new PendingPrefill(); }
    expect(rc.overload.share("m")).toBeLessThan(0.3);
    expect(pick(normal, rc, CRIT_STANDARD, 6, 12000).shed).toBe(false);
    expect(pick(normal, rc, CRIT_SHEDDABLE, 7, 12000).shed).toBe(false);
  });

  it("the filter's own refusals never enter the overload state (issue 20, cause 1)", () => {
    // every instance at 0.8 of its KV capacity (sheddable past its 0.6), no server reporting growth:
    // the sheddable requests are shed (the share shed climbs past overloadShare) but the pool is
    // never overloaded, so standard requests are sent however long it lasts
    const rc = cost(4);
    rc.modelCol = 0;
    const over = kvPool(8);
    for (let k = 0; k < 300; k++) {
      expect(pick(over, rc, CRIT_SHEDDABLE, k, <f64>k).shed).toBe(true);
      const st = pick(over, rc, CRIT_STANDARD, k, <f64>k);
      expect(st.shed).toBe(false);
      expect(st.overloaded).toBe(false);
      over.pending = new PendingPrefill();
    }
    expect(rc.overload.share("m")).toBeGreaterThan(0.3);
    // a quarter of the servers reporting growth is evidence; fewer is not
    expect(growthEvidence(1, 4)).toBe(true);
    expect(growthEvidence(1, 5)).toBe(false);
    expect(growthEvidence(0, 0)).toBe(false);
    // the state leaves by itself: 2 s (EVIDENCE_HOLD_MS) after the last evidence, with the share under 0.3
    const o = new OverloadShares();
    expect(o.overloaded("m", true, 0, 0.3)).toBe(true);
    expect(o.overloaded("m", false, EVIDENCE_HOLD_MS, 0.3)).toBe(true);
    expect(o.overloaded("m", false, EVIDENCE_HOLD_MS + 1, 0.3)).toBe(false);
    // off, but within the episode: standard requests keep their instance thresholds
    expect(o.inEpisode("m", EVIDENCE_HOLD_MS + 1)).toBe(true);
    expect(o.inEpisode("m", EVIDENCE_HOLD_MS + EPISODE_MS)).toBe(true);    // last on at EVIDENCE_HOLD_MS
    expect(o.inEpisode("m", EVIDENCE_HOLD_MS + EPISODE_MS + 1)).toBe(false);
    expect(o.inEpisode("never-overloaded", 0)).toBe(false);
    expect(o.overloaded("m", false, EVIDENCE_HOLD_MS + 2, 0.3)).toBe(false);
    // within the episode (EPISODE_MS after it was last on) the share alone puts it back; after it, not
    for (let k = 0; k < 60; k++) o.note("m", true, live1());
    expect(o.overloaded("m", false, EVIDENCE_HOLD_MS + 3, 0.3)).toBe(true);
    expect(o.overloaded("m", false, EVIDENCE_HOLD_MS + 3 + EPISODE_MS, 0.3)).toBe(true);  // still held by the share
    for (let k = 0; k < 200; k++) o.note("m", false, live1());
    expect(o.overloaded("m", false, EVIDENCE_HOLD_MS + 4 + EPISODE_MS, 0.3)).toBe(false);
    for (let k = 0; k < 60; k++) o.note("m", true, live1());
    expect(o.overloaded("m", false, EVIDENCE_HOLD_MS + 5 + 2 * EPISODE_MS, 0.3)).toBe(false); // a new episode needs new evidence
  });
});

describe("shedding: an adapter's requests are in its base model's pool", () => {
  it("poolOf: a base model is its own pool; an adapter is in its base model's; an adapter no listing instance has a base for, its own", () => {
    const g = kvPoolLora(1);
    expect(g.lp.poolOf[g.lp.modelColumn("m")]).toBe("m");
    expect(g.lp.poolOf[g.lp.modelColumn("a")]).toBe("m");
    const h = new Fixture(snapOf([inst("10.0.0.1:80")], [llm("10.0.0.1:80", ["x"], [MODEL_LOADED], NaN, NaN, NaN, 2)]));
    expect(h.lp.poolOf[h.lp.modelColumn("x")]).toBe("x");
  });

  it("once the base model's requests overload the pool, the adapter's are held at the pool thresholds too (and the adapter's own sheds count for the pool)", () => {
    const rc = cost(4);
    const over = kvPoolLora(8, 1), normal = kvPoolLora(2.5);
    const m = over.lp.modelColumn("m"), a = over.lp.modelColumn("a");
    // the adapter at the pool's normal level (0.25): sent while the pool is not overloaded
    rc.modelCol = a;
    expect(pick(normal, rc, CRIT_STANDARD, 0).shed).toBe(false);
    // the base model's standard requests at 0.8 are shed by the instance threshold until the pool is overloaded
    rc.modelCol = m;
    let k = 0;
    while (rc.overload.share("m") < 0.3) { expect(pick(over, rc, CRIT_STANDARD, k++, 1000).shed).toBe(true); expect(k).toBeLessThan(100); }
    // the adapter at 0.25 now: shed (standard and sheddable), as the base model's requests are
    rc.modelCol = a;
    expect(pick(normal, rc, CRIT_STANDARD, 1, 10000).shed).toBe(true);
    expect(pick(normal, rc, CRIT_SHEDDABLE, 2, 10000).shed).toBe(true);
    expect(pick(normal, rc, CRIT_CRITICAL, 3, 10000).shed).toBe(false);
    expect(rc.overload.share("a")).toBe(0);   // no separate state for the adapter
    rc.modelCol = m;
    expect(pick(normal, rc, CRIT_STANDARD, 4, 10000).shed).toBe(true);
  });
});

describe("pickForRequest: prefix holder and empty pools", () => {
  it("p2c: the instance holding the prompt's prefix is a third contender, at index 0 too", () => {
    const g = new Fixture(snapOf([inst("10.0.0.1:80", 1), inst("10.0.0.2:80", 1), inst("10.0.0.3:80", 1), inst("10.0.0.4:80", 1), inst("10.0.0.5:80", 1)], []));
    const rc = cost(5);
    rc.cachedBlocks[0] = 8;
    const out = new RequestPick();
    let third = 0;
    for (let k = 0; k < 20; k++) {
      pickForRequest(g.plan, g.lp, g.inflight, g.pending, 0, 0, 0.1, new Rng(k + 1), rc, noShed(), CRIT_STANDARD, out);
      expect(out.pick.index).toBe(0);
      if (out.pick.considered == 3) third++;
    }
    expect(third).toBeGreaterThan(0); // some draws missed it and the holder still won
  });

  it("p2c: the prefix holder counts as a third contender only when the draw missed it", () => {
    // two instances: p2c draws both, the holder (cheaper by its cached prefix) wins the draw itself
    const g = new Fixture(snapOf([inst("10.0.0.1:80", 1), inst("10.0.0.2:80", 1)], []));
    const rc = cost(2);
    rc.cachedBlocks[1] = 8;
    const out = new RequestPick();
    for (let k = 0; k < 10; k++) {
      pickForRequest(g.plan, g.lp, g.inflight, g.pending, 0, 0, 0.1, new Rng(k + 1), rc, noShed(), CRIT_STANDARD, out);
      expect(rc.affinity).toBe(1);
      expect(out.pick.index).toBe(1);
      expect(out.pick.considered).toBe(2);
    }
  });

  it("an instance hot and with a backlog exactly at its slots is saturated: left out while another has a free slot", () => {
    const a = inst("10.0.0.1:80", 1), b = inst("10.0.0.2:80", 0);
    a.rho = 0.99; a.esMs = 10; a.es2Ms2 = 200; // cheap, but ρ above 0.95 and 1 waiting for its 1 slot
    const g = new Fixture(snapOf([a, b], []));
    const out = new RequestPick();
    pickForRequest(g.plan, g.lp, g.inflight, g.pending, 0, 0, 0, new Rng(5), cost(2), noShed(), CRIT_CRITICAL, out);
    expect(out.pick.index).toBe(1);
    expect(out.pick.eligible).toBe(1);
  });

  it("no eligible instance: no pick and no shedding (the all-ineligible policy decides)", () => {
    const a = inst("10.0.0.1:80"), b = inst("10.0.0.2:80");
    a.healthy = false; b.healthy = false;
    const g = new Fixture(snapOf([a, b], []));
    const out = new RequestPick();
    const crits = [CRIT_STANDARD, CRIT_SHEDDABLE, CRIT_CRITICAL];
    for (let k = 0; k < crits.length; k++) {
      pickForRequest(g.plan, g.lp, g.inflight, g.pending, 0, 0, 0.1, new Rng(5), cost(2), new CostParams(), crits[k], out);
      expect(out.shed).toBe(false);
      expect(out.pick.eligible).toBe(0);
      expect(out.pick.index).toBe(-1);
    }
  });
});

describe("model-route: aliases and splits", () => {
  it("an alias always routes as its target", () => {
    const r = new ModelRule();
    r.name = "gpt-4o"; r.aliasOf = "llama-3-70b";
    expect(routeModel(r, "gpt-4o", 0)).toBe("llama-3-70b");
    expect(routeModel(null, "x", 0)).toBe("x");
    // a one-character target is a target too
    const one = new ModelRule();
    one.name = "fast"; one.aliasOf = "m";
    expect(routeModel(one, "fast", 9999)).toBe("m");
  });
  it("a 10 % split sends the basis points below 1000 to the new version, deterministic per request id", () => {
    const r = new ModelRule();
    r.name = "llama-3-8b";
    const s = new ModelSplit();
    s.to = "llama-3-8b-v2"; s.basisPoints = 1000;
    r.split.push(s);
    expect(routeModel(r, "llama-3-8b", 999)).toBe("llama-3-8b-v2");
    expect(routeModel(r, "llama-3-8b", 1000)).toBe("llama-3-8b");
    let v2 = 0;
    for (let i = 0; i < 10000; i++) {
      const id = String.UTF8.encode("req-" + i.toString());
      const a = routeModel(r, "llama-3-8b", basisPointsOf(id));
      expect(routeModel(r, "llama-3-8b", basisPointsOf(id))).toBe(a);
      if (a == "llama-3-8b-v2") v2++;
    }
    expect(v2).toBeGreaterThan(850);
    expect(v2).toBeLessThan(1150);
  });
});

describe("endpoint: which paths have their body read", () => {
  it("reads completions and chat completions, query ignored; nothing else", () => {
    expect(apiOfPath("/v1/chat/completions")).toBe(API_CHAT);
    expect(apiOfPath("/v1/completions?x=1")).toBe(API_COMPLETIONS);
    expect(apiOfPath("/v1/models")).toBe(0);
    expect(apiOfPath("/v1/completions/extra")).toBe(0);
    expect(apiOfPath("/V1/completions")).toBe(0);
  });
});

describe("rewrite: the model in the body", () => {
  it("replaces only the model string's bytes, escaping the new name", () => {
    const body = String.UTF8.encode('{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}');
    const r = parseOpenAiRequest(body, API_CHAT, new ParseLimits());
    expect(r.modelStart).toBe(10);
    expect(r.modelEnd).toBe(21);
    expect(String.UTF8.decode(withModel(body, r.modelStart, r.modelEnd, "llama-3-8b"))).toBe('{"model":"llama-3-8b","messages":[{"role":"user","content":"hi"}]}');
    expect(jsonEscape('a"b\\c\n\u0001')).toBe('a\\"b\\\\c\\n\\u0001');
    // control characters as \u00XX, two hex digits each side of 0x10
    expect(jsonEscape("\x0f\x10\x1f")).toBe("\\u000f\\u0010\\u001f");
    const again = parseOpenAiRequest(withModel(body, r.modelStart, r.modelEnd, 'we"ird'), API_CHAT, new ParseLimits());
    expect(again.model).toBe('we"ird');
  });
});

describe("rewrite: the vLLM priority in the body", () => {
  it("appends the member before the closing brace, after any priority the client sent (the last duplicate wins)", () => {
    const body = String.UTF8.encode('{"model":"m","prompt":"hi","priority":-100}\n');
    const out = withPriority(body, 2);
    expect(out).not.toBeNull();
    expect(String.UTF8.decode(out!)).toBe('{"model":"m","prompt":"hi","priority":-100,"priority":2}\n');
    const again = parseOpenAiRequest(out!, API_COMPLETIONS, new ParseLimits());
    expect(again.model).toBe("m");
    expect(String.UTF8.decode(withPriority(String.UTF8.encode('{ }'), -1)!)).toBe('{ "priority":-1}');
    expect(withPriority(String.UTF8.encode('[1]'), 0)).toBeNull();
  });
});
