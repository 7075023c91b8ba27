// proxy_log and proxy_get_log_level (cpp-host exports.cc log / get_log_level; Envoy Context::log).

import { LOG_LEVEL_MAX as LOG_LEVEL_MAX_, WasmResult as WasmResult_ } from '../abi';
import type { WasmVm } from '../vm';
import type { Register } from './table';

const WasmResult = WasmResult_;
const LOG_LEVEL_MAX = LOG_LEVEL_MAX_;

export function registerLogging(vm: WasmVm, env: Register): void {
  const o = vm.owner;
  env('proxy_log', (level: number, ptr: number, size: number) => {
    if ((level >>> 0) > LOG_LEVEL_MAX) return WasmResult.BadArgument;
    const c = vm.ctx();
    const m = vm.view(ptr, size);
    if (!m) return WasmResult.InvalidMemoryAccess;
    vm.emit(level >>> 0, 'wasm', c.id, m.toString('utf8'));
    return WasmResult.Ok;
  });
  if (vm.abi === '0.2.1') {
    env('proxy_get_log_level', (ptr: number) => {
      return vm.setU32(ptr, o.logLevel) ? WasmResult.Ok : WasmResult.InvalidMemoryAccess;
    });
  }
}
