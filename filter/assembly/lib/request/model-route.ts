// Model aliasing and weighted splits across model versions (the `request.models` config): the
// model a request is routed as. A split is deterministic per x-request-id when the request has
// one (a retry lands on the same version), else drawn at random.
import { ModelRule } from "./config";

/** FNV-1a over the bytes of a header value, to basis points 0..9999. */
export function basisPointsOf(bytes: ArrayBuffer): i32 {
  let h: u32 = 0x811c9dc5;
  const p = changetype<usize>(bytes);
  for (let i = 0; i < bytes.byteLength; i++) { h ^= <u32>load<u8>(p + <usize>i); h *= 0x01000193; }
  h ^= h >> 15; // FNV's low bits mix poorly
  h *= 0x2c1b3c6d;
  h ^= h >> 12;
  return <i32>(h % 10000);
}

/** The model to route as: the alias target, a split target when `bp` (0..9999) falls in its share, else `model`. */
export function routeModel(rule: ModelRule | null, model: string, bp: i32): string {
  if (rule == null) return model;
  const r = rule!;
  if (r.aliasOf.length > 0) return r.aliasOf;
  let acc: i32 = 0;
  for (let i = 0; i < r.split.length; i++) {
    acc += r.split[i].basisPoints;
    if (bp < acc) return r.split[i].to;
  }
  return model;
}
