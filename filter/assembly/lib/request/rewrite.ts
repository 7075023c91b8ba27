// The body with its `model` value replaced (alias or split target), so that the instance chosen for
// the routed model is asked for a model it serves. Only the model string's bytes change. And the
// body with the request's vLLM `priority` (from its criticality) set: vLLM reads it only from the
// body (no header), so it is appended as the object's last member — JSON parsers that keep the
// last of duplicate keys (Python's json, which vLLM's server uses) then take ours over a
// `priority` the client sent itself.

/** JSON string contents (no quotes) of `s`: quote, backslash and control characters escaped. */
export function jsonEscape(s: string): string {
  let out = "";
  let run = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x20 && c != 0x22 && c != 0x5c) continue;
    out += s.substring(run, i);
    if (c == 0x22) out += "\\\"";
    else if (c == 0x5c) out += "\\\\";
    else if (c == 0x0a) out += "\\n";
    else if (c == 0x0d) out += "\\r";
    else if (c == 0x09) out += "\\t";
    else out += "\\u00" + (c < 0x10 ? "0" : "") + c.toString(16);
    run = i + 1;
  }
  return out + s.substring(run);
}

/** `body` with bytes [start, end) (the raw model string between its quotes) replaced by `model`, JSON-escaped. */
export function withModel(body: ArrayBuffer, start: i32, end: i32, model: string): ArrayBuffer {
  const m = String.UTF8.encode(jsonEscape(model));
  const n = body.byteLength - (end - start) + m.byteLength;
  const out = new ArrayBuffer(n);
  const o = changetype<usize>(out), b = changetype<usize>(body);
  memory.copy(o, b, <usize>start);
  memory.copy(o + <usize>start, changetype<usize>(m), <usize>m.byteLength);
  memory.copy(o + <usize>start + <usize>m.byteLength, b + <usize>end, <usize>(body.byteLength - end));
  return out;
}

/** `body` (a complete JSON object) with `,"priority":N` before its closing brace; null when the body does not end with `}`. */
export function withPriority(body: ArrayBuffer, priority: i32): ArrayBuffer | null {
  const b = changetype<usize>(body);
  let end = body.byteLength;
  while (end > 0) {
    const c = load<u8>(b + <usize>(end - 1));
    if (c != 0x20 && c != 0x09 && c != 0x0a && c != 0x0d) break;
    end--;
  }
  if (end == 0 || load<u8>(b + <usize>(end - 1)) != 0x7d) return null;
  const close = end - 1;
  // an empty object has no member to follow
  let k = close;
  while (k > 0) {
    const c = load<u8>(b + <usize>(k - 1));
    if (c != 0x20 && c != 0x09 && c != 0x0a && c != 0x0d) break;
    k--;
  }
  const empty = k > 0 && load<u8>(b + <usize>(k - 1)) == 0x7b;
  const m = String.UTF8.encode((empty ? "" : ",") + "\"priority\":" + priority.toString());
  const out = new ArrayBuffer(body.byteLength + m.byteLength);
  const o = changetype<usize>(out);
  memory.copy(o, b, <usize>close);
  memory.copy(o + <usize>close, changetype<usize>(m), <usize>m.byteLength);
  memory.copy(o + <usize>close + <usize>m.byteLength, b + <usize>close, <usize>(body.byteLength - close));
  return out;
}
