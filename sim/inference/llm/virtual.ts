// Driving an LlmEngine in virtual time (discrete events, no sleeping).
import { LlmEngine, type LlmEngineConfig, type LlmRequest, type LlmRequestSpec, type StepResult } from './engine';

/** Run steps until the clock reaches `t` (a step that starts before `t` may end after it),
 *  then idle up to `t`. For multi-instance discrete-event drivers: call it on every engine with
 *  the next event time, submit the arrivals of that time, repeat. */
export function advanceTo(engine: LlmEngine, t: number, onStep?: (s: StepResult) => void): void {
  while (engine.hasWork() && engine.clockMs < t) {
    const s = engine.step();
    if (s && onStep) onStep(s);
  }
  engine.idleUntil(t);
}

export interface VirtualArrival {
  atMs: number;
  spec: LlmRequestSpec;
}

export interface VirtualResult {
  engine: LlmEngine;
  /** in arrival order */
  requests: LlmRequest[];
  steps: StepResult[];
}

/** One engine, a list of arrivals (any order), run to completion. */
export function runVirtual(cfg: Partial<LlmEngineConfig>, arrivals: VirtualArrival[], keepSteps = false): VirtualResult {
  const engine = new LlmEngine(cfg);
  const sorted = arrivals.slice().sort((x, y) => x.atMs - y.atMs);
  const requests: LlmRequest[] = [];
  const steps: StepResult[] = [];
  let i = 0;
  while (i < sorted.length || engine.hasWork()) {
    if (!engine.hasWork() && i < sorted.length) engine.idleUntil(sorted[i].atMs);
    while (i < sorted.length && sorted[i].atMs <= engine.clockMs) {
      requests.push(engine.submit(sorted[i].spec, sorted[i].atMs));
      i++;
    }
    const s = engine.step();
    if (s && keepSteps) steps.push(s);
  }
  return { engine, requests, steps };
}
