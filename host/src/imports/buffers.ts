// proxy_get_buffer_status / proxy_get_buffer_bytes / proxy_set_buffer_bytes
// (cpp-host exports.cc; Envoy Context::getBuffer and Buffer::copyTo / copyFrom).

import { BUFFER_TYPE_MAX as BUFFER_TYPE_MAX_, BufferType as BufferType_, WasmResult as WasmResult_ } from '../abi';
import { BodyBuffer, EMPTY_BUFFER, type Context, type VmOwner } from '../context';
import type { WasmVm } from '../vm';
import type { Register } from './table';

const WasmResult = WasmResult_;
const BufferType = BufferType_;
const BUFFER_TYPE_MAX = BUFFER_TYPE_MAX_;

export function registerBuffers(vm: WasmVm, env: Register): void {
  const o = vm.owner;
  env('proxy_get_buffer_bytes', (type: number, start: number, length: number, ptrPtr: number, sizePtr: number) => {
    type >>>= 0;
    if (type > BUFFER_TYPE_MAX) return WasmResult.BadArgument;
    const c = vm.ctx();
    const buf = getBuffer(o, c, type);
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
    type >>>= 0;
    if (type > BUFFER_TYPE_MAX) return WasmResult.BadArgument;
    const c = vm.ctx();
    const buf = getBuffer(o, c, type);
    if (!buf) return WasmResult.NotFound;
    if (!vm.setU32(lengthPtr, buf.size)) return WasmResult.InvalidMemoryAccess;
    return vm.setU32(flagsPtr, 0) ? WasmResult.Ok : WasmResult.InvalidMemoryAccess;
  });
  env('proxy_set_buffer_bytes', (type: number, start: number, length: number, dataPtr: number, dataSize: number) => {
    type >>>= 0;
    if (type > BUFFER_TYPE_MAX) return WasmResult.BadArgument;
    const c = vm.ctx();
    const buf = getBuffer(o, c, type);
    if (!buf) return WasmResult.NotFound;
    const data = vm.view(dataPtr, dataSize);
    if (!data) return WasmResult.InvalidMemoryAccess;
    return buf.copyFrom(start >>> 0, length >>> 0, Buffer.from(data));
  });

}

/** Context::getBuffer */
export function getBuffer(o: VmOwner, c: Context, type: number): BodyBuffer | null {
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
      return new BodyBuffer(o.vmConfig, false);
    case BufferType.PluginConfiguration:
      return c.tempPlugin ? new BodyBuffer(o.pluginConfig, false) : null;
    default:
      return null;
  }
}
