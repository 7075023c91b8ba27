// A stream's control calls: proxy_continue_stream, proxy_close_stream, proxy_send_local_response
// (Envoy Context::continueStream / closeStream / sendLocalResponse) and the foreign function
// clear_route_cache. The stream effects run as after-call actions, as in Envoy.

import { STREAM_TYPE_MAX as STREAM_TYPE_MAX_, StreamType as StreamType_, WasmResult as WasmResult_ } from '../abi';
import { UnimplementedImportError } from '../context';
import { parsePairs } from '../pairs';
import type { WasmVm } from '../vm';
import type { Register } from './table';

const WasmResult = WasmResult_;
const StreamType = StreamType_;
const STREAM_TYPE_MAX = STREAM_TYPE_MAX_;

/** Foreign functions Envoy registers that this host does not implement (calling one throws). */
const ENVOY_FOREIGN_FUNCTIONS = new Set([
  'compress', 'uncompress', 'declare_property', 'set_envoy_filter_state', 'expr_create',
  'expr_evaluate', 'expr_delete', 'verify_signature', 'sign',
]);

export function registerStreamControl(vm: WasmVm, env: Register): void {
  env('proxy_continue_stream', (type: number) => {
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
  env('proxy_call_foreign_function', (namePtr: number, nameSize: number, argPtr: number, argSize: number,
    resPtr: number, resSizePtr: number) => {
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

}
