// One Wasm VM (one "thread" in Envoy terms): instantiation, calls into the guest (lifecycle,
// stream and root callbacks), ticks and logging; guest memory access is inherited from
// guest-memory.ts. The host imports live in
// imports/*, one module per ABI area; imports/table.ts applies the restricted-phase guard.
//
// Semantics follow proxy-wasm-cpp-host (src/exports.cc, src/context.cc, src/wasm.cc) and Envoy's
// source/extensions/common/wasm/context.cc. Comments name the behaviour they copy.

import {
  AbiVersion, LOG_LEVELS, MALLOC_ALLOWED as MALLOC_ALLOWED_, MetricType as MetricType_, START_ALLOWED, WASI_MODULES,
  WasmResult as WasmResult_, knownImportSignature,
} from './abi';
import {
  Context, HttpCallResponse, LogEntry, ProcExit, StreamCallbacks, UnimplementedImportError, VmOwner, VmRole,
} from './context';
import type { Metric } from './stores';
import type { TimerHandle } from './clock';
import { GuestMemory, type WAMemory } from './guest-memory';
import { hostFunctions } from './imports/table';

export type { WAMemory } from './guest-memory';

export {
  BodyBuffer, Context, ProcExit, UnimplementedImportError,
} from './context';
export type { HttpCallResponse, LogEntry, StreamCallbacks, VmOwner, VmRole } from './context';

// Module-local copies of imported values used on the per-call path: tsx/esbuild compile every
// reference to an imported binding into a getter call on the other module's exports object.
const WasmResult = WasmResult_;
const MetricType = MetricType_;
const MALLOC_ALLOWED = MALLOC_ALLOWED_;

// ---- minimal WebAssembly typings (Node has the API; @types/node does not declare it) --------
export interface WAModule { readonly __wasmModule?: never }
export interface WAInstance { readonly exports: Record<string, unknown> }
export interface WebAssemblyApi {
  Module: {
    new (bytes: Uint8Array): WAModule;
    imports(m: WAModule): { module: string; name: string; kind: string }[];
    exports(m: WAModule): { name: string; kind: string }[];
  };
  Instance: new (m: WAModule, imports: Record<string, Record<string, unknown>>) => WAInstance;
  Memory: new (d: { initial: number }) => WAMemory;
  RuntimeError: new (msg?: string) => Error;
}
export const WA = (globalThis as unknown as { WebAssembly: WebAssemblyApi }).WebAssembly;

class RestrictedCallback extends Error {}

const INSTANTIATING = new Set<string>();

type Fn = (...args: never[]) => unknown;

export class WasmVm extends GuestMemory {
  readonly name: string;
  instance!: WAInstance;
  fns: Record<string, Fn | undefined> = {};
  private malloc!: (size: number) => number;

  // Fields and methods without `private` below are also used by the host functions (imports/*);
  // they are internal to host/src.
  failed: string | null = null;
  closed = false;
  readonly contexts = new Map<number, Context>();
  private nextContextId = 1; // 0 is the VM context
  readonly vmContext = new Context(0, null);
  rootContext!: Context;

  current: Context | null = null;
  effectiveId = 0;
  restricted: Set<string> | null = null;
  private restrictedPhase = '';
  private startViolation: string | null = null;

  stopIteration = false;
  private afterActions: (() => void)[] = [];
  private draining = false;

  nextMetric = [MetricType.Counter, MetricType.Gauge, MetricType.Histogram];
  readonly metricIds = new Map<number, Metric>();
  nextHttpCallId = 0; // CalloutType::HttpCall, incremented by 4

  private tickPeriod = new Map<number, number>();
  private tickTimer = new Map<number, TimerHandle>();
  pendingDone = false;


  /** Logs emitted while starting (for create() errors). */
  readonly startLogs: LogEntry[] = [];
  capturingStartLogs = true;

  constructor(
    readonly owner: VmOwner,
    readonly module: WAModule,
    readonly abi: AbiVersion,
    readonly role: VmRole,
    readonly index: number,
    private readonly strictImports: boolean,
  ) {
    super();
    this.name = role === 'worker' ? `worker${index}` : role;
    this.contexts.set(0, this.vmContext);
  }

  // ---------------------------------------------------------------------------------------------
  // Lifecycle

  /** Instantiates the module. Throws with a clear message on failure. */
  instantiate(): void {
    const imports = this.buildImports();
    this.restricted = INSTANTIATING;
    this.restrictedPhase = 'instantiation';
    try {
      this.instance = new WA.Instance(this.module, imports);
    } catch (e) {
      if (this.startViolation) throw new Error(this.startViolation);
      throw new Error(`Failed to instantiate Wasm module (${this.name}): ${errMsg(e)}`);
    } finally {
      this.restricted = null;
    }
    if (this.startViolation) throw new Error(this.startViolation);
    const ex = this.instance.exports;
    const mem = ex.memory as WAMemory | undefined;
    if (!mem || !(mem.buffer instanceof ArrayBuffer)) {
      throw new Error('Wasm module does not export its memory as "memory"');
    }
    this.memory = mem;
    for (const [k, v] of Object.entries(ex)) if (typeof v === 'function') this.fns[k] = v as Fn;
    const m = (this.fns.malloc ?? this.fns.proxy_on_memory_allocate) as ((s: number) => number) | undefined;
    if (!m) throw new Error('Wasm module is missing malloc function (export malloc or proxy_on_memory_allocate)');
    this.malloc = m;
  }

  /** cpp-host WasmBase::startVm: _initialize (+ main / __main_void) or _start, restricted host calls. */
  startVm(): void {
    this.restricted = START_ALLOWED;
    this.restrictedPhase = 'VM initialization (_initialize/_start)';
    const prev = this.current;
    this.current = this.vmContext;
    try {
      if (this.fns._initialize) {
        this.rawCall('_initialize', []);
        if (this.fns.main) this.rawCall('main', [0, 0]);
        else if (this.fns.__main_void) this.rawCall('__main_void', []);
      } else if (this.fns._start) {
        this.rawCall('_start', []);
      }
    } finally {
      this.restricted = null;
      this.current = prev;
    }
  }

  /** WasmBase::start + ContextBase::onStart: root context, on_context_create, on_vm_start. */
  startRoot(): boolean {
    const root = new Context(this.allocContextId(), null);
    this.rootContext = root;
    this.contexts.set(root.id, root);
    if (this.fns.proxy_on_context_create) {
      root.tempPlugin = true;
      this.call(root, 'proxy_on_context_create', root.id, 0);
      root.tempPlugin = false;
      root.createdInVm = true;
    }
    if (this.failed) return false;
    if (this.fns.proxy_on_vm_start) {
      const r = this.call(root, 'proxy_on_vm_start', root.id, this.owner.vmConfig.length);
      return !this.failed && r !== 0;
    }
    return !this.failed;
  }

  /** ContextBase::onConfigure. */
  configure(): boolean {
    const root = this.rootContext;
    if (this.failed) return false;
    if (!root.createdInVm && this.fns.proxy_on_context_create) {
      this.call(root, 'proxy_on_context_create', root.id, 0);
    }
    root.createdInVm = true;
    if (!this.fns.proxy_on_configure) return !this.failed;
    root.tempPlugin = true;
    let r: number;
    try {
      r = this.call(root, 'proxy_on_configure', root.id, this.owner.pluginConfig.length);
    } finally {
      root.tempPlugin = false;
    }
    return !this.failed && r !== 0;
  }

  allocContextId(): number {
    for (;;) {
      const id = this.nextContextId;
      this.nextContextId = (this.nextContextId + 1) >>> 0;
      if (!this.contexts.has(id)) return id;
    }
  }

  /** Creates a stream context object (not yet created in the VM). */
  newStreamContext(stream: StreamCallbacks): Context {
    const ctx = new Context(this.allocContextId(), this.rootContext);
    ctx.stream = stream;
    this.contexts.set(ctx.id, ctx);
    return ctx;
  }

  /** ContextBase::onCreate */
  onCreate(ctx: Context): void {
    if (!this.failed && !ctx.createdInVm && this.fns.proxy_on_context_create) {
      this.call(ctx, 'proxy_on_context_create', ctx.id, ctx.rootContext.id);
    }
    ctx.createdInVm = true;
  }

  has(name: string): boolean {
    return this.fns[name] !== undefined;
  }

  /**
   * Calls a guest callback with ctx as the current context (SaveRestoreContext), then runs the
   * deferred "after VM call" actions (DeferAfterCallActions). Returns the guest's i32 result
   * (0 if the function is missing or the VM failed). `lastStopped` tells whether
   * proxy_send_local_response requested stopping iteration during the call.
   */
  lastStopped = false;
  call(ctx: Context, name: string, ...args: number[]): number {
    if (this.failed) {
      this.lastStopped = false;
      return 0;
    }
    const r = this.rawCall(name, args, ctx);
    this.lastStopped = this.stopIteration;
    this.stopIteration = false;
    this.runAfterActions();
    return r;
  }

  rawCall(name: string, args: number[], ctx?: Context): number {
    const fn = this.fns[name] as ((...a: number[]) => unknown) | undefined;
    if (!fn) return 0;
    const prevCur = this.current;
    const prevEff = this.effectiveId;
    if (ctx) this.current = ctx;
    this.effectiveId = 0;
    try {
      // Fixed-arity calls for the callbacks' usual arities (no spread on the request path).
      const n = args.length;
      const r = n === 1 ? fn(args[0]) : n === 2 ? fn(args[0], args[1]) : n === 3 ? fn(args[0], args[1], args[2])
        : n === 0 ? fn() : fn(...args);
      return typeof r === 'number' ? r >>> 0 : 0;
    } catch (e) {
      this.fail(`Function: ${name} failed: ${describeTrap(e)}`, e);
      return 0;
    } finally {
      this.current = prevCur;
      this.effectiveId = prevEff;
    }
  }

  /** Calls any export with the root context current (test hook; runs after-call actions). */
  invoke(name: string, ...args: (number | bigint)[]): unknown {
    const fn = this.fns[name] as ((...a: (number | bigint)[]) => unknown) | undefined;
    if (!fn) throw new Error(`export ${name} not found`);
    if (this.failed) throw new Error(`VM ${this.name} has failed: ${this.failed}`);
    const prevCur = this.current;
    const prevEff = this.effectiveId;
    this.current = this.rootContext;
    this.effectiveId = 0;
    let r: unknown;
    try {
      r = fn(...args);
    } catch (e) {
      this.fail(`Function: ${name} failed: ${describeTrap(e)}`, e);
      throw e;
    } finally {
      this.current = prevCur;
      this.effectiveId = prevEff;
    }
    this.stopIteration = false;
    this.runAfterActions();
    return r;
  }

  addAfterAction(f: () => void): void {
    this.afterActions.push(f);
  }

  private runAfterActions(): void {
    if (this.draining || this.afterActions.length === 0) return;
    this.draining = true;
    try {
      while (this.afterActions.length) this.afterActions.shift()!();
    } finally {
      this.draining = false;
    }
  }

  fail(message: string, _err?: unknown): void {
    if (this.failed) return;
    this.failed = message;
    this.emit(4, 'host', this.current?.id ?? 0, `Wasm VM failed ${message}`);
    for (const t of this.tickTimer.values()) t.cancel();
    this.tickTimer.clear();
    this.owner.onVmFailed(this, message);
  }

  /** Stops timers and outstanding calls (used when the VM is discarded, e.g. the canary). */
  kill(): void {
    this.closed = true;
    for (const t of this.tickTimer.values()) t.cancel();
    this.tickTimer.clear();
    this.owner.cancelHttpCalls(this);
  }

  /** WasmBase::startShutdown for this VM's root context. */
  shutdown(): void {
    if (this.closed) return;
    for (const t of this.tickTimer.values()) t.cancel();
    this.tickTimer.clear();
    const root = this.rootContext;
    if (root && !this.failed) {
      let done = true;
      if (this.fns.proxy_on_done) done = this.call(root, 'proxy_on_done', root.id) !== 0;
      if (done) {
        if (root.createdInVm && !this.failed && this.fns.proxy_on_delete) this.call(root, 'proxy_on_delete', root.id);
      } else {
        this.pendingDone = true;
      }
    }
    this.closed = true;
    this.owner.cancelHttpCalls(this);
  }

  memoryBytes(): number {
    return this.memory.buffer.byteLength;
  }

  // ---------------------------------------------------------------------------------------------
  // Timers

  setTickPeriod(rootId: number, periodMs: number): void {
    const old = this.tickTimer.get(rootId);
    if (old) old.cancel();
    this.tickTimer.delete(rootId);
    this.tickPeriod.set(rootId, periodMs);
    if (periodMs > 0 && !this.closed) this.armTick(rootId, periodMs);
  }

  private armTick(rootId: number, periodMs: number): void {
    const handle = this.owner.clock.setTimer(periodMs, () => {
      if (this.tickTimer.get(rootId) !== handle) return;
      this.tickTimer.delete(rootId);
      this.tickHandler(rootId);
    });
    this.tickTimer.set(rootId, handle);
  }

  /** Wasm::tickHandler: on_tick, then re-arm with the (possibly updated) period. */
  private tickHandler(rootId: number): void {
    if (this.closed || !this.fns.proxy_on_tick) return;
    const ctx = this.contexts.get(rootId);
    if (ctx && !this.failed) this.call(ctx, 'proxy_on_tick', rootId);
    const period = this.tickPeriod.get(rootId) ?? 0;
    if (period > 0 && !this.tickTimer.has(rootId) && !this.failed && !this.closed) this.armTick(rootId, period);
  }

  // ---------------------------------------------------------------------------------------------
  // HTTP call responses (Context::onHttpCallSuccess / onHttpCallFailure)

  deliverHttpCallResponse(rootId: number, token: number, resp: HttpCallResponse | null): void {
    if (this.closed || this.failed) return;
    const root = this.contexts.get(rootId);
    if (!root || !this.fns.proxy_on_http_call_response) return;
    if (resp) {
      root.httpCallResponse = resp;
      this.addAfterAction(() => { root.httpCallResponse = null; });
      this.call(root, 'proxy_on_http_call_response', rootId, token, resp.headers.size, resp.body.length,
        resp.trailers ? resp.trailers.size : 0);
    } else {
      root.statusCode = WasmResult.BrokenConnection;
      root.statusMessage = 'reset';
      this.addAfterAction(() => { root.statusMessage = ''; });
      this.call(root, 'proxy_on_http_call_response', rootId, token, 0, 0, 0);
    }
    // Nothing else ran the queued cleanup if the guest has no callback body; make sure it runs.
    this.runAfterActions();
  }

  deliverQueueReady(contextId: number, token: number): void {
    if (this.closed || this.failed || !this.fns.proxy_on_queue_ready) return;
    const ctx = this.contexts.get(contextId);
    if (ctx) this.call(ctx, 'proxy_on_queue_ready', contextId, token);
  }

  /** WasmBase::allocMemory: guest malloc with restricted host calls; null on failure. */
  alloc(size: number): number | null {
    const prevR = this.restricted;
    const prevPhase = this.restrictedPhase;
    const prevCur = this.current;
    this.restricted = MALLOC_ALLOWED;
    this.restrictedPhase = 'malloc';
    this.current = this.vmContext;
    let p: number;
    try {
      p = this.malloc(size) >>> 0;
    } catch (e) {
      this.fail(`Function: malloc failed: ${describeTrap(e)}`, e);
      return null;
    } finally {
      this.restricted = prevR;
      this.restrictedPhase = prevPhase;
      this.current = prevCur;
    }
    if (p === 0) return null;
    if (p + size > this.mem().length) return null;
    return p;
  }

  // ---------------------------------------------------------------------------------------------
  // Logging

  emit(level: number, source: 'wasm' | 'host', contextId: number, message: string): void {
    const e: LogEntry = {
      time: this.owner.clock.nowMs(), level, levelName: LOG_LEVELS[level] ?? String(level), source,
      vm: this.name, contextId, message,
    };
    if (this.capturingStartLogs) this.startLogs.push(e);
    if (level < this.owner.logLevel && source === 'wasm') return;
    const ctx = this.contexts.get(contextId);
    if (ctx && ctx.stream) ctx.stream.addLog(e);
    this.owner.emitLog(e);
  }

  // ---------------------------------------------------------------------------------------------
  // Imports

  ctx(): Context {
    const cur = this.current;
    if (!cur) throw new Error('proxy-wasm host: host function called outside of a VM callback');
    if (this.effectiveId === 0) return cur;
    return this.contexts.get(this.effectiveId) ?? cur;
  }

  guard(q: string): void {
    if (this.restricted === null || this.restricted.has(q)) return;
    if (this.restricted === INSTANTIATING) {
      const msg = `Failed to instantiate Wasm module (${this.name}): host function ${q} was called ` +
        'during module instantiation (wasm start function, e.g. AssemblyScript top-level code); ' +
        'Envoy fails to load such a module. Move that code into a callback (proxy_on_vm_start/on_configure).';
      if (!this.startViolation) this.startViolation = msg;
      throw new RestrictedCallback(msg);
    }
    throw new RestrictedCallback(`restricted_callback: host function ${q} is not allowed during ${this.restrictedPhase}`);
  }

  private buildImports(): Record<string, Record<string, unknown>> {
    const imports: Record<string, Record<string, unknown>> = {};
    const provided = hostFunctions(this);
    const problems: string[] = [];
    for (const imp of WA.Module.imports(this.module)) {
      const q = `${imp.module}.${imp.name}`;
      (imports[imp.module] ??= {});
      if (imp.kind !== 'function') {
        problems.push(`${q} (${imp.kind} imports are not supported)`);
        continue;
      }
      const known = knownImportSignature(imp.module, imp.name, this.abi);
      const impl = provided[q];
      if (impl) {
        imports[imp.module][imp.name] = impl;
      } else {
        if (known === undefined) problems.push(q);
        imports[imp.module][imp.name] = () => {
          throw new UnimplementedImportError(q, known === undefined
            ? 'is not provided by Envoy (unknown import)' : 'is not implemented');
        };
      }
    }
    if (problems.length && this.strictImports) {
      throw new Error(`Failed to load Wasm module due to a missing import: ${problems.join(', ')} ` +
        '(Envoy refuses modules with imports it does not provide; pass strictImports:false to stub them)');
    }
    return imports;
  }
}

export function errMsg(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function describeTrap(e: unknown): string {
  if (e instanceof ProcExit) return e.message;
  if (e instanceof UnimplementedImportError) return e.message;
  if (e instanceof Error) return `${e.name === 'RuntimeError' ? 'Uncaught RuntimeError' : e.name}: ${e.message}`;
  return String(e);
}

export { LOG_LEVELS, WASI_MODULES };
