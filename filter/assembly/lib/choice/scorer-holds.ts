// Scorer, per request: where the hits still to come of a new prefix arrive (issue 20,
// docs/benchmarks/llm-r11a.md). The delay a request's prefill adds is charged to the requests
// that arrive behind it (score-request.ts, recent-sends.ts arrivalsAt), shared out over the
// instances in proportion to what follows each: the prefill this VM made it compute. For a prompt
// no instance holds (a miss everywhere) that share is read in prefixes held instead: a miss makes
// its instance hold one prefix more, and the hits that arrive there are those of the prefixes it
// holds, one prefix's as many as another's, whatever each has already brought. The prefill sent
// counts a prefix that has brought many hits more than one that has brought few, though both have
// as many still to come: in a shuffled burst a worker whose groups drew many early hits looked as
// busy as one holding a group more, and the last group went to the worker with more groups
// (round 10a: seed 1, position 309, one worker at 9 groups, one at 7, makespan 14.14 s, not 12.88).
// Used only once hits have been seen to follow prefixes (this VM's hits per prefix started > 0)
// and while every prefix held can expect a hit within the horizon (this VM's sends within one
// prefill at least the prefixes it started there). At a Poisson rate few prefixes draw a hit
// within one prefill, and the recent prefill sent tracks which ones: the prefill share, as
// before. Hits also keep the prefill share. No constant.

/** This VM's prompts started (held nowhere when sent) and hits sent (a cached block at the instance chosen). */
export class PrefixHolds {
  starts: f64 = 0;
  hits: f64 = 0;
  /** Hits per prefix started so far (0: none started). */
  @inline perPrefix(): f64 { return this.starts > 0 ? this.hits / this.starts : 0; }
}

/**
 * Whether a request's arrivals are shared out by prefixes held: it is held nowhere, hits have
 * followed prefixes, and this VM sent at least as many requests within one prefill (`sends`) as it
 * started prefixes on the candidates (`startsHeld`).
 */
@inline export function shareByHolds(heldNowhere: bool, nh: i32, holds: PrefixHolds, sends: i32, startsHeld: f64): bool {
  return heldNowhere && nh > 0 && holds.perPrefix() > 0 && startsHeld > 0 && <f64>sends >= startsHeld;
}
