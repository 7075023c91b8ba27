// Proxy-Wasm ABI v0.2.0 / v0.2.1 constants and the host import table.
//
// Values follow proxy-wasm-cpp-host (include/proxy-wasm/*, src/exports.cc) and the
// proxy-wasm spec (abi-versions/v0.2.1/README.md). This file holds NO product logic.

/** proxy_status_t / WasmResult, as in proxy_wasm_common.h. */
export enum WasmResult {
  Ok = 0,
  NotFound = 1,
  BadArgument = 2,
  SerializationFailure = 3,
  ParseFailure = 4,
  BadExpression = 5,
  InvalidMemoryAccess = 6,
  Empty = 7,
  CasMismatch = 8,
  ResultMismatch = 9,
  InternalFailure = 10,
  BrokenConnection = 11,
  Unimplemented = 12,
}

export const WasmResultName: Record<number, string> = {
  0: 'Ok', 1: 'NotFound', 2: 'BadArgument', 3: 'SerializationFailure', 4: 'ParseFailure',
  5: 'BadExpression', 6: 'InvalidMemoryAccess', 7: 'Empty', 8: 'CasMismatch', 9: 'ResultMismatch',
  10: 'InternalFailure', 11: 'BrokenConnection', 12: 'Unimplemented',
};

export enum HeaderMapType {
  RequestHeaders = 0,
  RequestTrailers = 1,
  ResponseHeaders = 2,
  ResponseTrailers = 3,
  GrpcReceiveInitialMetadata = 4,
  GrpcReceiveTrailingMetadata = 5,
  HttpCallResponseHeaders = 6,
  HttpCallResponseTrailers = 7,
}
export const HEADER_MAP_TYPE_MAX = 7;

export enum BufferType {
  HttpRequestBody = 0,
  HttpResponseBody = 1,
  NetworkDownstreamData = 2,
  NetworkUpstreamData = 3,
  HttpCallResponseBody = 4,
  GrpcReceiveBuffer = 5,
  VmConfiguration = 6,
  PluginConfiguration = 7,
  CallData = 8,
}
export const BUFFER_TYPE_MAX = 8;

export enum StreamType {
  Request = 0,
  Response = 1,
  Downstream = 2,
  Upstream = 3,
}
export const STREAM_TYPE_MAX = 3;

export enum MetricType {
  Counter = 0,
  Gauge = 1,
  Histogram = 2,
}
export const METRIC_TYPE_MAX = 2;

/** spdlog levels == proxy_log_level_t. */
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'critical'] as const;
export type LogLevelName = (typeof LOG_LEVELS)[number];
export const LOG_LEVEL_MAX = 5;
export function logLevelValue(name: LogLevelName | 'off'): number {
  if (name === 'off') return 6;
  const i = LOG_LEVELS.indexOf(name);
  if (i < 0) throw new Error(`unknown log level ${name}`);
  return i;
}

/** FilterHeadersStatus (proxy-wasm-cpp-host context_interface.h). */
export enum FilterHeadersStatus {
  Continue = 0,
  StopIteration = 1,
  ContinueAndEndStream = 2,
  StopAllIterationAndBuffer = 3,
  StopAllIterationAndWatermark = 4,
}
export enum FilterDataStatus {
  Continue = 0,
  StopIterationAndBuffer = 1,
  StopIterationAndWatermark = 2,
  StopIterationNoBuffer = 3,
}

export type AbiVersion = '0.2.0' | '0.2.1';

// --- Import table -----------------------------------------------------------------------------
// Signature strings: params '->' results, using i (i32) and I (i64).

const I3 = 'iii->i';
const I5 = 'iiiii->i';

/**
 * env.* functions Envoy (via proxy-wasm-cpp-host WasmBase::registerCallbacks and Envoy's own
 * Wasm::registerCallbacks) registers for ABI 0.2.x modules. proxy_get_log_level exists only for
 * 0.2.1 modules; a 0.2.0 module importing it fails to link in Envoy.
 */
export const ENV_IMPORTS: Record<string, string> = {
  proxy_log: I3,
  proxy_get_status: I3,
  proxy_set_property: 'iiii->i',
  proxy_get_property: 'iiii->i',
  proxy_send_local_response: 'iiiiiiii->i',
  proxy_get_shared_data: I5,
  proxy_set_shared_data: I5,
  proxy_register_shared_queue: I3,
  proxy_resolve_shared_queue: I5,
  proxy_dequeue_shared_queue: I3,
  proxy_enqueue_shared_queue: I3,
  proxy_get_header_map_value: I5,
  proxy_add_header_map_value: I5,
  proxy_replace_header_map_value: I5,
  proxy_remove_header_map_value: I3,
  proxy_get_header_map_pairs: I3,
  proxy_set_header_map_pairs: I3,
  proxy_get_header_map_size: 'ii->i',
  proxy_get_buffer_status: I3,
  proxy_get_buffer_bytes: I5,
  proxy_set_buffer_bytes: I5,
  proxy_http_call: 'iiiiiiiiii->i',
  proxy_grpc_call: 'iiiiiiiiiiii->i',
  proxy_grpc_stream: 'iiiiiiiii->i',
  proxy_grpc_close: 'i->i',
  proxy_grpc_cancel: 'i->i',
  proxy_grpc_send: 'iiii->i',
  proxy_set_tick_period_milliseconds: 'i->i',
  proxy_get_current_time_nanoseconds: 'i->i',
  proxy_define_metric: 'iiii->i',
  proxy_increment_metric: 'iI->i',
  proxy_record_metric: 'iI->i',
  proxy_get_metric: 'ii->i',
  proxy_set_effective_context: 'i->i',
  proxy_done: '->i',
  proxy_call_foreign_function: 'iiiiii->i',
  proxy_continue_stream: 'i->i',
  proxy_close_stream: 'i->i',
  // registered unconditionally by cpp-host
  pthread_equal: 'ii->i',
  emscripten_notify_memory_growth: 'i->',
  // Envoy-specific (source/extensions/common/wasm/wasm.cc)
  envoy_resolve_dns: I3,
};
export const ENV_IMPORTS_0_2_1_ONLY = new Set(['proxy_get_log_level']);
ENV_IMPORTS.proxy_get_log_level = 'i->i';

/** WASI functions cpp-host registers under wasi_unstable and wasi_snapshot_preview1. */
export const WASI_IMPORTS: Record<string, string> = {
  fd_write: 'iiii->i',
  fd_read: 'iiii->i',
  fd_seek: 'iIii->i',
  fd_close: 'i->i',
  fd_fdstat_get: 'ii->i',
  fd_fdstat_set_flags: 'ii->i',
  fd_fdstat_set_rights: 'iII->i',
  environ_get: 'ii->i',
  environ_sizes_get: 'ii->i',
  args_get: 'ii->i',
  args_sizes_get: 'ii->i',
  clock_time_get: 'iIi->i',
  clock_res_get: 'ii->i',
  fd_advise: 'iIIi->i',
  fd_allocate: 'iII->i',
  fd_datasync: 'i->i',
  fd_filestat_set_size: 'iI->i',
  fd_filestat_set_times: 'iIIi->i',
  fd_pread: 'iiiIi->i',
  fd_pwrite: 'iiiIi->i',
  fd_readdir: 'iiiIi->i',
  fd_renumber: 'ii->i',
  fd_sync: 'i->i',
  fd_tell: 'ii->i',
  path_create_directory: 'iii->i',
  path_filestat_set_times: 'iiiiIIi->i',
  path_link: 'iiiiiii->i',
  path_readlink: 'iiiiii->i',
  path_remove_directory: 'iii->i',
  path_rename: 'iiiiii->i',
  path_symlink: 'iiiii->i',
  path_unlink_file: 'iii->i',
  sock_accept: 'iii->i',
  sock_recv: 'iiiiii->i',
  sock_send: 'iiiii->i',
  sock_shutdown: 'ii->i',
  random_get: 'ii->i',
  sched_yield: '->i',
  poll_oneoff: 'iiii->i',
  proc_exit: 'i->',
  path_open: 'iiiiiIIii->i',
  fd_prestat_get: 'ii->i',
  fd_prestat_dir_name: 'iii->i',
  path_filestat_get: 'iiiii->i',
  fd_filestat_get: 'ii->i',
};

export const WASI_MODULES = new Set(['wasi_snapshot_preview1', 'wasi_unstable']);

/** Expected signature of an import Envoy knows, or undefined if Envoy does not register it. */
export function knownImportSignature(module: string, name: string, abi: AbiVersion): string | undefined {
  if (module === 'env') {
    if (abi === '0.2.0' && ENV_IMPORTS_0_2_1_ONLY.has(name)) return undefined;
    return ENV_IMPORTS[name];
  }
  if (WASI_MODULES.has(module)) return WASI_IMPORTS[name];
  return undefined;
}

/**
 * Host calls allowed while the VM runs _initialize/_start/main (cpp-host WasmBase::startVm).
 * Anything else traps with "restricted_callback".
 */
export const START_ALLOWED = new Set<string>([
  'env.emscripten_notify_memory_growth',
  'env.proxy_log',
]);
for (const m of WASI_MODULES) {
  for (const f of [
    'fd_write', 'args_sizes_get', 'args_get', 'environ_sizes_get', 'environ_get', 'clock_time_get',
    'clock_res_get', 'random_get', 'poll_oneoff', 'fd_fdstat_get', 'fd_fdstat_set_flags', 'fd_advise',
    'fd_allocate', 'fd_datasync', 'fd_fdstat_set_rights', 'fd_filestat_get', 'fd_filestat_set_size',
    'fd_filestat_set_times', 'fd_pread', 'fd_prestat_dir_name', 'fd_prestat_get', 'fd_pwrite',
    'fd_readdir', 'fd_renumber', 'fd_sync', 'fd_tell', 'path_create_directory', 'path_filestat_get',
    'path_filestat_set_times', 'path_link', 'path_readlink', 'path_remove_directory', 'path_rename',
    'path_symlink', 'path_unlink_file', 'sock_accept', 'sock_recv', 'sock_send', 'sock_shutdown',
  ]) START_ALLOWED.add(`${m}.${f}`);
}

/** Host calls allowed while the host runs the guest's malloc (cpp-host WasmBase::allocMemory). */
export const MALLOC_ALLOWED = new Set<string>(['env.proxy_log']);
for (const m of WASI_MODULES) {
  for (const f of ['fd_write', 'clock_time_get', 'poll_oneoff']) MALLOC_ALLOWED.add(`${m}.${f}`);
}
