// The seed article's design without its cache: every request asks the agent's /status over
// proxy_http_call and waits for the answer before it continues. Used only as a benchmark baseline.
export * from "@solo-io/proxy-runtime/assembly/proxy";
import {
  RootContext, Context, BaseContext, registerRootContext, FilterHeadersStatusValues, HeaderPair,
  stream_context, continue_request,
} from "@solo-io/proxy-runtime/assembly";
import { readBuffer, BUFFER_HTTP_CALL_RESPONSE_BODY } from "../../filter/assembly/abi/host";

function pair(k: string, v: string): HeaderPair { return new HeaderPair(String.UTF8.encode(k), String.UTF8.encode(v)); }

function onStatus(origin: BaseContext, headers: u32, bodySize: usize, _trailers: u32): void {
  let status = "degraded"; // agent unreachable: stay local, as the seed does
  if (headers > 0) {
    const body = readBuffer(BUFFER_HTTP_CALL_RESPONSE_BODY, <u32>bodySize);
    if (body != null && String.UTF8.decode(body) == "healthy") status = "normal";
  }
  stream_context.headers.request.replace("x-cross-cloud-status", status);
  continue_request();
}

class UncachedStream extends Context {
  onRequestHeaders(_n: u32, _eos: bool): FilterHeadersStatusValues {
    const root = this.root_context;
    const r = root.httpCall("switchyard_agent", [pair(":method", "GET"), pair(":path", "/status"), pair(":authority", "switchyard-agent")],
      new ArrayBuffer(0), [], 50, this, onStatus);
    return r == 0 ? FilterHeadersStatusValues.StopIteration : FilterHeadersStatusValues.Continue;
  }
}
class UncachedRoot extends RootContext {
  createContext(id: u32): Context { return new UncachedStream(id, this); }
  onConfigure(_size: u32): bool { return true; }
}
function newRoot(id: u32): RootContext { return new UncachedRoot(id); }
registerRootContext(newRoot, "switchyard");
registerRootContext(newRoot, "");
