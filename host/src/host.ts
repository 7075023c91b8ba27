// ProxyWasmHost: loads a Proxy-Wasm module like Envoy does (one compiled module, one VM per
// worker thread sharing a vm_id, plus Envoy's canary and main-thread VMs), and drives HTTP
// streams, timers, http calls, shared data/queues and metrics with Envoy's semantics.
//
// It holds no product logic.

import { readFileSync } from 'node:fs';
import { AbiVersion, LOG_LEVELS, LogLevelName, MetricType, knownImportSignature, logLevelValue } from './abi';
import { Clock, ManualClock, RealClock } from './clock';
import { HeaderMap } from './header-map';
import { Endpoint, destroyAgents, sendHttp } from './http-client';
import type { Pair } from './pairs';
import { EnvoyProcess, Metric, prometheusText, statsText } from './stores';
import { DownstreamSink, HttpStream, UpstreamHandler } from './stream';
import { HttpCallResponse, LogEntry, VmOwner, WA, WAModule, WasmVm, errMsg } from './vm';
import { readImports } from './wasm-binary';

/** Compiled modules by the identity of their bytes (a WeakMap: dropped with the buffer). */
const compiledModules = new WeakMap<Uint8Array, WAModule>();

/** Envoy's default per_connection_buffer_limit_bytes (1 MiB), the filter manager's buffer limit. */
export const DEFAULT_BUFFER_LIMIT_BYTES = 1024 * 1024;

// --- clusters ----------------------------------------------------------------------------------

/** What an in-process cluster handler receives. */
export interface ClusterRequest {
  cluster: string;
  method: string;
  path: string;
  authority: string;
  /** All request headers including pseudo headers, in order. */
  headers: Pair[];
  body: Buffer;
  trailers: Pair[];
}

/** What an in-process cluster handler returns. */
export interface ClusterResponse {
  status: number;
  headers?: Record<string, string> | Pair[];
  body?: string | Buffer;
  trailers?: Record<string, string> | Pair[];
  /** Host-only extension: deliver the response after this many ms (virtual ms in manual mode). */
  delayMs?: number;
  /** Host-only extension: reset the stream instead of answering (Envoy onFailure → 0,0,0). */
  reset?: boolean;
}

export type ClusterHandler = (req: ClusterRequest) => ClusterResponse | Promise<ClusterResponse>;

/**
 * A cluster the plugin can reach with proxy_http_call (and the proxy's router).
 * - {address, port} or {endpoints}: real HTTP/1.1 over TCP (STATIC / *_DNS clusters);
 * - {originalDst: {headerName}}: ORIGINAL_DST with use_http_header;
 * - {handler}: HOST-ONLY EXTENSION, an in-process upstream for tests and simulations.
 */
export type ClusterSpec =
  | { address: string; port: number }
  | { endpoints: Endpoint[] }
  | { originalDst: { headerName?: string } }
  | { handler: ClusterHandler };

export interface HostOptions {
  /** Module bytes or a path to the .wasm file. */
  wasm: Uint8Array | string;
  vmId?: string;
  rootId?: string;
  /** Plugin name (Envoy config.name); defaults to rootId. */
  pluginName?: string;
  pluginConfig?: string | Uint8Array;
  vmConfig?: string | Uint8Array;
  /** Worker threads = VMs serving requests (Envoy --concurrency). Default 2. */
  workers?: number;
  /** Envoy also creates the thread-local plugin on the main thread (it ticks, serves no requests). Default true. */
  mainThread?: boolean;
  /** Envoy starts and configures a throw-away canary VM first (createWasm → canary). Default true. */
  canary?: boolean;
  clock?: 'real' | 'manual';
  /** Manual clock start (epoch ms). Default 1_700_000_000_000. */
  startTimeMs?: number;
  clusters?: Record<string, ClusterSpec>;
  logLevel?: LogLevelName;
  failOpen?: boolean;
  /** Reject modules importing functions Envoy does not provide (Envoy does). Default true. */
  strictImports?: boolean;
  /** Envoy clears the route cache when the filter mutates request headers. Default true. */
  routeRefresh?: boolean;
  /**
   * Envoy's PluginConfig.allow_on_headers_stop_iteration. Default false (Envoy's default): a
   * StopIteration from the headers callbacks stops everything (no body callback) until
   * proxy_continue_stream; true holds the headers while the body goes through the filter.
   */
  allowOnHeadersStopIteration?: boolean;
  /** Connection buffer limit in bytes (Envoy per_connection_buffer_limit_bytes). Default 1 MiB. */
  bufferLimitBytes?: number;
  /** Share shared data / queues / stats with other hosts (same Envoy process). */
  process?: EnvoyProcess;
  onLog?: (e: LogEntry) => void;
  /** Ring buffer size of host.logs(). Default 10000. */
  maxLogs?: number;
}

export interface UpstreamRequest {
  headers: Pair[];
  body: Buffer;
}

export interface UpstreamReply {
  status?: number;
  headers?: Record<string, string> | Pair[];
  body?: string | Buffer;
  /** Reset the upstream stream (before headers: 503 local reply, like Envoy's router). */
  reset?: boolean;
}

export interface RequestOptions {
  /** Worker index; default round-robin. */
  worker?: number;
  /** Request body (a string/Buffer, or chunks delivered one by one). */
  body?: string | Uint8Array | (string | Uint8Array)[];
  /** The upstream's answer (library mode). Default {status: 200}. */
  response?: UpstreamReply | ((req: UpstreamRequest) => UpstreamReply | Promise<UpstreamReply>);
}

export interface LocalReplyResult {
  status: number;
  /** Final headers as sent downstream (after the filter's on_response_headers). */
  headers: Pair[];
  body: string;
  details: string;
  /** false when the plugin sent it (proxy_send_local_response); true for Envoy's own replies. */
  fromHost: boolean;
}

export interface RequestResult {
  worker: number;
  vm: string;
  contextId: number | undefined;
  /** Request headers as the upstream saw them; undefined if the request never went upstream. */
  upstreamHeaders: Pair[] | undefined;
  upstreamBody: Buffer | undefined;
  localReply: LocalReplyResult | undefined;
  status: number | undefined;
  responseHeaders: Pair[];
  responseBody: Buffer;
  logs: LogEntry[];
  /** Stream reset details (proxy_close_stream → 'wasm_close_stream'). */
  reset: string | undefined;
  /** Set when the VM had failed (fail open: filter skipped; fail closed: 503). */
  vmFailure: string | undefined;
}

export interface MetricInfo {
  name: string;
  type: 'counter' | 'gauge' | 'histogram';
  value: number;
  count?: number;
  sum?: number;
  samples?: number[];
}

interface PendingCall {
  vm: WasmVm;
  done: boolean;
  cancel(): void;
}

export interface FailureReport {
  vm: string;
  message: string;
  time: number;
}

const TYPE_NAMES = ['counter', 'gauge', 'histogram'] as const;

export class ProxyWasmHost implements VmOwner {
  readonly process: EnvoyProcess;
  readonly clock: Clock;
  readonly vmId: string;
  readonly rootId: string;
  readonly pluginName: string;
  readonly vmConfig: Buffer;
  readonly pluginConfig: Buffer;
  readonly logLevel: number;
  readonly failOpen: boolean;
  readonly abi: AbiVersion;
  readonly routeRefresh: boolean;
  /** Workers serving requests, then the main-thread VM (if any). */
  readonly vms: WasmVm[] = [];
  readonly workers: WasmVm[] = [];
  mainVm: WasmVm | undefined;
  readonly failures: FailureReport[] = [];
  /** Imports of the module that Envoy does not provide (only possible with strictImports:false). */
  unknownImports: string[] = [];

  private readonly clusters = new Map<string, ClusterSpec>();
  private readonly pending = new Set<PendingCall>();
  private readonly logBuf: LogEntry[] = [];
  private readonly maxLogs: number;
  private readonly onLogCb?: (e: LogEntry) => void;
  private rr = 0;
  private rrEndpoint = new Map<string, number>();
  private closed = false;
  /** Streams in flight (for close()). */
  readonly activeStreams = new ActiveStreams();

  private constructor(opts: HostOptions, readonly module: WAModule, abi: AbiVersion) {
    this.abi = abi;
    this.process = opts.process ?? new EnvoyProcess();
    this.clock = opts.clock === 'manual' ? new ManualClock(opts.startTimeMs) : new RealClock();
    this.vmId = opts.vmId ?? '';
    this.rootId = opts.rootId ?? '';
    this.pluginName = opts.pluginName ?? this.rootId;
    this.vmConfig = toBuf(opts.vmConfig);
    this.pluginConfig = toBuf(opts.pluginConfig);
    this.logLevel = logLevelValue(opts.logLevel ?? 'info');
    this.failOpen = opts.failOpen ?? false;
    this.routeRefresh = opts.routeRefresh ?? true;
    this.streamOpts.failOpen = this.failOpen;
    this.streamOpts.routeRefresh = this.routeRefresh;
    this.streamOpts.allowOnHeadersStopIteration = opts.allowOnHeadersStopIteration ?? false;
    const limit = opts.bufferLimitBytes ?? DEFAULT_BUFFER_LIMIT_BYTES;
    if (!Number.isInteger(limit) || limit <= 0) throw new Error(`bufferLimitBytes must be a positive integer, got ${limit}`);
    this.streamOpts.bufferLimitBytes = limit;
    this.maxLogs = opts.maxLogs ?? 10000;
    this.onLogCb = opts.onLog;
    for (const [k, v] of Object.entries(opts.clusters ?? {})) this.addCluster(k, v);
  }

  /** Loads the module and starts the VMs; rejects with the plugin's log lines on failure. */
  static async create(opts: HostOptions): Promise<ProxyWasmHost> {
    return ProxyWasmHost.createSync(opts);
  }

  static createSync(opts: HostOptions): ProxyWasmHost {
    const bytes = typeof opts.wasm === 'string' ? readFileSync(opts.wasm) : opts.wasm;
    // one compiled module per byte buffer: hosts created from the same Buffer (a DES with 64
    // proxies) share it, as Envoy shares one compiled module across its worker VMs
    let module: WAModule | undefined = compiledModules.get(bytes);
    if (module === undefined) {
      try {
        module = new WA.Module(bytes);
      } catch (e) {
        throw new Error(`Failed to load Wasm module: ${errMsg(e)}`);
      }
      compiledModules.set(bytes, module);
    }
    const exports = new Set(WA.Module.exports(module).map((e) => e.name));
    let abi: AbiVersion;
    if (exports.has('proxy_abi_version_0_2_1')) abi = '0.2.1';
    else if (exports.has('proxy_abi_version_0_2_0')) abi = '0.2.0';
    else {
      throw new Error('Missing or unknown Proxy-Wasm ABI version: the module must export ' +
        'proxy_abi_version_0_2_0 or proxy_abi_version_0_2_1 (ABI 0.1.0 and unversioned modules are not supported)');
    }
    // Import signatures, as V8::link checks them; imports Envoy does not provide are reported.
    const unknownImports: string[] = [];
    for (const imp of readImports(bytes)) {
      if (imp.kind !== 'function') {
        unknownImports.push(`${imp.module}.${imp.name}`);
        continue;
      }
      const want = knownImportSignature(imp.module, imp.name, abi);
      if (want === undefined) unknownImports.push(`${imp.module}.${imp.name}`);
      if (want !== undefined && imp.signature !== want) {
        throw new Error(`Failed to load Wasm module due to an import type mismatch: ${imp.module}.${imp.name}, ` +
          `want: ${imp.signature}, but host exports: ${want}`);
      }
    }
    const host = new ProxyWasmHost(opts, module, abi);
    host.unknownImports = unknownImports;
    if (unknownImports.length && opts.strictImports === false) {
      host.hostLog(3, `module imports ${unknownImports.join(', ')}, which Envoy does not provide ` +
        '(Envoy would refuse to load it); calling one throws');
    }
    host.process.acquire(host.vmId);
    try {
      host.startVms(opts);
    } catch (e) {
      host.closeSync();
      throw e;
    }
    return host;
  }

  private startVm(role: 'worker' | 'main' | 'canary', index: number, strict: boolean): WasmVm {
    const vm = new WasmVm(this, this.module, this.abi, role, index, strict);
    const where = role === 'canary' ? 'base' : 'thread-local';
    const fail = (what: string): never => {
      const logs = vm.startLogs.map((l) => `  [${l.levelName}] ${l.message}`).join('\n');
      throw new Error(`Wasm VM ${vm.name} (vm_id "${this.vmId}", root_id "${this.rootId}"): ${what}` +
        (vm.failed ? `\n  cause: ${vm.failed}` : '') + (logs ? `\nplugin logs:\n${logs}` : '\nplugin logs: (none)'));
    };
    vm.instantiate();
    vm.startVm();
    if (vm.failed) fail('Failed to initialize Wasm code (_initialize/_start)');
    if (!vm.startRoot()) fail(`Failed to start ${where} Wasm (proxy_on_vm_start returned 0 or trapped)`);
    if (!vm.configure()) fail(`Failed to configure ${where} Wasm plugin (proxy_on_configure returned 0 or trapped)`);
    vm.capturingStartLogs = false;
    return vm;
  }

  /**
   * Replaces worker `index`'s VM with a new one, as Envoy does for a failed VM under
   * PluginConfig.failure_policy FAIL_RELOAD (after its ReloadConfig backoff): a new instance of
   * the same module, started and configured like the first (a new root context: the plugin's
   * state is gone), while shared data and metrics stay (they belong to the vm_id and to the
   * plugin's stats scope, not to one VM). Refused while the worker has streams in flight: a
   * failed VM's streams have failed already.
   */
  reloadWorker(index: number): void {
    const old = this.workers[index];
    if (!old) throw new Error(`no worker ${index} (have ${this.workers.length})`);
    for (const st of this.activeStreams) {
      if (st.vm === old) throw new Error(`worker ${index} has streams in flight`);
    }
    old.kill();
    const vm = this.startVm('worker', index, this.strictImports);
    this.workers[index] = vm;
    this.vms[this.vms.indexOf(old)] = vm;
  }

  private strictImports = true;

  private startVms(opts: HostOptions): void {
    const strict = opts.strictImports ?? true;
    this.strictImports = strict;
    const n = opts.workers ?? 2;
    if (!(n >= 1)) throw new Error('workers must be >= 1');
    if (opts.canary ?? true) {
      const canary = this.startVm('canary', 0, strict);
      canary.kill();
    }
    if (opts.mainThread ?? true) {
      this.mainVm = this.startVm('main', 0, strict);
    }
    for (let i = 0; i < n; i++) {
      const vm = this.startVm('worker', i, strict);
      this.workers.push(vm);
      this.vms.push(vm);
    }
    if (this.mainVm) this.vms.push(this.mainVm);
  }

  // --- VmOwner -------------------------------------------------------------------------------------

  emitLog(e: LogEntry): void {
    this.logBuf.push(e);
    if (this.logBuf.length > this.maxLogs) this.logBuf.splice(0, this.logBuf.length - this.maxLogs);
    this.onLogCb?.(e);
  }

  hasCluster(name: string): boolean {
    return this.clusters.has(name);
  }

  onVmFailed(vm: WasmVm, message: string): void {
    this.failures.push({ vm: vm.name, message, time: this.clock.nowMs() });
  }

  cancelHttpCalls(vm: WasmVm): void {
    for (const p of [...this.pending]) {
      if (p.vm === vm) {
        p.done = true;
        p.cancel();
        this.pending.delete(p);
      }
    }
  }

  addCluster(name: string, spec: ClusterSpec): void {
    this.clusters.set(name, spec);
  }

  /** Chooses an endpoint for a cluster; undefined = no healthy upstream. */
  pickEndpoint(name: string, headers: HeaderMap): Endpoint | undefined {
    const spec = this.clusters.get(name);
    if (!spec) return undefined;
    if ('address' in spec) return { address: spec.address, port: spec.port };
    if ('endpoints' in spec) {
      if (!spec.endpoints.length) return undefined;
      const i = this.rrEndpoint.get(name) ?? 0;
      this.rrEndpoint.set(name, i + 1);
      return spec.endpoints[i % spec.endpoints.length];
    }
    if ('originalDst' in spec) {
      // OriginalDstCluster::LoadBalancer::requestOverrideHost: first value only; an invalid value
      // (or no header, without a restored local address) gives no host → "no healthy upstream".
      const v = headers.get(spec.originalDst.headerName ?? 'x-envoy-original-dst-host');
      return v === undefined ? undefined : parseIpPort(v);
    }
    return undefined;
  }

  clusterSpec(name: string): ClusterSpec | undefined {
    return this.clusters.get(name);
  }

  /** Context::httpCall after validation: dispatch through Envoy's AsyncClient semantics. */
  httpCall(vm: WasmVm, rootId: number, token: number, cluster: string, headers: HeaderMap, body: Buffer,
    trailers: HeaderMap | null, timeoutMs: number): boolean {
    const spec = this.clusters.get(cluster)!;
    const clock = this.clock;
    let timer: { cancel(): void } | null = null;
    let abort: (() => void) | null = null;
    let gotHeaders = false;
    const pc: PendingCall = {
      vm, done: false,
      cancel: () => { timer?.cancel(); abort?.(); },
    };
    const finish = (resp: HttpCallResponse | null) => {
      if (pc.done) return;
      pc.done = true;
      this.pending.delete(pc);
      timer?.cancel();
      clock.post(() => vm.deliverHttpCallResponse(rootId, token, resp));
    };
    if ('handler' in spec) {
      const req: ClusterRequest = {
        cluster, method: headers.get(':method')!, path: headers.get(':path')!,
        authority: headers.get(':authority')!, headers: headers.pairs(), body: Buffer.from(body),
        trailers: trailers ? trailers.pairs() : [],
      };
      const onReply = (r: ClusterResponse) => {
        if (pc.done) return;
        const deliver = () => {
          if (r.reset) return finish(null);
          finish(toCallResponse(r));
        };
        if (r.delayMs && r.delayMs > 0) {
          const t = clock.setTimer(r.delayMs, deliver);
          const prevAbort = abort;
          abort = () => { t.cancel(); prevAbort?.(); };
        } else deliver();
      };
      const onError = (e: unknown) => {
        this.hostLog(3, `in-process cluster "${cluster}" handler failed: ${errMsg(e)}`);
        finish(localReplyResponse(503, 'upstream connect error or disconnect/reset before headers. reset reason: connection termination'));
      };
      try {
        const r = spec.handler(req);
        if (r && typeof (r as Promise<ClusterResponse>).then === 'function') {
          const p = (r as Promise<ClusterResponse>).then(onReply, onError);
          clock.track(p);
        } else onReply(r as ClusterResponse);
      } catch (e) {
        onError(e);
      }
    } else {
      const ep = this.pickEndpoint(cluster, headers);
      // Router sends "no healthy upstream" synchronously; AsyncClient then returns nullptr.
      if (!ep) return false;
      const nonPseudo = headers.entries.filter(([k]) => k.charCodeAt(0) !== 58);
      let status = 0;
      let respHeaders: Pair[] = [];
      const chunks: Buffer[] = [];
      const h = sendHttp({
        endpoint: ep, method: headers.get(':method')!, path: headers.get(':path')!,
        authority: headers.get(':authority')!, headers: nonPseudo, body,
      }, {
        onHeaders: (s, hs) => { gotHeaders = true; status = s; respHeaders = hs; },
        onData: (c) => chunks.push(c),
        onEnd: () => {
          const map = new HeaderMap('response');
          map.add(':status', String(status));
          for (const [k, v] of respHeaders) map.add(k, v);
          finish({ headers: map, body: Buffer.concat(chunks), trailers: null });
        },
        onError: (before, reason) => {
          if (before) {
            finish(localReplyResponse(503, `upstream connect error or disconnect/reset before headers. reset reason: ${reason}`));
          } else finish(null);
        },
      });
      abort = () => h.abort();
    }
    if (timeoutMs > 0 && !pc.done) {
      timer = clock.setTimer(timeoutMs, () => {
        if (pc.done) return;
        abort?.();
        // Router::onResponseTimeout: 504 local reply before headers; reset after.
        finish(gotHeaders ? null : localReplyResponse(504, 'upstream request timeout'));
      });
    }
    if (!pc.done) this.pending.add(pc);
    return true;
  }

  hostLog(level: number, message: string): void {
    if (level < this.logLevel) return;
    this.emitLog({ time: this.clock.nowMs(), level, levelName: LOG_LEVELS[level], source: 'host', vm: 'host', contextId: 0, message });
  }

  // --- requests ------------------------------------------------------------------------------------

  private pickWorker(w?: number): { vm: WasmVm; index: number } {
    const index = this.pickWorkerIndex(w);
    return { vm: this.workers[index], index };
  }

  private pickWorkerIndex(w: number | undefined): number {
    if (w !== undefined) {
      if (!this.workers[w]) throw new Error(`no worker ${w} (have ${this.workers.length})`);
      return w;
    }
    return this.rr++ % this.workers.length;
  }

  /**
   * Starts a stream on a worker. Low-level: the proxy uses this with its router; tests use
   * request()/requestSync().
   */
  startStream(headers: HeaderMap, body: Buffer[] | null, ended: boolean, sink: DownstreamSink,
    upstream: UpstreamHandler, worker: number | undefined, onComplete: (s: HttpStream) => void): { stream: HttpStream; worker: number } {
    if (this.closed) throw new Error('host is closed');
    const { vm, index } = this.pickWorker(worker);
    const stream = new HttpStream(vm, headers, body, ended, sink, upstream, this.streamOpts);
    stream.onDone = onComplete;
    this.activeStreams.add(stream);
    stream.start();
    return { stream, worker: index };
  }

  private readonly streamOpts = {
    failOpen: false,
    routeRefresh: true,
    allowOnHeadersStopIteration: false,
    bufferLimitBytes: DEFAULT_BUFFER_LIMIT_BYTES,
    onComplete: (s: HttpStream) => { this.activeStreams.delete(s); },
    warn: (m: string) => this.hostLog(3, m),
  };

  /** Library-mode stream; the result lands in the returned sink (and goes to `onDone`, if any). */
  private runLibraryStream(headers: Record<string, string> | Pair[], opts: RequestOptions,
    onDone: ((r: RequestResult) => void) | null): LibrarySink {
    // (Records are read like Object.entries; HeaderMap does that without the intermediate array.)
    const map = new HeaderMap('request', headers);
    const chunks = opts.body === undefined ? null : (Array.isArray(opts.body) ? opts.body : [opts.body]).map(toBuf);
    const upstream = opts.response === undefined ? this.defaultUpstream : new LibraryUpstream(opts.response, this.clock);
    const worker = this.pickWorkerIndex(opts.worker);
    const sink = new LibrarySink(worker, onDone);
    // = startStream(map, chunks, true, sink, upstream, worker, sink.complete), without the
    // per-request closure and result object: the sink is told about completion directly.
    if (this.closed) throw new Error('host is closed');
    const stream = new HttpStream(this.workers[worker], map, chunks, true, sink, upstream, this.streamOpts);
    sink.stream = stream;
    const active = this.activeStreams;
    active.enter(stream);
    try {
      stream.start();
    } finally {
      active.exit(stream);
    }
    return sink;
  }

  private readonly defaultUpstream: UpstreamHandler = new LibraryUpstream(undefined, undefined);

  /** Runs one request through the filter (library mode: the upstream is `opts.response`). */
  request(headers: Record<string, string> | Pair[], opts: RequestOptions = {}): Promise<RequestResult> {
    return new Promise((resolve) => {
      this.runLibraryStream(headers, opts, resolve);
    });
  }

  /**
   * Synchronous fast path (benchmarks): the whole stream must complete without waiting
   * (no pause, no async upstream). Throws otherwise (the stream is then reset).
   */
  requestSync(headers: Record<string, string> | Pair[], opts: RequestOptions = NO_OPTIONS): RequestResult {
    const sink = this.runLibraryStream(headers, opts, null);
    const result = sink.result;
    if (!result) {
      const s = sink.stream!;
      s.resetStream('request_sync_abandoned');
      throw new Error(`requestSync: the stream did not complete synchronously (state ${s.state}); ` +
        'the filter paused it or the upstream is asynchronous — use request()');
    }
    return result;
  }

  // --- time ------------------------------------------------------------------------------------------

  private manual(): ManualClock {
    if (!(this.clock instanceof ManualClock)) throw new Error('advance/flush need clock: "manual"');
    return this.clock;
  }

  /** Manual clock: advances virtual time, firing ticks/timeouts/deliveries in order. */
  advance(ms: number): Promise<number> {
    return this.manual().advance(ms);
  }

  advanceSync(ms: number): number {
    return this.manual().advanceSync(ms);
  }

  /** Manual clock: delivers everything due now (e.g. handler responses) without moving time. */
  flush(): Promise<number> {
    return this.manual().advance(0);
  }

  now(): number {
    return this.clock.nowMs();
  }

  // --- observation -----------------------------------------------------------------------------------

  logs(): LogEntry[] {
    return [...this.logBuf];
  }

  clearLogs(): void {
    this.logBuf.length = 0;
  }

  rawMetrics(): Metric[] {
    return this.process.metrics.all();
  }

  metrics(): MetricInfo[] {
    return this.process.metrics.all().map((m) => ({
      name: m.name,
      type: TYPE_NAMES[m.type],
      value: m.type === MetricType.Histogram ? m.count : Number(m.type === MetricType.Gauge ? BigInt.asIntN(64, m.value) : m.value),
      ...(m.type === MetricType.Histogram ? { count: m.count, sum: m.sum, samples: [...m.samples] } : {}),
    }));
  }

  /** Value of a counter/gauge (or a histogram's count) by the plugin's metric name. */
  metric(name: string): number | undefined {
    return this.metrics().find((m) => m.name === name)?.value;
  }

  prometheus(): string {
    return prometheusText(this.process.metrics.all());
  }

  statsText(): string {
    return statsText(this.process.metrics.all());
  }

  /** Shared data of this host's vm_id: key → {value, cas}. */
  sharedData(): Record<string, { value: Buffer; cas: number }> {
    return this.process.sharedData.snapshot()[this.vmId] ?? {};
  }

  // --- shutdown ----------------------------------------------------------------------------------------

  /** Shuts the VMs down like Envoy (on_done/on_delete of root contexts) and stops all timers. */
  async close(): Promise<void> {
    this.closeSync();
  }

  closeSync(): void {
    if (this.closed) return;
    this.closed = true;
    for (const s of [...this.activeStreams]) s.resetStream('host_closed');
    for (const vm of this.vms) {
      try {
        vm.shutdown();
      } catch (e) {
        this.hostLog(4, `shutdown of ${vm.name} failed: ${errMsg(e)}`);
      }
    }
    for (const p of this.pending) p.cancel();
    this.pending.clear();
    this.clock.close();
    // VmIdHandle: when the last VM of a vm_id goes away, its shared data and queues go too.
    this.process.release(this.vmId);
  }
}

/**
 * The streams in flight: a Set whose members and order are always what eager insertion at
 * stream start would give. Library streams are inserted lazily: while a stream's synchronous
 * start() runs it is only "pending", and it is inserted if anything reads or changes the set
 * before it completes, or when start() returns with the stream still running (pending outer
 * streams first, so the order is the start order). A request that completes synchronously —
 * the common case — never touches the hash table (object identity hashing is costly).
 */
export class ActiveStreams extends Set<HttpStream> {
  private readonly pending: HttpStream[] = [];
  /** pending[0 .. handled) were already inserted (or cleared) by a flush. */
  private handled = 0;

  /** @internal A stream's start() begins (nested starts form a stack). */
  enter(s: HttpStream): void {
    this.pending.push(s);
  }

  /** @internal The start() of `s` (the innermost pending stream) returned or threw. */
  exit(s: HttpStream): void {
    if (!s.done) this.flush();
    this.pending.pop();
    if (this.handled > this.pending.length) this.handled = this.pending.length;
  }

  private flush(): void {
    const p = this.pending;
    // (`pending` is undefined while Set's constructor runs.)
    if (p === undefined || this.handled === p.length) return;
    for (let i = this.handled; i < p.length; i++) if (!p[i].done) super.add(p[i]);
    this.handled = p.length;
  }

  override add(s: HttpStream): this {
    this.flush();
    return super.add(s);
  }
  override delete(s: HttpStream): boolean {
    this.flush();
    return super.delete(s);
  }
  override clear(): void {
    this.flush();
    super.clear();
  }
  override has(s: HttpStream): boolean {
    this.flush();
    return super.has(s);
  }
  override get size(): number {
    this.flush();
    return super.size;
  }
  override forEach(cb: (value: HttpStream, key: HttpStream, set: Set<HttpStream>) => void, thisArg?: unknown): void {
    this.flush();
    super.forEach(cb, thisArg);
  }
  override entries(): ReturnType<Set<HttpStream>['entries']> {
    this.flush();
    return super.entries();
  }
  override keys(): ReturnType<Set<HttpStream>['keys']> {
    this.flush();
    return super.keys();
  }
  override values(): ReturnType<Set<HttpStream>['values']> {
    this.flush();
    return super.values();
  }
  override [Symbol.iterator](): ReturnType<Set<HttpStream>['values']> {
    this.flush();
    return super.values();
  }
}

/** Collects what the downstream client would receive (library mode). */
class LibrarySink implements DownstreamSink {
  private respHeaders: HeaderMap | null = null;
  private body: Buffer[] | null = null;
  stream: HttpStream | null = null;
  result: RequestResult | undefined = undefined;
  constructor(private readonly worker: number, private readonly cb: ((r: RequestResult) => void) | null) {}
  headers(h: HeaderMap): void {
    this.respHeaders = h;
  }
  data(c: Buffer): void {
    (this.body ??= []).push(c);
  }
  reset(): void {}
  streamComplete(s: HttpStream): void {
    const rh = this.respHeaders;
    const lr = s.localReply;
    const b = this.body;
    const responseBody = b === null || b.length === 0 ? EMPTY : b.length === 1 ? b[0] : Buffer.concat(b);
    const responseHeaders = rh ? rh.snapshot() : [];
    const status = rh ? rh.getLower(':status') : undefined;
    const r: RequestResult = {
      worker: this.worker, vm: s.vm?.name ?? '', contextId: s.ctx?.id,
      upstreamHeaders: s.upstreamHeaders, upstreamBody: s.upstreamBody,
      localReply: lr ? {
        status: Number(status ?? lr.status), headers: responseHeaders,
        body: responseBody.toString('utf8'), details: lr.details, fromHost: lr.fromHost,
      } : undefined,
      status: rh ? Number(status) : undefined,
      responseHeaders,
      responseBody,
      logs: s.logs,
      reset: s.resetDetails,
      vmFailure: s.vmFailure,
    };
    this.result = r;
    if (this.cb) this.cb(r);
  }
}
const NO_OPTIONS: RequestOptions = Object.freeze({});
const EMPTY = Buffer.alloc(0);

/** Library-mode upstream: answers with the configured reply. */
class LibraryUpstream implements UpstreamHandler {
  private cancelled = new WeakSet<HttpStream>();
  /** No cancel() yet: skip the WeakSet lookups (costly for objects without an identity hash). */
  private noneCancelled = true;
  constructor(
    private readonly reply: RequestOptions['response'],
    private readonly clock: Clock | undefined,
  ) {}

  send(stream: HttpStream, headers: HeaderMap, body: Buffer): void {
    const r = typeof this.reply === 'function' ? this.reply({ headers: headers.pairs(), body }) : this.reply ?? DEFAULT_REPLY;
    if (r && typeof (r as Promise<UpstreamReply>).then === 'function') {
      const clock = this.clock!;
      const p = (r as Promise<UpstreamReply>).then(
        (v) => clock.post(() => this.deliver(stream, v)),
        (e) => clock.post(() => {
          if (!this.isCancelled(stream)) stream.onUpstreamReset(`connection termination (${errMsg(e)})`);
        }),
      );
      clock.track(p);
    } else {
      this.deliver(stream, r as UpstreamReply);
    }
  }

  cancel(stream: HttpStream): void {
    this.noneCancelled = false;
    this.cancelled.add(stream);
  }

  private isCancelled(stream: HttpStream): boolean {
    return !this.noneCancelled && this.cancelled.has(stream);
  }

  private deliver(stream: HttpStream, r: UpstreamReply): void {
    if (this.isCancelled(stream)) return;
    if (r.reset) {
      stream.onUpstreamReset('connection termination');
      return;
    }
    const h = new HeaderMap('response');
    h.addLower(':status', r.status === undefined || r.status === null ? '200' : String(r.status));
    if (r.headers) for (const [k, v] of pairsOf(r.headers)) h.add(k, v);
    const body = r.body === undefined ? EMPTY : toBuf(r.body);
    if (body.length && h.get('content-length') === undefined && h.get('transfer-encoding') === undefined) {
      h.add('content-length', String(body.length));
    }
    stream.onUpstreamHeaders(h, body.length === 0);
    if (body.length) stream.onUpstreamData(body, true);
  }
}

const DEFAULT_REPLY: UpstreamReply = { status: 200 };

// --- helpers ---------------------------------------------------------------------------------------

export function toBuf(v: string | Uint8Array | undefined | null): Buffer {
  if (v === undefined || v === null) return Buffer.alloc(0);
  if (typeof v === 'string') return Buffer.from(v, 'utf8');
  return Buffer.isBuffer(v) ? v : Buffer.from(v.buffer, v.byteOffset, v.byteLength);
}

export function pairsOf(h: Record<string, string> | Pair[] | undefined): Pair[] {
  if (!h) return [];
  return Array.isArray(h) ? h : Object.entries(h);
}

/** AsyncClient local reply (router error) as the plugin sees it in on_http_call_response. */
export function localReplyResponse(status: number, body: string): HttpCallResponse {
  const h = new HeaderMap('response');
  h.add(':status', String(status));
  if (body.length) {
    h.add('content-length', String(Buffer.byteLength(body)));
    h.add('content-type', 'text/plain');
  }
  return { headers: h, body: Buffer.from(body), trailers: null };
}

function toCallResponse(r: ClusterResponse): HttpCallResponse {
  const h = new HeaderMap('response');
  h.add(':status', String(r.status));
  for (const [k, v] of pairsOf(r.headers)) h.add(k, v);
  const body = toBuf(r.body);
  const tr = pairsOf(r.trailers);
  return { headers: h, body, trailers: tr.length ? new HeaderMap('response-trailers', tr) : null };
}

/** Network::Utility::parseInternetAddressAndPortNoThrow (v4 "a.b.c.d:p", v6 "[::1]:p"). */
export function parseIpPort(s: string): Endpoint | undefined {
  let m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3}):(\d{1,5})$/.exec(s);
  if (m) {
    const parts = m.slice(1, 5).map(Number);
    const port = Number(m[5]);
    if (parts.some((p) => p > 255) || port > 65535) return undefined;
    return { address: parts.join('.'), port };
  }
  m = /^\[([0-9a-fA-F:.]+)\]:(\d{1,5})$/.exec(s);
  if (m && Number(m[2]) <= 65535 && m[1].includes(':')) return { address: m[1], port: Number(m[2]) };
  return undefined;
}

export function destroyHttpAgents(): void {
  destroyAgents();
}
