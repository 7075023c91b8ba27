// Baseline for benchmarks: the same SDK and runtime, a stream context that does nothing.
export * from "@solo-io/proxy-runtime/assembly/proxy";
import { RootContext, Context, registerRootContext, FilterHeadersStatusValues } from "@solo-io/proxy-runtime/assembly";

class NoopStream extends Context {
  onRequestHeaders(_n: u32, _eos: bool): FilterHeadersStatusValues { return FilterHeadersStatusValues.Continue; }
}
class NoopRoot extends RootContext {
  createContext(id: u32): Context { return new NoopStream(id, this); }
  onConfigure(_size: u32): bool { return true; }
}
function newRoot(id: u32): RootContext { return new NoopRoot(id); }
registerRootContext(newRoot, "switchyard");
registerRootContext(newRoot, "");
