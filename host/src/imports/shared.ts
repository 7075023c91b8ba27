// Shared data (compare-and-swap) and shared queues (cpp-host shared_data.cc / shared_queue.cc).

import { WasmResult as WasmResult_ } from '../abi';
import type { WasmVm } from '../vm';
import type { Register } from './table';

const WasmResult = WasmResult_;

export function registerSharedDataAndQueues(vm: WasmVm, env: Register): void {
  const o = vm.owner;
  env('proxy_get_shared_data', (keyPtr: number, keySize: number, valPtrPtr: number, valSizePtr: number, casPtr: number) => {
    vm.ctx();
    const key = vm.str(keyPtr, keySize);
    if (key === null) return WasmResult.InvalidMemoryAccess;
    const e = o.process.sharedData.get(o.vmId, key);
    if (!e) return WasmResult.NotFound;
    if (!vm.copyOut(e.value, valPtrPtr, valSizePtr)) return WasmResult.InvalidMemoryAccess;
    return vm.setU32(casPtr, e.cas) ? WasmResult.Ok : WasmResult.InvalidMemoryAccess;
  });
  env('proxy_set_shared_data', (keyPtr: number, keySize: number, valPtr: number, valSize: number, cas: number) => {
    vm.ctx();
    const key = vm.str(keyPtr, keySize);
    const val = vm.view(valPtr, valSize);
    if (key === null || !val) return WasmResult.InvalidMemoryAccess;
    return o.process.sharedData.set(o.vmId, key, val, cas >>> 0);
  });
  env('proxy_register_shared_queue', (namePtr: number, nameSize: number, tokenPtr: number) => {
    const c = vm.ctx();
    const name = vm.str(namePtr, nameSize);
    if (name === null) return WasmResult.InvalidMemoryAccess;
    const token = o.process.queues.register(o.vmId, name, c.rootContext.id, {
      post: (cid, tok) => o.clock.post(() => vm.deliverQueueReady(cid, tok)),
    });
    return vm.setU32(tokenPtr, token) ? WasmResult.Ok : WasmResult.InvalidMemoryAccess;
  });
  env('proxy_resolve_shared_queue', (vmIdPtr: number, vmIdSize: number, namePtr: number, nameSize: number, tokenPtr: number) => {
    vm.ctx();
    const vmId = vm.str(vmIdPtr, vmIdSize);
    const name = vm.str(namePtr, nameSize);
    if (vmId === null || name === null) return WasmResult.InvalidMemoryAccess;
    const token = o.process.queues.resolve(vmId === '' ? o.vmId : vmId, name);
    if (vm.failed || token === 0) return WasmResult.NotFound;
    return vm.setU32(tokenPtr, token) ? WasmResult.Ok : WasmResult.InvalidMemoryAccess;
  });
  env('proxy_dequeue_shared_queue', (token: number, dataPtrPtr: number, dataSizePtr: number) => {
    vm.ctx();
    const r = o.process.queues.dequeue(token >>> 0);
    if (r.result !== WasmResult.Ok) return r.result;
    return vm.copyOut(r.data!, dataPtrPtr, dataSizePtr) ? WasmResult.Ok : WasmResult.InvalidMemoryAccess;
  });
  env('proxy_enqueue_shared_queue', (token: number, dataPtr: number, dataSize: number) => {
    vm.ctx();
    const d = vm.view(dataPtr, dataSize);
    if (!d) return WasmResult.InvalidMemoryAccess;
    return o.process.queues.enqueue(token >>> 0, d);
  });

}
