// proxy_get_property / proxy_set_property (Envoy Context::getProperty / setProperty).

import { WasmResult as WasmResult_ } from '../abi';
import type { Context, VmOwner } from '../context';
import type { WasmVm } from '../vm';
import type { Register } from './table';

const WasmResult = WasmResult_;
type WasmResult = WasmResult_;

export function registerProperties(vm: WasmVm, env: Register): void {
  const o = vm.owner;
  env('proxy_get_property', (pathPtr: number, pathSize: number, valPtrPtr: number, valSizePtr: number) => {
    const c = vm.ctx();
    const path = vm.view(pathPtr, pathSize);
    if (!path) return WasmResult.InvalidMemoryAccess;
    const value = getProperty(o, c, Buffer.from(path));
    if (typeof value === 'number') return value;
    return vm.copyOut(value, valPtrPtr, valSizePtr) ? WasmResult.Ok : WasmResult.InvalidMemoryAccess;
  });
  env('proxy_set_property', (keyPtr: number, keySize: number, valPtr: number, valSize: number) => {
    const c = vm.ctx();
    const key = vm.str(keyPtr, keySize);
    const val = vm.view(valPtr, valSize);
    if (key === null || !val) return WasmResult.InvalidMemoryAccess;
    // Context::setProperty: a (CelState) filter state entry "wasm.<path>" on the stream info.
    if (!c.stream) return WasmResult.NotFound;
    c.stream.filterState.set(key, Buffer.from(val));
    return WasmResult.Ok;
  });
}

/**
 * Context::getProperty for the properties this host knows: plugin_name, plugin_root_id,
 * plugin_vm_id, a few request attributes, and filter state set by proxy_set_property.
 * Path segments are separated by '\0'. Unknown paths give NotFound, like Envoy.
 */
export function getProperty(o: VmOwner, c: Context, path: Buffer): Buffer | string | WasmResult {
  const parts: string[] = [];
  let start = 0;
  while (start < path.length) {
    let end = path.indexOf(0, start);
    if (end < 0) end = path.length;
    parts.push(path.toString('latin1', start, end));
    start = end + 1;
  }
  if (parts.length === 0) return WasmResult.NotFound;
  const [top, ...rest] = parts;
  const leaf = (v: string | Buffer | undefined): Buffer | string | WasmResult =>
    v === undefined || rest.length > 0 ? WasmResult.NotFound : v;
  switch (top) {
    case 'plugin_name': return leaf(o.pluginName);
    case 'plugin_root_id': return leaf(o.rootId);
    case 'plugin_vm_id': return leaf(o.vmId);
    case 'request': {
      const h = c.accessLog ? c.accessLog.request : c.requestHeaders;
      if (!h || rest.length === 0) return WasmResult.NotFound;
      const [field, ...more] = rest;
      let v: string | undefined;
      if (field === 'headers') {
        if (more.length !== 1) return WasmResult.NotFound;
        return h.get(more[0]) ?? WasmResult.NotFound;
      }
      if (more.length) return WasmResult.NotFound;
      if (field === 'path') v = h.get(':path');
      else if (field === 'url_path') v = h.get(':path')?.split('?')[0];
      else if (field === 'host') v = h.get(':authority');
      else if (field === 'method') v = h.get(':method');
      else if (field === 'scheme') v = h.get(':scheme');
      else if (field === 'id') v = h.get('x-request-id');
      return v ?? WasmResult.NotFound;
    }
    default: {
      const fs = c.stream?.filterState.get(top);
      return leaf(fs);
    }
  }
}
