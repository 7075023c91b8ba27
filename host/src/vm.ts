// One Wasm VM (one "thread" in Envoy terms) and its host imports.
//
// Semantics follow proxy-wasm-cpp-host (src/exports.cc, src/context.cc, src/wasm.cc) and Envoy's
// source/extensions/common/wasm/context.cc. Comments name the behaviour they copy.

import { randomFillSync } from 'node:crypto';
import {
  AbiVersion, BUFFER_TYPE_MAX as BUFFER_TYPE_MAX_, BufferType as BufferType_, ENV_IMPORTS,
  HEADER_MAP_TYPE_MAX as HEADER_MAP_TYPE_MAX_, HeaderMapType as HeaderMapType_, LOG_LEVEL_MAX as LOG_LEVEL_MAX_,
  LOG_LEVELS, MALLOC_ALLOWED as MALLOC_ALLOWED_, METRIC_TYPE_MAX as METRIC_TYPE_MAX_, MetricType as MetricType_,
  START_ALLOWED, STREAM_TYPE_MAX as STREAM_TYPE_MAX_, StreamType as StreamType_, WASI_IMPORTS, WASI_MODULES,
  WasmResult as WasmResult_, knownImportSignature,
} from './abi';
import { HeaderMap, lowerAscii as lowerAscii_ } from './header-map';
import { Pair, pairsSize, parsePairs, writePairs } from './pairs';
import type { Metric } from './stores';
import type { Clock, TimerHandle } from './clock';
import type { EnvoyProcess } from './stores';

// Module-local copies of the ABI constants used by the host functions. tsx/esbuild compile every
// reference to an imported binding into a getter call on the other module's exports object; on
// the per-import-call path those getters are measurable, plain locals are not.
const WasmResult = WasmResult_;
type WasmResult = WasmResult_;
const HeaderMapType = HeaderMapType_;
const BufferType = BufferType_;
const StreamType = StreamType_;
const MetricType = MetricType_;
const BUFFER_TYPE_MAX = BUFFER_TYPE_MAX_;
const HEADER_MAP_TYPE_MAX = HEADER_MAP_TYPE_MAX_;
const LOG_LEVEL_MAX = LOG_LEVEL_MAX_;
const METRIC_TYPE_MAX = METRIC_TYPE_MAX_;
const STREAM_TYPE_MAX = STREAM_TYPE_MAX_;
const MALLOC_ALLOWED = MALLOC_ALLOWED_;
const lowerAscii = lowerAscii_;

// ---- minimal WebAssembly typings (Node has the API; @types/node does not declare it) --------
export interface WAModule { readonly __wasmModule?: never }
export interface WAMemory { readonly buffer: ArrayBuffer }
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

// ---- types shared with the host / streams ----------------------------------------------------

export interface LogEntry {
  /** ms since epoch (virtual time in manual mode). */
  time: number;
  level: number;
  levelName: string;
  /** 'wasm' for proxy_log / fd_write, 'host' for the host's own messages. */
  source: 'wasm' | 'host';
  vm: string;
  contextId: number;
  message: string;
}

/** A body buffer as Envoy exposes it to Wasm (Buffer::copyFrom semantics when mutable). */
export class BodyBuffer {
  constructor(public data: Buffer, readonly mutable: boolean) {}
  get size(): number {
    return this.data.length;
  }
  /** Envoy Buffer::copyFrom (source/extensions/common/wasm/context.cc). */
  copyFrom(start: number, length: number, bytes: Buffer): WasmResult {
    if (!this.mutable) return WasmResult.BadArgument;
    if (start === 0) {
      const rest = this.data.subarray(Math.min(length, this.data.length));
      this.data = Buffer.concat([bytes, rest]);
      return WasmResult.Ok;
    }
    if (start >= this.data.length) {
      this.data = Buffer.concat([this.data, bytes]);
      return WasmResult.Ok;
    }
    return WasmResult.BadArgument;
  }
}
const EMPTY_BUFFER = new BodyBuffer(Buffer.alloc(0), false);

/** What a stream context needs from the HTTP stream driving it (decoder/encoder callbacks). */
export interface StreamCallbacks {
  continueDecoding(): void;
  continueEncoding(): void;
  resetStream(details: string): void;
  sendLocalReply(status: number, body: Buffer, headers: Pair[], grpcStatus: number, details: string): void;
  onRequestHeadersModified(): void;
  clearRouteCache(): void;
  addLog(e: LogEntry): void;
  readonly filterState: Map<string, Buffer>;
}

export interface HttpCallResponse {
  headers: HeaderMap;
  body: Buffer;
  trailers: HeaderMap | null;
}

export class Context {
  createdInVm = false;
  destroyed = false;
  // stream state
  stream: StreamCallbacks | null = null;
  requestHeaders: HeaderMap | null = null;
  responseHeaders: HeaderMap | null = null;
  requestTrailers: HeaderMap | null = null;
  responseTrailers: HeaderMap | null = null;
  requestBody: BodyBuffer | null = null;
  responseBody: BodyBuffer | null = null;
  endOfStream = false;
  accessLog: { request: HeaderMap | null; response: HeaderMap | null; responseTrailers: HeaderMap | null } | null = null;
  // root state
  tempPlugin = false;
  httpCallResponse: HttpCallResponse | null = null;
  statusCode = 0;
  statusMessage = '';

  constructor(readonly id: number, readonly root: Context | null) {}
  get isRoot(): boolean {
    return this.root === null;
  }
  get rootContext(): Context {
    return this.root ?? this;
  }
}

/** The host side a VM talks to (implemented by ProxyWasmHost). */
export interface VmOwner {
  readonly process: EnvoyProcess;
  readonly clock: Clock;
  readonly vmId: string;
  readonly rootId: string;
  readonly pluginName: string;
  readonly vmConfig: Buffer;
  readonly pluginConfig: Buffer;
  readonly logLevel: number;
  emitLog(e: LogEntry): void;
  hasCluster(name: string): boolean;
  /** Starts an http call; false means Envoy's AsyncClient failed it synchronously (InternalFailure). */
  httpCall(vm: WasmVm, rootContextId: number, token: number, cluster: string, headers: HeaderMap,
    body: Buffer, trailers: HeaderMap | null, timeoutMs: number): boolean;
  cancelHttpCalls(vm: WasmVm): void;
  onVmFailed(vm: WasmVm, message: string): void;
}

export type VmRole = 'worker' | 'main' | 'canary';

/** Thrown by host imports the host does not implement (always names the import). */
export class UnimplementedImportError extends Error {
  constructor(readonly importName: string, detail = 'is not implemented') {
    super(`proxy-wasm host: import ${importName} ${detail}`);
    this.name = 'UnimplementedImportError';
  }
}

export class ProcExit extends Error {
  constructor(readonly code: number) {
    super(`wasi proc_exit(${code})`);
    this.name = 'ProcExit';
  }
}

class RestrictedCallback extends Error {}

const INSTANTIATING = new Set<string>();

/** Foreign functions Envoy registers that this host does not implement (calling one throws). */
const ENVOY_FOREIGN_FUNCTIONS = new Set([
  'compress', 'uncompress', 'declare_property', 'set_envoy_filter_state', 'expr_create',
  'expr_evaluate', 'expr_delete', 'verify_signature', 'sign',
]);

type Fn = (...args: never[]) => unknown;

/** Guest strings up to this length go through WasmVm's decode cache (longer ones are decoded). */
const STR_CACHE_MAX_LEN = 64;
const STR_CACHE_MASK = 255;

export class WasmVm {
  readonly name: string;
  instance!: WAInstance;
  memory!: WAMemory;
  private fns: Record<string, Fn | undefined> = {};
  private malloc!: (size: number) => number;

  failed: string | null = null;
  closed = false;
  readonly contexts = new Map<number, Context>();
  private nextContextId = 1; // 0 is the VM context
  readonly vmContext = new Context(0, null);
  rootContext!: Context;

  private current: Context | null = null;
  private effectiveId = 0;
  private restricted: Set<string> | null = null;
  private restrictedPhase = '';
  private startViolation: string | null = null;

  private stopIteration = false;
  private afterActions: (() => void)[] = [];
  private draining = false;

  private nextMetric = [MetricType.Counter, MetricType.Gauge, MetricType.Histogram];
  private readonly metricIds = new Map<number, Metric>();
  private nextHttpCallId = 0; // CalloutType::HttpCall, incremented by 4

  private tickPeriod = new Map<number, number>();
  private tickTimer = new Map<number, TimerHandle>();
  pendingDone = false;

  private u8cache: Buffer = Buffer.alloc(0);
  private dvCache: DataView = new DataView(new ArrayBuffer(0));
  private abCache: ArrayBuffer | null = null;
  // Decode cache of short guest strings: slot → string, its byte length (-1: empty slot) and bytes.
  private readonly strCache: string[] = new Array<string>(STR_CACHE_MASK + 1).fill('');
  private readonly strCacheLower: (string | null)[] = new Array<string | null>(STR_CACHE_MASK + 1).fill(null);
  private readonly strCacheLen = new Int32Array(STR_CACHE_MASK + 1).fill(-1);
  private readonly strCacheBytes = Buffer.alloc((STR_CACHE_MASK + 1) * STR_CACHE_MAX_LEN);
  private readonly strCacheView = new DataView(this.strCacheBytes.buffer, this.strCacheBytes.byteOffset, this.strCacheBytes.length);

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

  private rawCall(name: string, args: number[], ctx?: Context): number {
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

  // ---------------------------------------------------------------------------------------------
  // Memory helpers

  /**
   * Byte view of guest memory. The view is cached and only rebuilt when it went stale: growing a
   * (non-shared) WebAssembly.Memory — from JS or by memory.grow in the guest — detaches the old
   * ArrayBuffer, and views of a detached buffer have length 0. This avoids the `memory.buffer`
   * getter (a call into the engine) on every host function call.
   */
  private mem(): Buffer {
    const m = this.u8cache;
    return m.length !== 0 ? m : this.refreshMem();
  }

  private refreshMem(): Buffer {
    const ab = this.memory.buffer;
    if (ab !== this.abCache) {
      this.abCache = ab;
      this.u8cache = Buffer.from(ab);
      this.dvCache = new DataView(ab);
    }
    return this.u8cache;
  }

  /** View of guest memory, or null if out of bounds (WasmVm::getMemory). */
  view(ptr: number, size: number): Buffer | null {
    ptr >>>= 0;
    size >>>= 0;
    const m = this.mem();
    if (ptr + size > m.length) return null;
    return m.subarray(ptr, ptr + size);
  }

  /** Guest bytes as a latin1 string (bytes round-trip exactly), or null if out of bounds. */
  str(ptr: number, size: number): string | null {
    ptr >>>= 0;
    size >>>= 0;
    const m = this.mem();
    if (ptr + size > m.length) return null;
    if (size > STR_CACHE_MAX_LEN) return m.toString('latin1', ptr, ptr + size);
    return this.strCache[this.strSlot(m, ptr, size)];
  }

  /** A header name from guest memory, lower-cased like Http::LowerCaseString; null if out of bounds. */
  key(ptr: number, size: number): string | null {
    ptr >>>= 0;
    size >>>= 0;
    const m = this.mem();
    if (ptr + size > m.length) return null;
    if (size > STR_CACHE_MAX_LEN) return lowerAscii(m.toString('latin1', ptr, ptr + size));
    const slot = this.strSlot(m, ptr, size);
    let k = this.strCacheLower[slot];
    if (k === null) k = this.strCacheLower[slot] = lowerAscii(this.strCache[slot]);
    return k;
  }

  /**
   * Short strings (header names and values) repeat from request to request: a small
   * content-addressed, direct-mapped cache keeps the decoded string of the bytes last seen in
   * each slot, so the common case allocates nothing and later hashing/comparisons reuse the
   * same string. Returns the slot holding exactly these bytes (in bounds, size <= max).
   */
  private strSlot(m: Buffer, ptr: number, size: number): number {
    const end = ptr + size;
    // Slot from the length and a few sampled bytes (the full comparison below decides).
    let h = size;
    if (size !== 0) {
      h = Math.imul(h, 31) + m[ptr];
      h = Math.imul(h, 31) + m[end - 1];
      h = Math.imul(h, 31) + m[ptr + (size >>> 1)];
      h = Math.imul(h, 31) + m[ptr + (size >>> 2)];
      h = Math.imul(h, 31) + m[end - 1 - (size >>> 2)];
    }
    const slot = (h ^ (h >>> 8) ^ (h >>> 16)) & STR_CACHE_MASK;
    const bytes = this.strCacheBytes;
    const at = slot * STR_CACHE_MAX_LEN;
    if (this.strCacheLen[slot] === size) {
      // Compare 4 bytes at a time, then the tail.
      const dv = this.dvCache;
      const cdv = this.strCacheView;
      let i = 0;
      while (i + 4 <= size && dv.getUint32(ptr + i) === cdv.getUint32(at + i)) i += 4;
      if (i + 4 > size) {
        while (i < size && bytes[at + i] === m[ptr + i]) i++;
        if (i === size) return slot;
      }
    }
    this.strCache[slot] = size === 0 ? '' : m.toString('latin1', ptr, end);
    this.strCacheLower[slot] = null;
    this.strCacheLen[slot] = size;
    m.copy(bytes, at, ptr, end);
    return slot;
  }

  setU32(ptr: number, v: number): boolean {
    ptr >>>= 0;
    const m = this.mem();
    if (ptr + 4 > m.length) return false;
    this.dvCache.setUint32(ptr, v >>> 0, true);
    return true;
  }

  setU64(ptr: number, v: bigint): boolean {
    ptr >>>= 0;
    const m = this.mem();
    if (ptr + 8 > m.length) return false;
    this.dvCache.setBigUint64(ptr, BigInt.asUintN(64, v), true);
    return true;
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

  /** WasmBase::copyToPointerSize. */
  copyOut(data: Buffer | string, ptrPtr: number, sizePtr: number): boolean {
    const size = typeof data === 'string' ? data.length : data.length;
    let p = 0;
    if (size > 0) {
      const a = this.alloc(size);
      if (a === null) return false;
      p = a;
      const m = this.mem();
      if (typeof data !== 'string') data.copy(m, p);
      else if (size <= STR_CACHE_MAX_LEN) {
        // Like Buffer#write(…, 'latin1'): each UTF-16 code unit keeps its low byte.
        for (let i = 0; i < size; i++) m[p + i] = data.charCodeAt(i);
      } else m.write(data, p, size, 'latin1');
    }
    return this.setU32(ptrPtr, p) && this.setU32(sizePtr, size);
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

  private ctx(): Context {
    const cur = this.current;
    if (!cur) throw new Error('proxy-wasm host: host function called outside of a VM callback');
    if (this.effectiveId === 0) return cur;
    return this.contexts.get(this.effectiveId) ?? cur;
  }

  private guard(q: string): void {
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
    const provided = this.hostFunctions();
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

  /** Host function implementations keyed by "module.name". */
  private hostFunctions(): Record<string, unknown> {
    const vm = this;
    const o = this.owner;
    const F: Record<string, unknown> = {};
    const env = (name: string, f: unknown) => { F[`env.${name}`] = f; };

    // -- general ----------------------------------------------------------------------------
    env('proxy_log', (level: number, ptr: number, size: number) => {
      vm.guard('env.proxy_log');
      if ((level >>> 0) > LOG_LEVEL_MAX) return WasmResult.BadArgument;
      const c = vm.ctx();
      const m = vm.view(ptr, size);
      if (!m) return WasmResult.InvalidMemoryAccess;
      vm.emit(level >>> 0, 'wasm', c.id, m.toString('utf8'));
      return WasmResult.Ok;
    });
    if (this.abi === '0.2.1') {
      env('proxy_get_log_level', (ptr: number) => {
        vm.guard('env.proxy_get_log_level');
        return vm.setU32(ptr, o.logLevel) ? WasmResult.Ok : WasmResult.InvalidMemoryAccess;
      });
    }
    env('proxy_get_current_time_nanoseconds', (ptr: number) => {
      vm.guard('env.proxy_get_current_time_nanoseconds');
      return vm.setU64(ptr, o.clock.nowNs()) ? WasmResult.Ok : WasmResult.InvalidMemoryAccess;
    });
    env('proxy_set_tick_period_milliseconds', (period: number) => {
      vm.guard('env.proxy_set_tick_period_milliseconds');
      vm.setTickPeriod(vm.ctx().rootContext.id, period >>> 0);
      return WasmResult.Ok;
    });
    env('proxy_get_status', (codePtr: number, msgPtrPtr: number, msgSizePtr: number) => {
      vm.guard('env.proxy_get_status');
      const root = vm.ctx().rootContext;
      if (!vm.setU32(codePtr, root.statusCode)) return WasmResult.InvalidMemoryAccess;
      return vm.copyOut(root.statusMessage, msgPtrPtr, msgSizePtr) ? WasmResult.Ok : WasmResult.InvalidMemoryAccess;
    });
    env('proxy_get_property', (pathPtr: number, pathSize: number, valPtrPtr: number, valSizePtr: number) => {
      vm.guard('env.proxy_get_property');
      const c = vm.ctx();
      const path = vm.view(pathPtr, pathSize);
      if (!path) return WasmResult.InvalidMemoryAccess;
      const value = vm.getProperty(c, Buffer.from(path));
      if (typeof value === 'number') return value;
      return vm.copyOut(value, valPtrPtr, valSizePtr) ? WasmResult.Ok : WasmResult.InvalidMemoryAccess;
    });
    env('proxy_set_property', (keyPtr: number, keySize: number, valPtr: number, valSize: number) => {
      vm.guard('env.proxy_set_property');
      const c = vm.ctx();
      const key = vm.str(keyPtr, keySize);
      const val = vm.view(valPtr, valSize);
      if (key === null || !val) return WasmResult.InvalidMemoryAccess;
      // Context::setProperty: a (CelState) filter state entry "wasm.<path>" on the stream info.
      if (!c.stream) return WasmResult.NotFound;
      c.stream.filterState.set(key, Buffer.from(val));
      return WasmResult.Ok;
    });
    env('proxy_done', () => {
      vm.guard('env.proxy_done');
      vm.ctx();
      // WasmBase::done: only valid while the root context is pending shutdown.
      if (!vm.pendingDone) return WasmResult.NotFound;
      vm.pendingDone = false;
      const root = vm.rootContext;
      vm.addAfterAction(() => {
        if (!vm.failed && vm.fns.proxy_on_delete) vm.rawCall('proxy_on_delete', [root.id], root);
      });
      return WasmResult.Ok;
    });
    env('proxy_set_effective_context', (id: number) => {
      vm.guard('env.proxy_set_effective_context');
      vm.ctx();
      const cid = id >>> 0;
      if (!vm.contexts.has(cid)) return WasmResult.BadArgument;
      vm.effectiveId = cid;
      return WasmResult.Ok;
    });
    env('proxy_call_foreign_function', (namePtr: number, nameSize: number, argPtr: number, argSize: number,
      resPtr: number, resSizePtr: number) => {
      vm.guard('env.proxy_call_foreign_function');
      const c = vm.ctx();
      const name = vm.str(namePtr, nameSize);
      if (name === null) return WasmResult.InvalidMemoryAccess;
      if (!vm.view(argPtr, argSize)) return WasmResult.InvalidMemoryAccess;
      if (name === 'clear_route_cache') {
        // Envoy >= 1.33 foreign function (PR #36671).
        c.stream?.clearRouteCache();
        if (resPtr !== 0 && !vm.setU32(resPtr, 0)) return WasmResult.InvalidMemoryAccess;
        if (resSizePtr !== 0 && !vm.setU32(resSizePtr, 0)) return WasmResult.InvalidMemoryAccess;
        return WasmResult.Ok;
      }
      if (ENVOY_FOREIGN_FUNCTIONS.has(name)) {
        throw new UnimplementedImportError(`env.proxy_call_foreign_function("${name}")`);
      }
      return WasmResult.NotFound;
    });

    // -- stream control ----------------------------------------------------------------------
    env('proxy_continue_stream', (type: number) => {
      vm.guard('env.proxy_continue_stream');
      const c = vm.ctx();
      type >>>= 0;
      if (type > STREAM_TYPE_MAX) return WasmResult.BadArgument;
      // Context::continueStream
      if (type === StreamType.Request || type === StreamType.Response) {
        const s = c.stream;
        if (s) {
          if (type === StreamType.Request) vm.addAfterAction(() => s.continueDecoding());
          else vm.addAfterAction(() => s.continueEncoding());
        }
        c.requestHeaders = null;
        c.requestBody = null;
        c.requestTrailers = null;
        return WasmResult.Ok;
      }
      if (type === StreamType.Downstream) return WasmResult.Ok;
      return WasmResult.Unimplemented;
    });
    env('proxy_close_stream', (type: number) => {
      vm.guard('env.proxy_close_stream');
      const c = vm.ctx();
      type >>>= 0;
      if (type > STREAM_TYPE_MAX) return WasmResult.BadArgument;
      if ((type === StreamType.Request || type === StreamType.Response) && c.stream) {
        const s = c.stream;
        vm.addAfterAction(() => s.resetStream('wasm_close_stream'));
      }
      return WasmResult.Ok;
    });
    env('proxy_send_local_response', (status: number, detPtr: number, detSize: number, bodyPtr: number,
      bodySize: number, hdrPtr: number, hdrSize: number, grpcStatus: number) => {
      vm.guard('env.proxy_send_local_response');
      const c = vm.ctx();
      const details = vm.view(detPtr, detSize);
      const body = vm.view(bodyPtr, bodySize);
      const hdrs = vm.view(hdrPtr, hdrSize);
      if (!details || !body || !hdrs) return WasmResult.InvalidMemoryAccess;
      const headers = parsePairs(hdrs);
      if (c.stream) {
        const s = c.stream;
        const b = Buffer.from(body);
        const d = details.toString('latin1').replace(/\s/g, '_');
        vm.addAfterAction(() => s.sendLocalReply(status >>> 0, b, headers, grpcStatus | 0, d));
      }
      vm.stopIteration = true;
      return WasmResult.Ok;
    });

    // -- shared data / queues ---------------------------------------------------------------
    env('proxy_get_shared_data', (keyPtr: number, keySize: number, valPtrPtr: number, valSizePtr: number, casPtr: number) => {
      vm.guard('env.proxy_get_shared_data');
      vm.ctx();
      const key = vm.str(keyPtr, keySize);
      if (key === null) return WasmResult.InvalidMemoryAccess;
      const e = o.process.sharedData.get(o.vmId, key);
      if (!e) return WasmResult.NotFound;
      if (!vm.copyOut(e.value, valPtrPtr, valSizePtr)) return WasmResult.InvalidMemoryAccess;
      return vm.setU32(casPtr, e.cas) ? WasmResult.Ok : WasmResult.InvalidMemoryAccess;
    });
    env('proxy_set_shared_data', (keyPtr: number, keySize: number, valPtr: number, valSize: number, cas: number) => {
      vm.guard('env.proxy_set_shared_data');
      vm.ctx();
      const key = vm.str(keyPtr, keySize);
      const val = vm.view(valPtr, valSize);
      if (key === null || !val) return WasmResult.InvalidMemoryAccess;
      return o.process.sharedData.set(o.vmId, key, val, cas >>> 0);
    });
    env('proxy_register_shared_queue', (namePtr: number, nameSize: number, tokenPtr: number) => {
      vm.guard('env.proxy_register_shared_queue');
      const c = vm.ctx();
      const name = vm.str(namePtr, nameSize);
      if (name === null) return WasmResult.InvalidMemoryAccess;
      const token = o.process.queues.register(o.vmId, name, c.rootContext.id, {
        post: (cid, tok) => o.clock.post(() => vm.deliverQueueReady(cid, tok)),
      });
      return vm.setU32(tokenPtr, token) ? WasmResult.Ok : WasmResult.InvalidMemoryAccess;
    });
    env('proxy_resolve_shared_queue', (vmIdPtr: number, vmIdSize: number, namePtr: number, nameSize: number, tokenPtr: number) => {
      vm.guard('env.proxy_resolve_shared_queue');
      vm.ctx();
      const vmId = vm.str(vmIdPtr, vmIdSize);
      const name = vm.str(namePtr, nameSize);
      if (vmId === null || name === null) return WasmResult.InvalidMemoryAccess;
      const token = o.process.queues.resolve(vmId === '' ? o.vmId : vmId, name);
      if (vm.failed || token === 0) return WasmResult.NotFound;
      return vm.setU32(tokenPtr, token) ? WasmResult.Ok : WasmResult.InvalidMemoryAccess;
    });
    env('proxy_dequeue_shared_queue', (token: number, dataPtrPtr: number, dataSizePtr: number) => {
      vm.guard('env.proxy_dequeue_shared_queue');
      vm.ctx();
      const r = o.process.queues.dequeue(token >>> 0);
      if (r.result !== WasmResult.Ok) return r.result;
      return vm.copyOut(r.data!, dataPtrPtr, dataSizePtr) ? WasmResult.Ok : WasmResult.InvalidMemoryAccess;
    });
    env('proxy_enqueue_shared_queue', (token: number, dataPtr: number, dataSize: number) => {
      vm.guard('env.proxy_enqueue_shared_queue');
      vm.ctx();
      const d = vm.view(dataPtr, dataSize);
      if (!d) return WasmResult.InvalidMemoryAccess;
      return o.process.queues.enqueue(token >>> 0, d);
    });

    // -- header maps --------------------------------------------------------------------------
    // add and replace differ only in what they do to the map (add another value / set the only one)
    const writeHeader = (name: string, replace: boolean) =>
      (type: number, kPtr: number, kSize: number, vPtr: number, vSize: number): number => {
        vm.guard(name);
        type >>>= 0;
        if (type > HEADER_MAP_TYPE_MAX) return WasmResult.BadArgument;
        const c = vm.ctx();
        const k = vm.key(kPtr, kSize);
        const v = vm.str(vPtr, vSize);
        if (k === null || v === null) return WasmResult.InvalidMemoryAccess;
        const map = getMap(c, type);
        if (!map) return WasmResult.BadArgument;
        if (replace) map.setLower(k, v);
        else map.addLower(k, v);
        onHeadersModified(c, type);
        return WasmResult.Ok;
      };
    env('proxy_add_header_map_value', writeHeader('env.proxy_add_header_map_value', false));
    env('proxy_get_header_map_value', (type: number, kPtr: number, kSize: number, vPtrPtr: number, vSizePtr: number) => {
      vm.guard('env.proxy_get_header_map_value');
      type >>>= 0;
      if (type > HEADER_MAP_TYPE_MAX) return WasmResult.BadArgument;
      const c = vm.ctx();
      const k = vm.key(kPtr, kSize);
      if (k === null) return WasmResult.InvalidMemoryAccess;
      const map = getConstMap(c, type);
      if (!map) return c.accessLog ? WasmResult.NotFound : WasmResult.BadArgument;
      const v = map.getLower(k);
      if (v === undefined) return WasmResult.NotFound;
      return vm.copyOut(v, vPtrPtr, vSizePtr) ? WasmResult.Ok : WasmResult.InvalidMemoryAccess;
    });
    env('proxy_replace_header_map_value', writeHeader('env.proxy_replace_header_map_value', true));
    env('proxy_remove_header_map_value', (type: number, kPtr: number, kSize: number) => {
      vm.guard('env.proxy_remove_header_map_value');
      type >>>= 0;
      if (type > HEADER_MAP_TYPE_MAX) return WasmResult.BadArgument;
      const c = vm.ctx();
      const k = vm.key(kPtr, kSize);
      if (k === null) return WasmResult.InvalidMemoryAccess;
      const map = getMap(c, type);
      if (!map) return WasmResult.BadArgument;
      map.removeLower(k);
      onHeadersModified(c, type);
      return WasmResult.Ok;
    });
    env('proxy_get_header_map_pairs', (type: number, ptrPtr: number, sizePtr: number) => {
      vm.guard('env.proxy_get_header_map_pairs');
      type >>>= 0;
      if (type > HEADER_MAP_TYPE_MAX) return WasmResult.BadArgument;
      const c = vm.ctx();
      const map = getConstMap(c, type);
      const entries = map ? map.entries : [];
      if (entries.length === 0) {
        return vm.copyOut('', ptrPtr, sizePtr) ? WasmResult.Ok : WasmResult.InvalidMemoryAccess;
      }
      const size = pairsSize(entries);
      const p = vm.alloc(size);
      if (p === null) return WasmResult.InvalidMemoryAccess;
      writePairs(entries, vm.mem(), p);
      return vm.setU32(ptrPtr, p) && vm.setU32(sizePtr, size) ? WasmResult.Ok : WasmResult.InvalidMemoryAccess;
    });
    env('proxy_set_header_map_pairs', (type: number, ptr: number, size: number) => {
      vm.guard('env.proxy_set_header_map_pairs');
      type >>>= 0;
      if (type > HEADER_MAP_TYPE_MAX) return WasmResult.BadArgument;
      const c = vm.ctx();
      const data = vm.view(ptr, size);
      if (!data) return WasmResult.InvalidMemoryAccess;
      const map = getMap(c, type);
      if (!map) return WasmResult.BadArgument;
      map.setPairs(parsePairs(data));
      onHeadersModified(c, type);
      return WasmResult.Ok;
    });
    env('proxy_get_header_map_size', (type: number, resultPtr: number) => {
      vm.guard('env.proxy_get_header_map_size');
      type >>>= 0;
      if (type > HEADER_MAP_TYPE_MAX) return WasmResult.BadArgument;
      const c = vm.ctx();
      const map = getMap(c, type);
      if (!map) return WasmResult.BadArgument;
      return vm.setU32(resultPtr, map.byteSize()) ? WasmResult.Ok : WasmResult.InvalidMemoryAccess;
    });

    // -- buffers ------------------------------------------------------------------------------
    env('proxy_get_buffer_bytes', (type: number, start: number, length: number, ptrPtr: number, sizePtr: number) => {
      vm.guard('env.proxy_get_buffer_bytes');
      type >>>= 0;
      if (type > BUFFER_TYPE_MAX) return WasmResult.BadArgument;
      const c = vm.ctx();
      const buf = vm.getBuffer(c, type);
      if (!buf) return WasmResult.NotFound;
      start >>>= 0;
      length >>>= 0;
      const size = buf.size;
      if (start > size) length = 0;
      else if (start + length > size) length = size - start;
      if (length === 0) {
        return vm.setU32(ptrPtr, 0) && vm.setU32(sizePtr, 0) ? WasmResult.Ok : WasmResult.InvalidMemoryAccess;
      }
      return vm.copyOut(buf.data.subarray(start, start + length), ptrPtr, sizePtr)
        ? WasmResult.Ok : WasmResult.InvalidMemoryAccess;
    });
    env('proxy_get_buffer_status', (type: number, lengthPtr: number, flagsPtr: number) => {
      vm.guard('env.proxy_get_buffer_status');
      type >>>= 0;
      if (type > BUFFER_TYPE_MAX) return WasmResult.BadArgument;
      const c = vm.ctx();
      const buf = vm.getBuffer(c, type);
      if (!buf) return WasmResult.NotFound;
      if (!vm.setU32(lengthPtr, buf.size)) return WasmResult.InvalidMemoryAccess;
      return vm.setU32(flagsPtr, 0) ? WasmResult.Ok : WasmResult.InvalidMemoryAccess;
    });
    env('proxy_set_buffer_bytes', (type: number, start: number, length: number, dataPtr: number, dataSize: number) => {
      vm.guard('env.proxy_set_buffer_bytes');
      type >>>= 0;
      if (type > BUFFER_TYPE_MAX) return WasmResult.BadArgument;
      const c = vm.ctx();
      const buf = vm.getBuffer(c, type);
      if (!buf) return WasmResult.NotFound;
      const data = vm.view(dataPtr, dataSize);
      if (!data) return WasmResult.InvalidMemoryAccess;
      return buf.copyFrom(start >>> 0, length >>> 0, Buffer.from(data));
    });

    // -- http call ----------------------------------------------------------------------------
    env('proxy_http_call', (uriPtr: number, uriSize: number, hdrPtr: number, hdrSize: number, bodyPtr: number,
      bodySize: number, trlPtr: number, trlSize: number, timeout: number, tokenPtr: number) => {
      vm.guard('env.proxy_http_call');
      const root = vm.ctx().rootContext;
      const uri = vm.str(uriPtr, uriSize);
      const body = vm.view(bodyPtr, bodySize);
      const hdrs = vm.view(hdrPtr, hdrSize);
      const trls = vm.view(trlPtr, trlSize);
      if (uri === null || !body || !hdrs || !trls) return WasmResult.InvalidMemoryAccess;
      const headerPairs = parsePairs(hdrs);
      const trailerPairs = parsePairs(trls);
      // Verify the token memory before starting the async operation.
      if (!vm.setU32(tokenPtr, 0)) return WasmResult.InvalidMemoryAccess;
      // Context::httpCall
      if ((timeout | 0) < 0) return WasmResult.BadArgument;
      if (!o.hasCluster(uri)) return WasmResult.BadArgument;
      const headers = new HeaderMap('request', headerPairs);
      if (headers.get(':path') === undefined || headers.get(':method') === undefined
        || headers.get(':authority') === undefined) return WasmResult.BadArgument;
      const b = Buffer.from(body);
      if (b.length > 0) headers.set('content-length', String(b.length));
      const trailers = trailerPairs.length ? new HeaderMap('request-trailers', trailerPairs) : null;
      vm.nextHttpCallId = (vm.nextHttpCallId + 4) >>> 0;
      const token = vm.nextHttpCallId;
      if (!o.httpCall(vm, root.id, token, uri, headers, b, trailers, timeout | 0)) return WasmResult.InternalFailure;
      vm.setU32(tokenPtr, token);
      return WasmResult.Ok;
    });

    // -- metrics ------------------------------------------------------------------------------
    env('proxy_define_metric', (type: number, namePtr: number, nameSize: number, idPtr: number) => {
      vm.guard('env.proxy_define_metric');
      vm.ctx();
      const name = vm.view(namePtr, nameSize);
      if (!name) return WasmResult.InvalidMemoryAccess;
      type >>>= 0;
      if (type > METRIC_TYPE_MAX) return WasmResult.BadArgument;
      // Envoy allocates a new id per definition (Wasm::next*MetricId, += 4); the stat itself is
      // shared by name across all VMs of the process.
      vm.nextMetric[type] = (vm.nextMetric[type] + 4) >>> 0;
      const id = vm.nextMetric[type];
      vm.metricIds.set(id, o.process.metrics.getOrCreate(type, name.toString('utf8')));
      return vm.setU32(idPtr, id) ? WasmResult.Ok : WasmResult.InvalidMemoryAccess;
    });
    env('proxy_increment_metric', (id: number, offset: bigint) => {
      vm.guard('env.proxy_increment_metric');
      vm.ctx();
      id >>>= 0;
      const t = id & 3;
      const m = vm.metricIds.get(id);
      if (t === MetricType.Counter) {
        if (!m) return WasmResult.NotFound;
        if (offset > 0n) {
          m.value = BigInt.asUintN(64, m.value + offset);
          return WasmResult.Ok;
        }
        return WasmResult.BadArgument;
      }
      if (t === MetricType.Gauge) {
        if (!m) return WasmResult.NotFound;
        m.value = BigInt.asUintN(64, m.value + offset);
        return WasmResult.Ok;
      }
      return WasmResult.BadArgument;
    });
    env('proxy_record_metric', (id: number, value: bigint) => {
      vm.guard('env.proxy_record_metric');
      vm.ctx();
      id >>>= 0;
      const v = BigInt.asUintN(64, value);
      const m = vm.metricIds.get(id);
      if (!m) return WasmResult.NotFound;
      const t = id & 3;
      if (t === MetricType.Counter) m.value = BigInt.asUintN(64, m.value + v);
      else if (t === MetricType.Gauge) m.value = v;
      else if (t === MetricType.Histogram) o.process.metrics.recordHistogram(m, Number(v));
      else return WasmResult.NotFound;
      return WasmResult.Ok;
    });
    env('proxy_get_metric', (id: number, resultPtr: number) => {
      vm.guard('env.proxy_get_metric');
      vm.ctx();
      id >>>= 0;
      const t = id & 3;
      if (t !== MetricType.Counter && t !== MetricType.Gauge) return WasmResult.BadArgument;
      const m = vm.metricIds.get(id);
      if (!m) return WasmResult.NotFound;
      return vm.setU64(resultPtr, m.value) ? WasmResult.Ok : WasmResult.InvalidMemoryAccess;
    });

    // -- misc env registered by cpp-host --------------------------------------------------------
    env('pthread_equal', (a: number, b: number) => { vm.guard('env.pthread_equal'); return a === b ? 1 : 0; });
    env('emscripten_notify_memory_growth', (_i: number) => { vm.guard('env.emscripten_notify_memory_growth'); });

    // Known-but-unimplemented env imports: stubs that throw (created in buildImports).
    void ENV_IMPORTS;

    // -- WASI -----------------------------------------------------------------------------------
    for (const m of WASI_MODULES) {
      const w = (name: string, f: unknown) => { F[`${m}.${name}`] = f; };
      w('fd_write', (fd: number, iovs: number, iovsLen: number, nwrittenPtr: number) => {
        vm.guard(`${m}.fd_write`);
        const c = vm.ctx();
        const level = fd === 1 ? 2 : fd === 2 ? 4 : -1;
        if (level < 0) return 8; // EBADF
        let s = '';
        let total = 0;
        for (let i = 0; i < (iovsLen >>> 0); i++) {
          const iov = vm.view(iovs + i * 8, 8);
          if (!iov) return 21; // EFAULT
          const p = iov.readUInt32LE(0);
          const l = iov.readUInt32LE(4);
          const d = vm.view(p, l);
          if (!d) return 21;
          s += d.toString('utf8');
          total += l;
        }
        if (s.length) vm.emit(level, 'wasm', c.id, s.endsWith('\n') ? s.slice(0, -1) : s);
        return vm.setU32(nwrittenPtr, total) ? 0 : 21;
      });
      w('clock_time_get', (id: number, _precision: bigint, resultPtr: number) => {
        vm.guard(`${m}.clock_time_get`);
        let t: bigint;
        if (id === 0) t = o.clock.nowNs();
        else if (id === 1) t = o.clock.monoNs();
        else return 28; // EINVAL
        return vm.setU64(resultPtr, t) ? 0 : 21;
      });
      w('random_get', (ptr: number, len: number) => {
        vm.guard(`${m}.random_get`);
        len >>>= 0;
        if (len > 64 * 1024) return 28;
        if (len === 0) return 0;
        const d = vm.view(ptr, len);
        if (!d) return 21;
        randomFillSync(d);
        return 0;
      });
      w('proc_exit', (code: number) => {
        vm.guard(`${m}.proc_exit`);
        const c = vm.current;
        vm.emit(5, 'host', c?.id ?? 0, `wasi proc_exit(${code | 0}) called: the VM is stopped`);
        throw new ProcExit(code | 0);
      });
      const zero2 = (name: string) => w(name, (a: number, b: number) => {
        vm.guard(`${m}.${name}`);
        return vm.setU32(a, 0) && vm.setU32(b, 0) ? 0 : 21;
      });
      zero2('args_sizes_get');
      zero2('environ_sizes_get');
      w('args_get', (_a: number, _b: number) => { vm.guard(`${m}.args_get`); return 0; });
      w('environ_get', (_a: number, _b: number) => { vm.guard(`${m}.environ_get`); return 0; });
      w('sched_yield', () => { vm.guard(`${m}.sched_yield`); return 0; });
      void WASI_IMPORTS;
    }
    return F;
  }

  // ---------------------------------------------------------------------------------------------
  // Buffers & properties

  /** Context::getBuffer */
  private getBuffer(c: Context, type: number): BodyBuffer | null {
    switch (type) {
      case BufferType.HttpRequestBody:
        return c.requestBody ?? EMPTY_BUFFER;
      case BufferType.HttpResponseBody:
        return c.responseBody ?? EMPTY_BUFFER;
      case BufferType.NetworkDownstreamData:
      case BufferType.NetworkUpstreamData:
      case BufferType.GrpcReceiveBuffer:
      case BufferType.CallData:
        return EMPTY_BUFFER;
      case BufferType.HttpCallResponseBody: {
        const r = c.rootContext.httpCallResponse;
        return r ? new BodyBuffer(r.body, false) : null;
      }
      case BufferType.VmConfiguration:
        return new BodyBuffer(this.owner.vmConfig, false);
      case BufferType.PluginConfiguration:
        return c.tempPlugin ? new BodyBuffer(this.owner.pluginConfig, false) : null;
      default:
        return null;
    }
  }

  /**
   * Context::getProperty for the properties this host knows: plugin_name, plugin_root_id,
   * plugin_vm_id, a few request attributes, and filter state set by proxy_set_property.
   * Path segments are separated by '\0'. Unknown paths give NotFound, like Envoy.
   */
  private getProperty(c: Context, path: Buffer): Buffer | string | WasmResult {
    const parts: string[] = [];
    let start = 0;
    while (start < path.length) {
      let end = path.indexOf(0, start);
      if (end < 0) end = path.length;
      parts.push(path.toString('latin1', start, end));
      start = end + 1;
    }
    if (parts.length === 0) return WasmResult.NotFound;
    const [top, ...rest] = parts;
    const leaf = (v: string | Buffer | undefined): Buffer | string | WasmResult =>
      v === undefined || rest.length > 0 ? WasmResult.NotFound : v;
    switch (top) {
      case 'plugin_name': return leaf(this.owner.pluginName);
      case 'plugin_root_id': return leaf(this.owner.rootId);
      case 'plugin_vm_id': return leaf(this.owner.vmId);
      case 'request': {
        const h = c.accessLog ? c.accessLog.request : c.requestHeaders;
        if (!h || rest.length === 0) return WasmResult.NotFound;
        const [field, ...more] = rest;
        let v: string | undefined;
        if (field === 'headers') {
          if (more.length !== 1) return WasmResult.NotFound;
          return h.get(more[0]) ?? WasmResult.NotFound;
        }
        if (more.length) return WasmResult.NotFound;
        if (field === 'path') v = h.get(':path');
        else if (field === 'url_path') v = h.get(':path')?.split('?')[0];
        else if (field === 'host') v = h.get(':authority');
        else if (field === 'method') v = h.get(':method');
        else if (field === 'scheme') v = h.get(':scheme');
        else if (field === 'id') v = h.get('x-request-id');
        return v ?? WasmResult.NotFound;
      }
      default: {
        const fs = c.stream?.filterState.get(top);
        return leaf(fs);
      }
    }
  }
}

// --- header map selection (Context::getMap / getConstMap) ---------------------------------------

function getMap(c: Context, type: number): HeaderMap | null {
  switch (type) {
    case HeaderMapType.RequestHeaders: return c.requestHeaders;
    case HeaderMapType.RequestTrailers: return c.requestTrailers;
    case HeaderMapType.ResponseHeaders: return c.responseHeaders;
    case HeaderMapType.ResponseTrailers: return c.responseTrailers;
    default: return null;
  }
}

function getConstMap(c: Context, type: number): HeaderMap | null {
  const al = c.accessLog;
  switch (type) {
    case HeaderMapType.RequestHeaders: return al ? al.request : c.requestHeaders;
    case HeaderMapType.RequestTrailers: return al ? null : c.requestTrailers;
    case HeaderMapType.ResponseHeaders: return al ? al.response : c.responseHeaders;
    case HeaderMapType.ResponseTrailers: return al ? al.responseTrailers : c.responseTrailers;
    case HeaderMapType.HttpCallResponseHeaders: return c.rootContext.httpCallResponse?.headers ?? null;
    case HeaderMapType.HttpCallResponseTrailers: return c.rootContext.httpCallResponse?.trailers ?? null;
    default: return null;
  }
}

/** Envoy (>= 1.17) clears the route cache when the Wasm filter modifies request headers. */
function onHeadersModified(c: Context, type: number): void {
  if (type === HeaderMapType.RequestHeaders && c.stream) c.stream.onRequestHeadersModified();
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
