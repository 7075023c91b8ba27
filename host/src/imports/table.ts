// The host's import table: every ABI area registers its implementations here, and this is the
// one place that applies the common guard (calls a restricted phase does not allow — module
// instantiation, _initialize/_start, the guest's malloc — throw before the implementation runs).

import type { WasmVm } from '../vm';
import { registerBuffers } from './buffers';
import { registerContexts } from './contexts';
import { registerHeaderMaps } from './header-maps';
import { registerHttpCall } from './http-call';
import { registerLogging } from './logging';
import { registerProperties } from './properties';
import { registerRuntime } from './runtime';
import { registerSharedDataAndQueues } from './shared';
import { registerStreamControl } from './stream-control';
import { registerTimersAndMetrics } from './timers-metrics';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type ImportFn = (...args: any[]) => unknown;
/** Implementations keyed by "module.name". */
export type ImportTable = Record<string, ImportFn>;
export type Register = (name: string, f: ImportFn) => void;

/** Every host function this host implements, each wrapped once by the restricted-phase guard. */
export function hostFunctions(vm: WasmVm): ImportTable {
  const F: ImportTable = {};
  const env: Register = (name, f) => { F[`env.${name}`] = f; };
  registerLogging(vm, env);
  registerContexts(vm, env);
  registerProperties(vm, env);
  registerStreamControl(vm, env);
  registerSharedDataAndQueues(vm, env);
  registerHeaderMaps(vm, env);
  registerBuffers(vm, env);
  registerHttpCall(vm, env);
  registerTimersAndMetrics(vm, env);
  registerRuntime(vm, env, F);
  const guarded: ImportTable = {};
  for (const q of Object.keys(F)) guarded[q] = withGuard(vm, q, F[q]);
  return guarded;
}

/**
 * `f` behind the restricted-phase check. Each wrapper is compiled from its own source text (not
 * one shared closure) so that V8 sees one call target per wrapper and inlines the implementation:
 * a shared wrapper's call site would be megamorphic and cost a real call on every host call.
 * Fixed arity, no rest/spread: no allocation per call.
 */
function withGuard(vm: WasmVm, q: string, f: ImportFn): ImportFn {
  const params = Array.from({ length: f.length }, (_, i) => `a${i}`).join(', ');
  // eslint-disable-next-line @typescript-eslint/no-implied-eval
  const make = new Function('vm', 'q', 'f',
    `return function guarded_${q.replace(/\W/g, '_')}(${params}) {\n` +
    `  if (vm.restricted !== null) vm.guard(q);\n  return f(${params});\n};`) as
    (vm: WasmVm, q: string, f: ImportFn) => ImportFn;
  return make(vm, q, f);
}
