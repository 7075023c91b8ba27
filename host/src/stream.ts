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
type BodyBuffer = BodyBuffer_;

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
  /**
   * Envoy's PluginConfig.allow_on_headers_stop_iteration (default false): StopIteration from
   * on_request/response_headers holds the headers while the body still goes through the filter.
   * When false, cpp-host turns StopIteration into StopAllIterationAndWatermark (no body callback
   * until proxy_continue_stream).
   */
  allowOnHeadersStopIteration: boolean;
  /** The connection buffer limit (Envoy per_connection_buffer_limit_bytes, default 1 MiB). */
  bufferLimitBytes: number;
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
  /** Body the filter manager holds for this filter (Stop*AndBuffer / Watermark). */
  private reqHeld: BodyBuffer | null = null;
  /** The last on_request_body returned StopIterationAndBuffer (Envoy buffering_request_body_). */
  private reqBuffering = false;
  /** The filter stopped decoding and has not continued yet. */
  private reqStopped = false;
  /** Headers stopped with StopAllIterationAndBuffer: what arrives meanwhile counts against the limit. */
  private reqStopAllBuffer = false;
  private reqForwarded: Buffer[] = [];
  private reqPausedAt: 'headers' | 'data' = 'headers';
  /** StopIteration (allowOnHeadersStopIteration): headers held while body callbacks run. */
  private reqHeadersHeld = false;
  /** Headers as released by a body callback's Continue (the router saw these; later mutation does not reach it). */
  private releasedHeaders: HeaderMap | null = null;
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
  private respHeld: BodyBuffer | null = null;
  private respBuffering = false;
  private respStopped = false;
  private respPausedAt: 'headers' | 'data' = 'headers';
  private respHeadersHeld = false;
  private downstreamStarted = false;

  localReply: LocalReply | undefined;
  private pluginLocalReplySent = false;
  private failureLocalReplySent = false;
  resetDetails: string | undefined;
  /** Set when the filter was skipped or failed (fail open / fail closed). */
  vmFailure: string | undefined;

  private pumping = false;
  /** A body callback of this stream is running (its own continue_stream is ignored, as the headers' is). */
  private inBodyCall = false;
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
    if (this.routeSnapshot && !this.routeCacheCleared) return this.routeSnapshot;
    return this.releasedHeaders ?? this.requestHeaders;
  }

  // --- downstream input (proxy mode) -------------------------------------------------------------
  pushRequestData(chunk: Buffer, end: boolean): void {
    if (chunk.length) this.reqChunks.push(chunk);
    if (end) this.reqEnded = true;
    if (this.reqStopAllBuffer && this.state === 'wait_req' && this.pendingRequestBytes() > this.opts.bufferLimitBytes) {
      this.requestTooLarge();
      return;
    }
    this.pump();
  }

  private pendingRequestBytes(): number {
    let n = 0;
    for (const c of this.reqChunks) n += c.length;
    return n;
  }

  /** FilterManager requestDataTooLarge with a buffering (non-streaming) filter: 413. */
  private requestTooLarge(): void {
    this.hostLocalReply(413, 'Payload Too Large', 'request_payload_too_large');
  }

  // --- StreamCallbacks (called by the VM's host functions, as after-call actions) -------------
  continueDecoding(): void {
    if (this.inBodyCall || !this.reqStopped || (this.state !== 'wait_req' && this.state !== 'req_data')) {
      this.opts.warn(`proxy_continue_stream(Request) ignored: the request is not paused (state ${this.state})`);
      return;
    }
    const ctx = this.ctx;
    if (ctx) {
      ctx.requestHeaders = null;
      ctx.requestBody = null;
    }
    if (this.state === 'wait_req' && this.reqPausedAt === 'headers' && this.reqChunks.length > 1) {
      // After StopAll the filter manager hands the data that arrived meanwhile to the filter as one buffer.
      this.reqChunks = [Buffer.concat(this.reqChunks)];
    }
    this.reqStopped = this.reqBuffering = this.reqHeadersHeld = this.reqStopAllBuffer = false;
    if (this.reqHeld) this.reqForwarded.push(this.reqHeld.data);
    this.reqHeld = null;
    this.state = this.reqChunks.length || !this.reqEnded ? 'req_data' : 'upstream';
    this.pump();
  }

  continueEncoding(): void {
    if (this.inBodyCall || !this.respStopped || (this.state !== 'wait_resp' && this.state !== 'resp_data')) {
      this.opts.warn(`proxy_continue_stream(Response) ignored: the response is not paused (state ${this.state})`);
      return;
    }
    const ctx = this.ctx;
    if (ctx) {
      ctx.responseHeaders = null;
      ctx.responseBody = null;
    }
    const stopAllAtHeaders = this.state === 'wait_resp' && this.respPausedAt === 'headers';
    const pausedAtHeaders = stopAllAtHeaders || this.respHeadersHeld;
    if (stopAllAtHeaders && this.respChunks.length > 1) {
      this.respChunks = [Buffer.concat(this.respChunks)];
    }
    this.respStopped = this.respBuffering = this.respHeadersHeld = false;
    const held = this.respHeld;
    this.respHeld = null;
    const eos = this.respEnded && this.respChunks.length === 0;
    if (pausedAtHeaders) this.emitHeaders(eos && !held);
    if (held) this.emitData(held.data, eos);
    this.state = eos ? 'complete' : 'resp_data';
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
    if (this.state === 'wait_upstream' || this.state === 'upstream' || !this.respEnded) this.upstream.cancel?.(this);
    // FilterManager::sendLocalReply: once response headers exist (encoding started) but nothing
    // went downstream, the reply goes straight to the codec, bypassing the filters.
    const direct = this.responseHeaders !== null;
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
    this.respHeld = null;
    this.respStopped = this.respBuffering = this.respHeadersHeld = false;
    if (direct) {
      if (this.ctx) {
        this.ctx.responseHeaders = null;
        this.ctx.responseBody = null;
      }
      this.respChunks = [];
      this.emitHeaders(body.length === 0);
      if (body.length) this.emitData(body, true);
      this.state = 'complete';
      this.pump();
      return;
    }
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
        const status = vm.failed ? FilterHeadersStatus.Continue : headersStatus(r, stopped, this.opts.allowOnHeadersStopIteration);
        if (status === FilterHeadersStatus.Continue) {
          ctx.requestHeaders = null;
          this.state = eos ? 'upstream' : 'req_data';
          return;
        }
        this.reqStopped = true;
        if (status === FilterHeadersStatus.StopIteration && !eos) {
          this.reqHeadersHeld = true;
          this.state = 'req_data';
          return;
        }
        this.reqStopAllBuffer = status === FilterHeadersStatus.StopAllIterationAndBuffer;
        this.reqPausedAt = 'headers';
        this.state = 'wait_req';
        if (this.reqStopAllBuffer && this.pendingRequestBytes() > this.opts.bufferLimitBytes) this.requestTooLarge();
        return;
      }
      case 'req_data': {
        const chunk = this.reqChunks.shift() ?? EMPTY;
        const eos = this.reqEnded && this.reqChunks.length === 0;
        if (!this.filterActive()) {
          this.forwardRequest(chunk, eos);
          return;
        }
        // Context::decodeData: while buffering, the new chunk joins the buffered body first
        // (addDecodedData, which answers 413 past the limit) and the guest sees the whole of it.
        let data = chunk;
        let prior = this.reqHeld;
        if (this.reqBuffering && prior) {
          data = Buffer.concat([prior.data, chunk]);
          prior = null;
          if (data.length > this.opts.bufferLimitBytes) {
            this.reqHeld = null;
            this.requestTooLarge();
            return;
          }
        }
        let status: FilterDataStatus = FilterDataStatus.Continue;
        const buf = new BodyBuffer(data, true);
        if (vm!.has('proxy_on_request_body')) {
          ctx!.requestBody = buf;
          ctx!.endOfStream = eos;
          let r: number;
          this.inBodyCall = true;
          try {
            r = vm!.call(ctx!, 'proxy_on_request_body', ctx!.id, buf.size, eos ? 1 : 0);
          } finally {
            this.inBodyCall = false;
          }
          const stopped = vm!.lastStopped;
          if (this.state !== 'req_data') return;
          if (this.checkFail()) return;
          if (!vm!.failed) status = dataStatus(r, stopped);
        }
        this.reqBuffering = status === FilterDataStatus.StopIterationAndBuffer;
        if (status === FilterDataStatus.Continue) {
          ctx!.requestBody = null;
          this.reqHeld = null;
          if (prior) this.reqForwarded.push(prior.data);
          this.reqStopped = false;
          this.forwardRequest(buf.data, eos);
          return;
        }
        this.reqStopped = true;
        if (status === FilterDataStatus.StopIterationNoBuffer) {
          // Not buffered by the filter manager: the chunk is gone unless the filter kept a copy.
          ctx!.requestBody = null;
        } else {
          const held = prior ? new BodyBuffer(Buffer.concat([prior.data, buf.data]), true) : buf;
          this.reqHeld = held;
          // Buffering: Context::getBuffer answers with the (mutable) buffered body between calls.
          ctx!.requestBody = this.reqBuffering ? held : null;
          if (this.reqBuffering && held.size > this.opts.bufferLimitBytes) {
            this.reqHeld = null;
            this.requestTooLarge();
            return;
          }
        }
        if (eos) {
          this.reqPausedAt = 'data';
          this.state = 'wait_req';
        }
        return;
      }
      case 'upstream': {
        const headers = this.releasedHeaders ?? this.requestHeaders;
        this.upstreamHeaders = headers.snapshot();
        const fwd = this.reqForwarded;
        this.upstreamBody = fwd.length === 1 ? fwd[0] : fwd.length === 0 ? EMPTY : Buffer.concat(fwd);
        this.state = 'wait_upstream';
        this.upstream.send(this, headers, this.upstreamBody);
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
        const status = vm!.failed ? FilterHeadersStatus.Continue : headersStatus(r, stopped, this.opts.allowOnHeadersStopIteration);
        if (status === FilterHeadersStatus.Continue) {
          ctx!.responseHeaders = null;
          this.emitHeaders(eos);
          this.state = eos ? 'complete' : 'resp_data';
          return;
        }
        this.respStopped = true;
        if (status === FilterHeadersStatus.StopIteration && !eos) {
          this.respHeadersHeld = true;
          this.state = 'resp_data';
          return;
        }
        this.respPausedAt = 'headers';
        this.state = 'wait_resp';
        return;
      }
      case 'resp_data': {
        const chunk = this.respChunks.shift() ?? EMPTY;
        const eos = this.respEnded && this.respChunks.length === 0;
        if (!this.filterActive() || !ctx!.createdInVm) {
          this.forwardResponse(chunk, eos);
          return;
        }
        let data = chunk;
        let prior = this.respHeld;
        if (this.respBuffering && prior) {
          data = Buffer.concat([prior.data, chunk]);
          prior = null;
          if (data.length > this.opts.bufferLimitBytes) {
            this.respHeld = null;
            this.responseTooLarge();
            return;
          }
        }
        let status: FilterDataStatus = FilterDataStatus.Continue;
        const buf = new BodyBuffer(data, true);
        if (vm!.has('proxy_on_response_body')) {
          ctx!.responseBody = buf;
          ctx!.endOfStream = eos;
          let r: number;
          this.inBodyCall = true;
          try {
            r = vm!.call(ctx!, 'proxy_on_response_body', ctx!.id, buf.size, eos ? 1 : 0);
          } finally {
            this.inBodyCall = false;
          }
          const stopped = vm!.lastStopped;
          if (this.state !== 'resp_data') return;
          if (this.checkFail()) return;
          if (!vm!.failed) status = dataStatus(r, stopped);
        }
        this.respBuffering = status === FilterDataStatus.StopIterationAndBuffer;
        if (status === FilterDataStatus.Continue) {
          ctx!.responseBody = null;
          this.respHeld = null;
          this.respStopped = false;
          if (this.respHeadersHeld) {
            this.respHeadersHeld = false;
            this.emitHeaders(false);
          }
          if (prior) this.emitData(prior.data, false);
          this.forwardResponse(buf.data, eos);
          return;
        }
        this.respStopped = true;
        if (status === FilterDataStatus.StopIterationNoBuffer) {
          ctx!.responseBody = null;
        } else {
          const held = prior ? new BodyBuffer(Buffer.concat([prior.data, buf.data]), true) : buf;
          this.respHeld = held;
          ctx!.responseBody = this.respBuffering ? held : null;
          if (this.respBuffering && held.size > this.opts.bufferLimitBytes) {
            this.respHeld = null;
            this.responseTooLarge();
            return;
          }
        }
        if (eos) {
          this.respPausedAt = 'data';
          this.state = 'wait_resp';
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

  /** Data continues towards the router; headers held by StopIteration go first (a frozen copy: the router saw these). */
  private forwardRequest(chunk: Buffer, eos: boolean): void {
    if (this.reqHeadersHeld) {
      this.reqHeadersHeld = false;
      // Context::decodeData leaves request_headers_ set on Continue, so the guest may still
      // change the map, but the router already routed on what it received here.
      this.releasedHeaders = new HeaderMap('request', this.requestHeaders.entries);
    }
    if (this.reqHeld) {
      this.reqForwarded.push(this.reqHeld.data);
      this.reqHeld = null;
    }
    this.reqForwarded.push(chunk);
    if (eos) this.state = 'upstream';
  }

  private forwardResponse(chunk: Buffer, eos: boolean): void {
    if (this.respHeadersHeld) {
      this.respHeadersHeld = false;
      this.emitHeaders(false);
    }
    if (this.respHeld) {
      this.emitData(this.respHeld.data, false);
      this.respHeld = null;
    }
    this.emitData(chunk, eos);
    if (eos) this.state = 'complete';
  }

  /** FilterManager responseDataTooLarge with a buffering filter: 500 (or a reset once the response started). */
  private responseTooLarge(): void {
    this.hostLocalReply(500, 'Internal Server Error', 'response_payload_too_large');
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

/**
 * ContextBase::convertVmCallResultToFilterHeadersStatus: StopIteration → StopAllIterationAndWatermark
 * unless allow_on_headers_stop_iteration.
 */
function headersStatus(r: number, stopped: boolean, allowStopIteration: boolean): FilterHeadersStatus {
  if (stopped || r > FilterHeadersStatus.StopAllIterationAndWatermark) return FilterHeadersStatus.StopAllIterationAndWatermark;
  if (r === FilterHeadersStatus.StopIteration && !allowStopIteration) return FilterHeadersStatus.StopAllIterationAndWatermark;
  if (r === FilterHeadersStatus.ContinueAndEndStream) return FilterHeadersStatus.Continue;
  return r as FilterHeadersStatus;
}

function dataStatus(r: number, stopped: boolean): FilterDataStatus {
  if (stopped || r > FilterDataStatus.StopIterationNoBuffer) return FilterDataStatus.StopIterationNoBuffer;
  return r as FilterDataStatus;
}
