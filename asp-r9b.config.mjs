import base from "./as-pect.config.mjs";
export default { ...base, entries: ["filter/__tests__/mesh-prefix.spec.ts", "filter/__tests__/request-prefix.spec.ts", "filter/__tests__/request-prefix-share.spec.ts"] };
