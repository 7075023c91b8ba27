// Shared by the request-aware specs: the plans the filter builds for one adopted snapshot
// (candidates in the shipped conditional model, the LLM plan over them), with this proxy's
// in-flight counts and pending prefill empty. Not a spec itself (as-pect runs *.spec.ts).
import { Snapshot, InstanceState } from "../assembly/lib/snapshot";
import { InstanceLlm } from "../assembly/lib/snapshot-llm";
import { Candidate, candidateFrom, Plan, MODEL_CONDITIONAL } from "../assembly/lib/choose";
import { LlmPlan, buildLlmPlan } from "../assembly/lib/choice/plan-llm";
import { RecentSends } from "../assembly/lib/recent-sends";
import { PendingPrefill } from "../assembly/lib/pending-prefill";

export class LlmFixture {
  plan: Plan = new Plan([]);
  lp: LlmPlan = new LlmPlan();
  inflight: Array<i32> = [];
  pending: PendingPrefill = new PendingPrefill();
  /** This VM's recent sends, kept across requests as the plugin's RequestCost keeps them. */
  recent: RecentSends = new RecentSends();
  constructor(snap: Snapshot) {
    const cands = new Array<Candidate>();
    const es = new Array<f64>(), w = new Array<f64>();
    for (let i = 0; i < snap.instances.length; i++) {
      const c = candidateFrom(snap.instances[i], MODEL_CONDITIONAL, 60000, 0, false);
      c.slot = i;
      cands.push(c);
      es.push(c.perItemMs * c.slots);
      w.push(c.weight);
    }
    this.plan = new Plan(cands);
    this.lp = buildLlmPlan(this.plan, "llm", snap.llm, es, w);
    this.inflight = new Array<i32>(cands.length);
  }
}

export function snapOf(instances: Array<InstanceState>, l: Array<InstanceLlm>): Snapshot {
  const s = new Snapshot();
  s.instances = instances;
  s.llm = l;
  return s;
}
