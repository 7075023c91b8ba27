// One HTTP request through the Wasm HTTP filter, following Envoy's filter manager and
// source/extensions/common/wasm/context.cc (decodeHeaders/decodeData/encodeHeaders/encodeData,
// log, onDestroy) and cpp-host's CHECK_FAIL_HTTP (fail_open / failStream).
//
// Lifecycle (Envoy >= 1.2x): on_context_create → on_request_headers → [on_request_body]* →
// (upstream) → on_response_headers → [on_response_body]* → on_log → on_done → on_delete.
// on_log runs before on_done/on_delete because the connection manager writes access logs
// (Context::log) before it destroys the filters (Context::onDestroy → onDone, onDelete).

import { FilterDataStatus as FilterDataStatus_, FilterHeadersStatus as FilterHeadersStatus_ } from './abi';
import { HeaderMap as HeaderMap_ } from './header-map';
import type { Pair } from './pairs';
import { BodyBuffer as BodyBuffer_, Context, LogEntry, StreamCallbacks, WasmVm } from './vm';

// Module-local copies of imported values: tsx/esbuild turn each reference to an imported binding
// into a getter call on the other module's exports, which shows up on the per-request path.
const FilterHeadersStatus = FilterHeadersStatus_;
type FilterHeadersStatus = FilterHeadersStatus_;
const FilterDataStatus = FilterDataStatus_;
type FilterDataStatus = FilterDataStatus_;
const HeaderMap = HeaderMap_;
type HeaderMap = HeaderMap_;
const BodyBuffer = BodyBuffer_;

export interface DownstreamSink {
  headers(headers: HeaderMap, endStream: boolean): void;
  data(chunk: Buffer, endStream: boolean): void;
  reset(details: string): void;
  /** Optional: told when the stream is complete (after StreamOptions.onComplete and onDone). */
  streamComplete?(s: HttpStream): void;
}

/** The router side: receives the request after the filter let it through. */
export interface UpstreamHandler {
  send(stream: HttpStream, headers: HeaderMap, body: Buffer): void;
  cancel?(stream: HttpStream): void;
}

export interface LocalReply {
  status: number;
  body: Buffer;
  headers: Pair[];
  details: string;
  /** true when Envoy (not the plugin) generated it: router errors, fail-closed. */
  fromHost: boolean;
}

type State =
  | 'req_headers' | 'req_data' | 'wait_req' | 'upstream' | 'wait_upstream'
  | 'resp_headers' | 'resp_data' | 'wait_resp' | 'complete' | 'done';

/** Per-host settings shared by all streams (kept free of per-request closures). */
export interface StreamOptions {
  failOpen: boolean;
  routeRefresh: boolean;
  onComplete(s: HttpStream): void;
  warn(msg: string): void;
}

const EMPTY = Buffer.alloc(0);

export class HttpStream implements StreamCallbacks {
  private filterStateMap: Map<string, Buffer> | null = null;
  /** Filter state set by proxy_set_property (created on first use). */
  get filterState(): Map<string, Buffer> {
    return this.filterStateMap ??= new Map<string, Buffer>();
  }
  readonly logs: LogEntry[] = [];
  ctx: Context | null = null;
  state: State = 'req_headers';

  // request side
  private reqChunks: Buffer[] = [];
  private reqEnded: boolean;
  private reqBuffered: Buffer | null = null;
  private reqForwarded: Buffer[] = [];
  private reqPausedAt: 'headers' | 'data' = 'headers';
  /** Request headers as the upstream saw them (after the filter). */
  upstreamHeaders: Pair[] | undefined;
  upstreamBody: Buffer | undefined;
  routeCacheCleared = false;
  /** Route-relevant headers when route refresh is disabled (the original headers). */
  routeSnapshot: HeaderMap | null = null;

  // response side
  responseHeaders: HeaderMap | null = null;
  private respChunks: Buffer[] = [];
  private respEnded = false;
  private respBuffered: Buffer | null = null;
  private respPausedAt: 'headers' | 'data' = 'headers';
  private downstreamStarted = false;

  localReply: LocalReply | undefined;
  private pluginLocalReplySent = false;
  private failureLocalReplySent = false;
  resetDetails: string | undefined;
  /** Set when the filter was skipped or failed (fail open / fail closed). */
  vmFailure: string | undefined;

  private pumping = false;
  /** Per-stream completion callback (set by the creator). */
  onDone: ((s: HttpStream) => void) | undefined;

  constructor(
    readonly vm: WasmVm | null,
    readonly requestHeaders: HeaderMap,
    requestBody: Buffer[] | null,
    requestEnded: boolean,
    readonly sink: DownstreamSink,
    readonly upstream: UpstreamHandler,
    readonly opts: StreamOptions,
  ) {
    if (requestBody) for (const c of requestBody) this.reqChunks.push(c);
    this.reqEnded = requestEnded;
    if (!opts.routeRefresh) this.routeSnapshot = new HeaderMap('request', requestHeaders.entries);
  }

  /** Starts processing (synchronously as far as possible). */
  start(): void {
    const vm = this.vm;
    if (vm && !vm.failed) {
      this.ctx = vm.newStreamContext(this);
    } else if (vm && vm.failed) {
      // FilterConfig::createFilter with a failed VM: fail open skips the filter, fail closed
      // installs an empty Context whose onRequestHeaders sends 503 "wasm_fail_stream".
      this.vmFailure = vm.failed;
    }
    this.pump();
  }

  /** Headers of the route decision (Envoy clears the route cache on request header mutation). */
  routeHeaders(): HeaderMap {
    return this.routeSnapshot && !this.routeCacheCleared ? this.routeSnapshot : this.requestHeaders;
  }

  // --- downstream input (proxy mode) -------------------------------------------------------------
  pushRequestData(chunk: Buffer, end: boolean): void {
    if (chunk.length) this.reqChunks.push(chunk);
    if (end) this.reqEnded = true;
    this.pump();
  }

  // --- StreamCallbacks (called by the VM's host functions, as after-call actions) -------------
  continueDecoding(): void {
    if (this.state !== 'wait_req') {
      this.opts.warn(`proxy_continue_stream(Request) ignored: the request is not paused (state ${this.state})`);
      return;
    }
    const ctx = this.ctx;
    if (this.reqPausedAt === 'headers') {
      if (ctx) ctx.requestHeaders = null;
      this.state = this.reqChunks.length || !this.reqEnded ? 'req_data' : 'upstream';
    } else {
      if (this.reqBuffered) this.reqForwarded.push(this.reqBuffered);
      this.reqBuffered = null;
      if (ctx) ctx.requestBody = null;
      this.state = this.reqChunks.length || !this.reqEnded ? 'req_data' : 'upstream';
    }
    this.pump();
  }

  continueEncoding(): void {
    if (this.state !== 'wait_resp') {
      this.opts.warn(`proxy_continue_stream(Response) ignored: the response is not paused (state ${this.state})`);
      return;
    }
    const ctx = this.ctx;
    if (this.respPausedAt === 'headers') {
      if (ctx) ctx.responseHeaders = null;
      const eos = this.respEnded && this.respChunks.length === 0;
      this.emitHeaders(eos);
      this.state = eos ? 'complete' : 'resp_data';
    } else {
      if (ctx) ctx.responseBody = null;
      const data = this.respBuffered ?? EMPTY;
      this.respBuffered = null;
      const eos = this.respEnded && this.respChunks.length === 0;
      this.emitData(data, eos);
      this.state = eos ? 'complete' : 'resp_data';
    }
    this.pump();
  }

  resetStream(details: string): void {
    if (this.state === 'done' || this.state === 'complete') return;
    this.resetDetails = details;
    this.upstream.cancel?.(this);
    this.sink.reset(details);
    this.state = 'complete';
    this.pump();
  }

  sendLocalReply(status: number, body: Buffer, headers: Pair[], _grpcStatus: number, details: string): void {
    // Envoy ignores a second local reply from the same filter (local_reply_sent_).
    if (this.pluginLocalReplySent) return;
    this.pluginLocalReplySent = true;
    this.localReplyInternal(status, body, headers, details, false);
  }

  /** Local reply generated by Envoy itself (router errors): it goes through the filter too. */
  hostLocalReply(status: number, body: string, details: string): void {
    this.localReplyInternal(status, Buffer.from(body), [], details, true);
  }

  private localReplyInternal(status: number, body: Buffer, extra: Pair[], details: string, fromHost: boolean): void {
    if (this.state === 'done' || this.state === 'complete') return;
    if (this.downstreamStarted) {
      // Response already started downstream: Envoy resets the stream instead.
      this.resetStream(details);
      return;
    }
    if (this.state === 'wait_upstream' || this.state === 'upstream') this.upstream.cancel?.(this);
    this.localReply = { status, body, headers: extra, details, fromHost };
    // Http::Utility::sendLocalReply
    const h = new HeaderMap('response');
    h.addLower(':status', String(status));
    for (const [k, v] of extra) h.add(k, v);
    if (body.length) {
      h.set('content-length', String(body.length));
      if (h.get('content-type') === undefined) h.set('content-type', 'text/plain');
    } else {
      h.remove('content-length');
      h.remove('content-type');
    }
    this.responseHeaders = h;
    this.respChunks = body.length ? [body] : [];
    this.respEnded = true;
    this.respBuffered = null;
    if (this.ctx) {
      this.ctx.requestHeaders = null;
      this.ctx.requestBody = null;
    }
    this.state = 'resp_headers';
    this.pump();
  }

  onRequestHeadersModified(): void {
    if (this.opts.routeRefresh) this.routeCacheCleared = true;
  }

  clearRouteCache(): void {
    this.routeCacheCleared = true;
  }

  addLog(e: LogEntry): void {
    this.logs.push(e);
  }

  // --- upstream input ----------------------------------------------------------------------------
  onUpstreamHeaders(headers: HeaderMap, endStream: boolean): void {
    if (this.state !== 'wait_upstream') return;
    this.responseHeaders = headers;
    this.respEnded = endStream;
    this.state = 'resp_headers';
    this.pump();
  }

  onUpstreamData(chunk: Buffer, endStream: boolean): void {
    if (this.state === 'done' || this.state === 'complete' || this.localReply) return;
    if (chunk.length) this.respChunks.push(chunk);
    if (endStream) this.respEnded = true;
    this.pump();
  }

  /** Upstream reset after response headers (before: use hostLocalReply). */
  onUpstreamReset(details: string): void {
    if (this.state === 'done' || this.state === 'complete') return;
    if (!this.downstreamStarted && (this.state === 'wait_upstream' || this.state === 'upstream')) {
      this.hostLocalReply(503, `upstream connect error or disconnect/reset before headers. reset reason: ${details}`,
        `upstream_reset_before_response_started{${details.replace(/\s/g, '_')}}`);
      return;
    }
    this.resetStream(`upstream_reset_after_response_started{${details.replace(/\s/g, '_')}}`);
  }

  get done(): boolean {
    return this.state === 'done';
  }

  // --- driver --------------------------------------------------------------------------------------
  private waiting(): boolean {
    switch (this.state) {
      case 'wait_req': case 'wait_upstream': case 'wait_resp': case 'done': return true;
      case 'req_data': return this.reqChunks.length === 0 && !this.reqEnded;
      case 'resp_data': return this.respChunks.length === 0 && !this.respEnded;
      default: return false;
    }
  }

  private pump(): void {
    if (this.pumping) return;
    this.pumping = true;
    try {
      while (!this.waiting()) this.step();
    } finally {
      this.pumping = false;
    }
  }

  /** True when the Wasm filter takes part (VM alive, context created, no failure reply). */
  private filterActive(): boolean {
    return !!this.ctx && !!this.vm && !this.vm.failed && !this.failureLocalReplySent;
  }

  /** CHECK_FAIL_HTTP: returns true when the stream was failed closed. */
  private checkFail(): boolean {
    const vm = this.vm;
    if (!vm || !vm.failed) return false;
    this.vmFailure = vm.failed;
    if (this.opts.failOpen) return false;
    if (!this.failureLocalReplySent) {
      this.failureLocalReplySent = true;
      this.localReplyInternal(503, EMPTY, [], 'wasm_fail_stream', true);
    }
    return true;
  }

  private step(): void {
    const vm = this.vm;
    const ctx = this.ctx;
    switch (this.state) {
      case 'req_headers': {
        const eos = this.reqEnded && this.reqChunks.length === 0;
        if (!ctx || !vm) {
          if (this.vmFailure !== undefined && !this.opts.failOpen) {
            this.failureLocalReplySent = true;
            this.localReplyInternal(503, EMPTY, [], 'wasm_fail_stream', true);
            return;
          }
          this.state = eos ? 'upstream' : 'req_data';
          return;
        }
        vm.onCreate(ctx);
        if (this.checkFail()) return;
        if (vm.failed) { // fail open
          this.state = eos ? 'upstream' : 'req_data';
          return;
        }
        ctx.requestHeaders = this.requestHeaders;
        ctx.endOfStream = eos;
        let r: number = FilterHeadersStatus.Continue;
        let stopped = false;
        if (vm.has('proxy_on_request_headers')) {
          r = vm.call(ctx, 'proxy_on_request_headers', ctx.id, this.requestHeaders.size, eos ? 1 : 0);
          stopped = vm.lastStopped;
        }
        if (this.state !== 'req_headers') return; // a local reply / reset took over
        if (this.checkFail()) return;
        if (vm.failed || headersStatus(r, stopped) === FilterHeadersStatus.Continue) {
          ctx.requestHeaders = null;
          this.state = eos ? 'upstream' : 'req_data';
        } else {
          this.reqPausedAt = 'headers';
          this.state = 'wait_req';
        }
        return;
      }
      case 'req_data': {
        const chunk = this.reqChunks.shift() ?? EMPTY;
        const eos = this.reqEnded && this.reqChunks.length === 0;
        if (!this.filterActive() || !vm!.has('proxy_on_request_body')) {
          if (this.reqBuffered) { this.reqForwarded.push(this.reqBuffered); this.reqBuffered = null; }
          this.reqForwarded.push(chunk);
          if (eos) this.state = 'upstream';
          return;
        }
        const data = this.reqBuffered ? Buffer.concat([this.reqBuffered, chunk]) : chunk;
        const buf = new BodyBuffer(data, true);
        ctx!.requestBody = buf;
        ctx!.endOfStream = eos;
        const r = vm!.call(ctx!, 'proxy_on_request_body', ctx!.id, buf.size, eos ? 1 : 0);
        const stopped = vm!.lastStopped;
        if (this.state !== 'req_data') return;
        if (this.checkFail()) return;
        if (vm!.failed || dataStatus(r, stopped) === FilterDataStatus.Continue) {
          this.reqForwarded.push(buf.data);
          this.reqBuffered = null;
          ctx!.requestBody = null;
          if (eos) this.state = 'upstream';
        } else {
          // StopIterationAndBuffer (and, simplified, the other Stop* values): keep buffering.
          this.reqBuffered = buf.data;
          if (eos) {
            this.reqPausedAt = 'data';
            this.state = 'wait_req';
          }
        }
        return;
      }
      case 'upstream': {
        this.upstreamHeaders = this.requestHeaders.snapshot();
        const fwd = this.reqForwarded;
        this.upstreamBody = fwd.length === 1 ? fwd[0] : fwd.length === 0 ? EMPTY : Buffer.concat(fwd);
        this.state = 'wait_upstream';
        this.upstream.send(this, this.requestHeaders, this.upstreamBody);
        return;
      }
      case 'resp_headers': {
        const h = this.responseHeaders!;
        const eos = this.respEnded && this.respChunks.length === 0;
        if (!this.filterActive() || !ctx!.createdInVm || !vm!.has('proxy_on_response_headers')) {
          this.emitHeaders(eos);
          this.state = eos ? 'complete' : 'resp_data';
          return;
        }
        ctx!.responseHeaders = h;
        ctx!.endOfStream = eos;
        const r = vm!.call(ctx!, 'proxy_on_response_headers', ctx!.id, h.size, eos ? 1 : 0);
        const stopped = vm!.lastStopped;
        if (this.state !== 'resp_headers' || this.responseHeaders !== h) return;
        if (this.checkFail()) return;
        if (vm!.failed || headersStatus(r, stopped) === FilterHeadersStatus.Continue) {
          ctx!.responseHeaders = null;
          this.emitHeaders(eos);
          this.state = eos ? 'complete' : 'resp_data';
        } else {
          this.respPausedAt = 'headers';
          this.state = 'wait_resp';
        }
        return;
      }
      case 'resp_data': {
        const chunk = this.respChunks.shift() ?? EMPTY;
        const eos = this.respEnded && this.respChunks.length === 0;
        if (!this.filterActive() || !ctx!.createdInVm || !vm!.has('proxy_on_response_body')) {
          const data = this.respBuffered ? Buffer.concat([this.respBuffered, chunk]) : chunk;
          this.respBuffered = null;
          this.emitData(data, eos);
          if (eos) this.state = 'complete';
          return;
        }
        const data = this.respBuffered ? Buffer.concat([this.respBuffered, chunk]) : chunk;
        const buf = new BodyBuffer(data, true);
        ctx!.responseBody = buf;
        ctx!.endOfStream = eos;
        const r = vm!.call(ctx!, 'proxy_on_response_body', ctx!.id, buf.size, eos ? 1 : 0);
        const stopped = vm!.lastStopped;
        if (this.state !== 'resp_data') return;
        if (this.checkFail()) return;
        if (vm!.failed || dataStatus(r, stopped) === FilterDataStatus.Continue) {
          ctx!.responseBody = null;
          this.respBuffered = null;
          this.emitData(buf.data, eos);
          if (eos) this.state = 'complete';
        } else {
          this.respBuffered = buf.data;
          if (eos) {
            this.respPausedAt = 'data';
            this.state = 'wait_resp';
          }
        }
        return;
      }
      case 'complete': {
        this.state = 'done';
        this.finish();
        return;
      }
      default:
        return;
    }
  }

  private emitHeaders(eos: boolean): void {
    this.downstreamStarted = true;
    this.sink.headers(this.responseHeaders!, eos);
  }

  private emitData(chunk: Buffer, eos: boolean): void {
    if (chunk.length || eos) this.sink.data(chunk, eos);
  }

  /** Access log (Context::log → on_log), then filter destruction (onDestroy → on_done, on_delete). */
  private finish(): void {
    const vm = this.vm;
    const ctx = this.ctx;
    if (vm && ctx) {
      if (!vm.failed && vm.has('proxy_on_log')) {
        if (!ctx.createdInVm) vm.onCreate(ctx);
        ctx.accessLog = { request: this.requestHeaders, response: this.responseHeaders, responseTrailers: null };
        vm.call(ctx, 'proxy_on_log', ctx.id);
        ctx.accessLog = null;
      }
      if (ctx.createdInVm && !ctx.destroyed) {
        ctx.destroyed = true;
        if (!vm.failed && vm.has('proxy_on_done')) vm.call(ctx, 'proxy_on_done', ctx.id);
        if (!vm.failed && vm.has('proxy_on_delete')) vm.call(ctx, 'proxy_on_delete', ctx.id);
      }
      ctx.requestHeaders = ctx.responseHeaders = null;
      ctx.requestBody = ctx.responseBody = null;
      vm.contexts.delete(ctx.id);
    }
    if (vm?.failed && this.vmFailure === undefined) this.vmFailure = vm.failed;
    this.opts.onComplete(this);
    this.onDone?.(this);
    this.sink.streamComplete?.(this);
  }
}

/** ContextBase::convertVmCallResultToFilterHeadersStatus (0.2.x: StopIteration → StopAll). */
function headersStatus(r: number, stopped: boolean): FilterHeadersStatus {
  if (stopped || r > FilterHeadersStatus.StopAllIterationAndWatermark) return FilterHeadersStatus.StopAllIterationAndWatermark;
  if (r === FilterHeadersStatus.StopIteration) return FilterHeadersStatus.StopAllIterationAndWatermark;
  if (r === FilterHeadersStatus.ContinueAndEndStream) return FilterHeadersStatus.Continue;
  return r as FilterHeadersStatus;
}

function dataStatus(r: number, stopped: boolean): FilterDataStatus {
  if (stopped || r > FilterDataStatus.StopIterationNoBuffer) return FilterDataStatus.StopIterationNoBuffer;
  return r as FilterDataStatus;
}
