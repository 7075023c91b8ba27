// The per-context state a VM keeps (Envoy/cpp-host ContextBase), the body buffer Wasm sees, and the
// interfaces between a VM, its owner (the host) and the HTTP stream driving a context.

import type { WasmResult as WasmResultT } from './abi';
import { WasmResult as WasmResult_ } from './abi';
import type { HeaderMap } from './header-map';
import type { Pair } from './pairs';
import type { Clock } from './clock';
import type { EnvoyProcess } from './stores';
import type { WasmVm } from './vm';

const WasmResult = WasmResult_;
type WasmResult = WasmResultT;

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
export const EMPTY_BUFFER = new BodyBuffer(Buffer.alloc(0), false);

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
