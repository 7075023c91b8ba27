// Header maps: get / add / replace / remove a value, get / set all pairs, size
// (Envoy Context::getMap / getConstMap and the *HeaderMapValue calls; request-header mutation
// clears the route cache).

import { HEADER_MAP_TYPE_MAX as HEADER_MAP_TYPE_MAX_, HeaderMapType as HeaderMapType_, WasmResult as WasmResult_ } from '../abi';
import type { Context } from '../context';
import type { HeaderMap } from '../header-map';
import { pairsSize, parsePairs, writePairs } from '../pairs';
import type { WasmVm } from '../vm';
import type { Register } from './table';

const WasmResult = WasmResult_;
const HeaderMapType = HeaderMapType_;
const HEADER_MAP_TYPE_MAX = HEADER_MAP_TYPE_MAX_;

export function registerHeaderMaps(vm: WasmVm, env: Register): void {
  // add and replace differ only in what they do to the map (add another value / set the only one)
  const writeHeader = (replace: boolean) =>
    (type: number, kPtr: number, kSize: number, vPtr: number, vSize: number): number => {
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
  env('proxy_add_header_map_value', writeHeader(false));
  env('proxy_get_header_map_value', (type: number, kPtr: number, kSize: number, vPtrPtr: number, vSizePtr: number) => {
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
  env('proxy_replace_header_map_value', writeHeader(true));
  env('proxy_remove_header_map_value', (type: number, kPtr: number, kSize: number) => {
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
    type >>>= 0;
    if (type > HEADER_MAP_TYPE_MAX) return WasmResult.BadArgument;
    const c = vm.ctx();
    const map = getMap(c, type);
    if (!map) return WasmResult.BadArgument;
    return vm.setU32(resultPtr, map.byteSize()) ? WasmResult.Ok : WasmResult.InvalidMemoryAccess;
  });

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
