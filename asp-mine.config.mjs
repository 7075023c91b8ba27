import base from "./as-pect.config.mjs";
export default { ...base, entries: (process.env.SPECS ?? "filter/__tests__/mesh-inflight.spec.ts").split(",") };
