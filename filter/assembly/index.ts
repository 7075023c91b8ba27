// Switchyard Proxy-Wasm filter entry point.
// Nothing may call the host at top level: Envoy runs this module's start code before any context
// exists and a host call there makes instantiation fail. Only register the root context factory.
export * from "@solo-io/proxy-runtime/assembly/proxy";
// the host's allocator (replaces the SDK's malloc: one scratch area for header reads, abi/scratch.ts)
export { malloc } from "./abi/scratch";
import { RootContext, registerRootContext } from "@solo-io/proxy-runtime/assembly";
import { SwitchyardRoot } from "./plugin/root";

function newRoot(context_id: u32): RootContext { return new SwitchyardRoot(context_id); }

// Envoy passes `root_id`; Istio's WasmPlugin sets it from `pluginName`, which may be left empty.
registerRootContext(newRoot, "switchyard");
registerRootContext(newRoot, "");
