// proxy_http_call (Envoy Context::httpCall); the answer comes back through WasmVm.deliverHttpCallResponse.

import { WasmResult as WasmResult_ } from '../abi';
import { HeaderMap } from '../header-map';
import { parsePairs } from '../pairs';
import type { WasmVm } from '../vm';
import type { Register } from './table';

const WasmResult = WasmResult_;

export function registerHttpCall(vm: WasmVm, env: Register): void {
  const o = vm.owner;
  env('proxy_http_call', (uriPtr: number, uriSize: number, hdrPtr: number, hdrSize: number, bodyPtr: number,
    bodySize: number, trlPtr: number, trlSize: number, timeout: number, tokenPtr: number) => {
    const root = vm.ctx().rootContext;
    const uri = vm.str(uriPtr, uriSize);
    const body = vm.view(bodyPtr, bodySize);
    const hdrs = vm.view(hdrPtr, hdrSize);
    const trls = vm.view(trlPtr, trlSize);
    if (uri === null || !body || !hdrs || !trls) return WasmResult.InvalidMemoryAccess;
    const headerPairs = parsePairs(hdrs);
    const trailerPairs = parsePairs(trls);
    // Verify the token memory before starting the async operation.
    if (!vm.setU32(tokenPtr, 0)) return WasmResult.InvalidMemoryAccess;
    // Context::httpCall
    if ((timeout | 0) < 0) return WasmResult.BadArgument;
    if (!o.hasCluster(uri)) return WasmResult.BadArgument;
    const headers = new HeaderMap('request', headerPairs);
    if (headers.get(':path') === undefined || headers.get(':method') === undefined
      || headers.get(':authority') === undefined) return WasmResult.BadArgument;
    const b = Buffer.from(body);
    if (b.length > 0) headers.set('content-length', String(b.length));
    const trailers = trailerPairs.length ? new HeaderMap('request-trailers', trailerPairs) : null;
    vm.nextHttpCallId = (vm.nextHttpCallId + 4) >>> 0;
    const token = vm.nextHttpCallId;
    if (!o.httpCall(vm, root.id, token, uri, headers, b, trailers, timeout | 0)) return WasmResult.InternalFailure;
    vm.setU32(tokenPtr, token);
    return WasmResult.Ok;
  });

}
