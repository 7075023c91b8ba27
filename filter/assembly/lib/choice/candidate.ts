// One instance as the choice sees it, built once per snapshot: the static filter's verdict and the
// static parts of the scorers. The per-request parts live in the plan (plan.ts).
import { InstanceState } from "../snapshot";
import { SKIP_NONE, SKIP_SLOW } from "./skip";
import { staticSkip } from "./filter-static";
import { healthWeight } from "./scorer-health";
import { baseWaitMs } from "./scorer-wait";

export class Candidate {
  addr: string = "";
  addrBytes: ArrayBuffer = new ArrayBuffer(0);
  peer: string = "";
  /** The load-independent part of W: E[S] (+ the M/G/1 term) (+ RTT). */
  baseWaitMs: f64 = 0;
  /** E[S]/c: what each request ahead adds. */
  perItemMs: f64 = 0;
  queue: f64 = 0;
  slots: f64 = 1;
  rho: f64 = 0;
  weight: f64 = 1;
  /** Static skip reason (unhealthy, link, slow); saturation and staleness are decided per request. */
  skip: i32 = SKIP_NONE;
  /** Absolute time (ms) from which this instance's data is too old. */
  staleAtMs: f64 = 0;
  /** When the agent scraped the data (generatedAt − dataAgeMs): the queue q is as of then. */
  scrapeAtMs: f64 = 0;
  /** In-flight slot (see Inflight) and our in-flight count at that scrape. */
  slot: i32 = 0;
  inflightAtSnapshot: i32 = 0;
  /**
   * Skipped by its P99 alone (SKIP_SLOW): its price without the health weight -- base wait, E[S]/c
   * and queue -- for the overflow (filter-saturated.ts overflowTo); +Inf for any other.
   */
  overflowBaseMs: f64 = Infinity;
  overflowPerMs: f64 = Infinity;
  overflowQueue: f64 = 0;
  /** slots is a floor, not a capacity (snapshot flag): the backlog per slot is not shed on */
  slotsFloor: bool = false;
  /** the server's own queue keeps growing (snapshot flag): evidence for the pool's overload state */
  queueGrowing: bool = false;
}

/**
 * Static, per-snapshot parts of one instance. linkRttMs is the measured round trip to the
 * instance's cloud (0 for local instances): a remote instance must be that much faster.
 * Numbers that cannot be priced leave every field finite and the candidate skipped.
 * `recovered`: this proxy's fresh answers say a slowdown it saw has ended (InbandTable.liftsSlow),
 * so the health weight from the agent's P99 window -- which still holds the episode's
 * completions -- is not applied (scorer-health.ts healthWeight).
 */
export function candidateFrom(s: InstanceState, model: i32, stalenessMs: f64, generatedAtMs: f64, linkDegraded: bool,
  linkRttMs: f64 = 0, recovered: bool = false): Candidate {
  const c = new Candidate();
  c.addr = s.addr;
  c.addrBytes = String.UTF8.encode(s.addr);
  c.peer = s.peer;
  c.weight = healthWeight(<f64>s.p99Ms, <f64>s.baselineP99Ms, recovered);
  c.skip = staticSkip(s, linkDegraded, c.weight);
  const ok = c.skip == SKIP_NONE;
  // f32 on the wire: thresholds are compared in f32 (0.95 is 0.949999988 as f64).
  c.rho = ok ? <f64>s.rho : 0;
  const es = ok ? <f64>s.esMs : 0;
  c.slots = ok && s.slots >= 1 ? <f64>s.slots : 1;
  c.perItemMs = es / c.slots;
  c.baseWaitMs = baseWaitMs(model, c.rho, es, <f64>s.es2Ms2, linkRttMs);
  c.queue = ok ? <f64>s.queueDepth : 0;
  c.slotsFloor = s.slotsFloor;
  c.queueGrowing = ok && s.queueGrowing;
  const age = ok ? <f64>s.dataAgeMs : 0;
  c.scrapeAtMs = generatedAtMs - age;
  c.staleAtMs = c.scrapeAtMs + stalenessMs;
  if (c.skip == SKIP_SLOW) {
    const e = <f64>s.esMs, k = s.slots >= 1 ? <f64>s.slots : 1;
    c.overflowBaseMs = baseWaitMs(model, <f64>s.rho, e, <f64>s.es2Ms2, linkRttMs);
    c.overflowPerMs = e / k;
    c.overflowQueue = <f64>s.queueDepth;
  }
  return c;
}
