// A small strict JSON parser (RFC 8259) that reports errors instead of aborting.
// AssemblyScript has no exceptions: the JSON libraries available for it abort the VM on malformed
// input, which in Envoy kills the plugin with an unreadable message. Plugin configuration is
// operator input, so a bad document must become a clear error and `on_configure` → false.

export const enum JKind { Null = 0, Bool = 1, Num = 2, Str = 3, Arr = 4, Obj = 5 }

// Scalars share these (never written: the parser gives arrays and objects their own), so a
// number or string costs one allocation, not three.
const NO_ITEMS: Array<JValue> = [];
const NO_KEYS: Array<string> = [];

export class JValue {
  kind: JKind = JKind.Null;
  b: bool = false;
  n: f64 = 0;
  s: string = "";
  items: Array<JValue> = NO_ITEMS;
  keys: Array<string> = NO_KEYS;
  /** Objects: key → index in items/keys, so lookups and the duplicate-key check are O(1). */
  index: Map<string, i32> | null = null;

  get(key: string): JValue | null {
    const ix = this.index;
    if (ix == null || !ix.has(key)) return null;
    return this.items[ix.get(key)];
  }

  kindName(): string {
    switch (this.kind) {
      case JKind.Null: return "null";
      case JKind.Bool: return "boolean";
      case JKind.Num: return "number";
      case JKind.Str: return "string";
      case JKind.Arr: return "array";
      default: return "object";
    }
  }
}

const MAX_DEPTH = 64;

export class JsonParseResult {
  value: JValue | null = null;
  error: string = "";
}

class Parser {
  pos: i32 = 0;
  error: string = "";
  constructor(public src: string) {}

  fail(msg: string): JValue | null {
    if (this.error.length == 0) this.error = msg + " at offset " + this.pos.toString();
    return null;
  }

  skipWs(): void {
    const s = this.src;
    while (this.pos < s.length) {
      const c = s.charCodeAt(this.pos);
      if (c == 0x20 || c == 0x09 || c == 0x0a || c == 0x0d) this.pos++;
      else break;
    }
  }

  value(depth: i32): JValue | null {
    if (depth > MAX_DEPTH) return this.fail("nesting deeper than " + MAX_DEPTH.toString());
    this.skipWs();
    if (this.pos >= this.src.length) return this.fail("unexpected end of input");
    const c = this.src.charCodeAt(this.pos);
    if (c == 0x7b) return this.object(depth);
    if (c == 0x5b) return this.array(depth);
    if (c == 0x22) {
      const s = this.string();
      if (s == null) return null;
      const v = new JValue();
      v.kind = JKind.Str;
      v.s = s;
      return v;
    }
    if (c == 0x2d || (c >= 0x30 && c <= 0x39)) return this.number();
    if (this.literal("true")) { const v = new JValue(); v.kind = JKind.Bool; v.b = true; return v; }
    if (this.literal("false")) { const v = new JValue(); v.kind = JKind.Bool; v.b = false; return v; }
    if (this.literal("null")) return new JValue();
    return this.fail("unexpected character '" + String.fromCharCode(c) + "'");
  }

  literal(word: string): bool {
    if (this.src.length - this.pos < word.length) return false;
    if (this.src.substr(this.pos, word.length) != word) return false;
    this.pos += word.length;
    return true;
  }

  object(depth: i32): JValue | null {
    this.pos++; // {
    const v = new JValue();
    v.kind = JKind.Obj;
    v.items = new Array<JValue>();
    v.keys = new Array<string>();
    const index = new Map<string, i32>();
    v.index = index;
    this.skipWs();
    if (this.pos < this.src.length && this.src.charCodeAt(this.pos) == 0x7d) { this.pos++; return v; }
    while (true) {
      this.skipWs();
      if (this.pos >= this.src.length || this.src.charCodeAt(this.pos) != 0x22) return this.fail("expected a string key");
      const key = this.string();
      if (key == null) return null;
      if (index.has(key)) return this.fail("duplicate key \"" + key + "\"");
      this.skipWs();
      if (this.pos >= this.src.length || this.src.charCodeAt(this.pos) != 0x3a) return this.fail("expected ':'");
      this.pos++;
      const item = this.value(depth + 1);
      if (item == null) return null;
      index.set(key, v.keys.length);
      v.keys.push(key);
      v.items.push(item);
      this.skipWs();
      if (this.pos >= this.src.length) return this.fail("unexpected end of input in object");
      const c = this.src.charCodeAt(this.pos);
      this.pos++;
      if (c == 0x2c) continue;
      if (c == 0x7d) return v;
      this.pos--;
      return this.fail("expected ',' or '}'");
    }
  }

  array(depth: i32): JValue | null {
    this.pos++; // [
    const v = new JValue();
    v.kind = JKind.Arr;
    v.items = new Array<JValue>();
    this.skipWs();
    if (this.pos < this.src.length && this.src.charCodeAt(this.pos) == 0x5d) { this.pos++; return v; }
    while (true) {
      const item = this.value(depth + 1);
      if (item == null) return null;
      v.items.push(item);
      this.skipWs();
      if (this.pos >= this.src.length) return this.fail("unexpected end of input in array");
      const c = this.src.charCodeAt(this.pos);
      this.pos++;
      if (c == 0x2c) continue;
      if (c == 0x5d) return v;
      this.pos--;
      return this.fail("expected ',' or ']'");
    }
  }

  hex4(): i32 {
    if (this.src.length - this.pos < 4) return -1;
    let r = 0;
    for (let i = 0; i < 4; i++) {
      const c = this.src.charCodeAt(this.pos + i);
      let d = -1;
      if (c >= 0x30 && c <= 0x39) d = c - 0x30;
      else if (c >= 0x61 && c <= 0x66) d = c - 0x61 + 10;
      else if (c >= 0x41 && c <= 0x46) d = c - 0x41 + 10;
      if (d < 0) return -1;
      r = (r << 4) | d;
    }
    this.pos += 4;
    return r;
  }

  string(): string | null {
    this.pos++; // opening quote
    // Pieces joined once at the end: appending to a string per escape would copy it each time
    // (quadratic in the number of escapes).
    const out = new Array<string>();
    let start = this.pos;
    const s = this.src;
    while (true) {
      if (this.pos >= s.length) { this.fail("unterminated string"); return null; }
      const c = s.charCodeAt(this.pos);
      if (c == 0x22) {
        if (out.length == 0) { const whole = s.substring(start, this.pos); this.pos++; return whole; }
        out.push(s.substring(start, this.pos));
        this.pos++;
        return out.join("");
      }
      if (c < 0x20) { this.fail("control character in string"); return null; }
      if (c == 0x5c) {
        out.push(s.substring(start, this.pos));
        this.pos++;
        if (this.pos >= s.length) { this.fail("unterminated escape"); return null; }
        const e = s.charCodeAt(this.pos);
        this.pos++;
        if (e == 0x22) out.push("\"");
        else if (e == 0x5c) out.push("\\");
        else if (e == 0x2f) out.push("/");
        else if (e == 0x62) out.push("\b");
        else if (e == 0x66) out.push("\f");
        else if (e == 0x6e) out.push("\n");
        else if (e == 0x72) out.push("\r");
        else if (e == 0x74) out.push("\t");
        else if (e == 0x75) {
          const u = this.hex4();
          if (u < 0) { this.fail("bad \\u escape"); return null; }
          out.push(String.fromCharCode(u));
        } else { this.pos--; this.fail("bad escape"); return null; }
        start = this.pos;
        continue;
      }
      this.pos++;
    }
  }

  number(): JValue | null {
    const s = this.src;
    const start = this.pos;
    if (s.charCodeAt(this.pos) == 0x2d) this.pos++;
    if (this.pos >= s.length) return this.fail("bad number");
    let c = s.charCodeAt(this.pos);
    if (c == 0x30) {
      this.pos++;
    } else if (c >= 0x31 && c <= 0x39) {
      while (this.pos < s.length && isDigit(s.charCodeAt(this.pos))) this.pos++;
    } else return this.fail("bad number");
    if (this.pos < s.length && s.charCodeAt(this.pos) == 0x2e) {
      this.pos++;
      if (this.pos >= s.length || !isDigit(s.charCodeAt(this.pos))) return this.fail("bad number");
      while (this.pos < s.length && isDigit(s.charCodeAt(this.pos))) this.pos++;
    }
    if (this.pos < s.length) {
      c = s.charCodeAt(this.pos);
      if (c == 0x65 || c == 0x45) {
        this.pos++;
        if (this.pos < s.length) {
          c = s.charCodeAt(this.pos);
          if (c == 0x2b || c == 0x2d) this.pos++;
        }
        if (this.pos >= s.length || !isDigit(s.charCodeAt(this.pos))) return this.fail("bad number");
        while (this.pos < s.length && isDigit(s.charCodeAt(this.pos))) this.pos++;
      }
    }
    const v = new JValue();
    v.kind = JKind.Num;
    v.n = this.pos - start <= 15 && isPlainInt(s, start, this.pos) ? intValue(s, start, this.pos) : parseFloat(s.substring(start, this.pos));
    return v;
  }
}

function isDigit(c: i32): bool { return c >= 0x30 && c <= 0x39; }

/** Digits with an optional leading '-': exact in f64 up to 15 digits, no parseFloat needed. */
function isPlainInt(s: string, from: i32, to: i32): bool {
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i);
    if (!isDigit(c) && !(c == 0x2d && i == from)) return false;
  }
  return true;
}

function intValue(s: string, from: i32, to: i32): f64 {
  const neg = s.charCodeAt(from) == 0x2d;
  let n: f64 = 0;
  for (let i = neg ? from + 1 : from; i < to; i++) n = n * 10 + <f64>(s.charCodeAt(i) - 0x30);
  return neg ? -n : n;
}

export function parseJson(src: string): JsonParseResult {
  const p = new Parser(src);
  const r = new JsonParseResult();
  const v = p.value(0);
  if (v != null) {
    p.skipWs();
    if (p.pos != src.length) {
      p.fail("trailing characters");
    } else {
      r.value = v;
      return r;
    }
  }
  r.error = p.error.length > 0 ? p.error : "invalid JSON";
  return r;
}
