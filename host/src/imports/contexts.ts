// Context plumbing: proxy_get_status, proxy_done, proxy_set_effective_context
// (cpp-host exports.cc; WasmBase::done; ContextBase status of the last http/gRPC callout).

import { WasmResult as WasmResult_ } from '../abi';
import type { WasmVm } from '../vm';
import type { Register } from './table';

const WasmResult = WasmResult_;

export function registerContexts(vm: WasmVm, env: Register): void {
  env('proxy_get_status', (codePtr: number, msgPtrPtr: number, msgSizePtr: number) => {
    const root = vm.ctx().rootContext;
    if (!vm.setU32(codePtr, root.statusCode)) return WasmResult.InvalidMemoryAccess;
    return vm.copyOut(root.statusMessage, msgPtrPtr, msgSizePtr) ? WasmResult.Ok : WasmResult.InvalidMemoryAccess;
  });  env('proxy_done', () => {
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
    vm.ctx();
    const cid = id >>> 0;
    if (!vm.contexts.has(cid)) return WasmResult.BadArgument;
    vm.effectiveId = cid;
    return WasmResult.Ok;
  });
}
