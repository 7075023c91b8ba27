// Extraction of the routing-relevant fields of an OpenAI request body (/v1/completions,
// /v1/chat/completions): `model`, the prompt (as byte spans of the body, not copied), the output
// budget (`max_completion_tokens`, else `max_tokens`) and `stream`.
//
// One pass over the bytes, validating the whole document as strict JSON (RFC 8259) but building
// no tree: a value that is not needed is skipped with an explicit container stack, so input
// depth costs no wasm stack and time is linear in the body. lib/json.ts is not reused here: it
// parses a UTF-16 string (the body would first be decoded from UTF-8, a copy twice its size) and
// allocates a node and a string copy per value, which for a 64 KiB prompt costs several times
// the whole budget (bench/request-parse.ts measures both). Body bytes are untrusted: every read
// is bounds-checked, every bad input yields a distinct error code, never a trap.
//
// Prompt spans are the raw bytes between a JSON string's quotes (escapes left as sent): they
// feed the prefix hash (lib/request/prefix.ts), which only needs equal prompts to give equal
// bytes. For chat, each message contributes its role span then its text spans, in body order.
//
// Size estimate (promptTokenEstimate / outTokenEstimate below): besides the text spans, the chat
// template renders `tools` (and the deprecated `functions`) into the prompt, so their JSON bytes
// count as prompt bytes (not hashed: they are not prompt text the prefix index keys on); an image
// part counts IMAGE_TOKENS_LOW (detail "low") or IMAGE_TOKENS (any other detail) tokens; the
// decode budget is multiplied by `n` (choices generated per request). `prompt: null` is a prompt
// of no text (the spec's default), and integral numbers written as floats (`100.0`, `1e2`) are
// read as integers.

/**
 * Tokens of one image part when its size is not known (the body carries a URL or base64 bytes,
 * which the filter does not decode): OpenAI's documented vision cost, 85 tokens for detail "low"
 * and 85 + 170 per 512-px tile for "high", here a 1024x1024 image (4 tiles) = 765 for "high",
 * "auto" or no detail. Open vision models are in the same range (LLaVA-1.5: 576 tokens per
 * 336-px image); a larger estimate prices the request slower, never cheaper.
 */
export const IMAGE_TOKENS: i64 = 765;
export const IMAGE_TOKENS_LOW: i64 = 85;
/** largest `n` accepted (OpenAI's documented maximum) */
export const MAX_N: i64 = 128;

export const enum ReqError {
  None = 0,
  /** body longer than the configured maximum */
  TooLarge = 1,
  /** not JSON (syntax error, trailing bytes, empty) */
  NotJson = 2,
  /** nesting deeper than the configured maximum */
  TooDeep = 3,
  /** no `model`, or it is not a non-empty string */
  NoModel = 4,
  /** a known field has the wrong type or range (errorField names it) */
  BadField = 5,
  /** more prompt spans than the configured maximum */
  TooManyParts = 6,
  /** the top-level value is not an object */
  NotObject = 7,
}

export const API_COMPLETIONS: u8 = 1;
export const API_CHAT: u8 = 2;

export const PROMPT_NONE: u8 = 0;
/** spans of text (prompt string(s), or chat roles and text parts) */
export const PROMPT_TEXT: u8 = 1;
/** token ids (or a batch of them): one span, the raw array */
export const PROMPT_TOKENS: u8 = 2;

export class ParseLimits {
  maxBodyBytes: i32 = 1 << 20;
  maxDepth: i32 = 32;
  maxPromptSpans: i32 = 1024;
  maxModelBytes: i32 = 256;
}

export class OpenAiRequest {
  error: ReqError = ReqError.None;
  /** field at fault for BadField / NoModel / TooManyParts */
  errorField: string = "";
  errorOffset: i32 = 0;
  model: string = "";
  /** byte offsets of the model string's raw bytes (between its quotes), -1 when absent */
  modelStart: i32 = -1;
  modelEnd: i32 = -1;
  promptKind: u8 = PROMPT_NONE;
  /** start, end (exclusive) byte offsets of each prompt span, flattened */
  spans: Array<i32> = [];
  /** sum of span lengths */
  promptBytes: i32 = 0;
  /** max_completion_tokens, else max_tokens; -1 when absent or null */
  maxTokens: i64 = -1;
  stream: bool = false;
  /** bytes of the `tools` / `functions` values (rendered into the prompt by the chat template) */
  toolsBytes: i32 = 0;
  /** image parts of the messages */
  images: i32 = 0;
  /** prompt tokens of the image parts (IMAGE_TOKENS / IMAGE_TOKENS_LOW each) */
  imageTokens: i64 = 0;
  /** choices generated (`n`, 1 when absent or null) */
  n: i64 = 1;

  spanCount(): i32 { return this.spans.length >> 1; }

  reset(): void {
    this.error = ReqError.None;
    this.errorField = "";
    this.errorOffset = 0;
    this.model = "";
    this.modelStart = -1;
    this.modelEnd = -1;
    this.promptKind = PROMPT_NONE;
    this.spans.length = 0;
    this.promptBytes = 0;
    this.maxTokens = -1;
    this.stream = false;
    this.toolsBytes = 0;
    this.images = 0;
    this.imageTokens = 0;
    this.n = 1;
  }

  errorName(): string {
    switch (this.error) {
      case ReqError.None: return "none";
      case ReqError.TooLarge: return "too_large";
      case ReqError.NotJson: return "not_json";
      case ReqError.TooDeep: return "too_deep";
      case ReqError.NoModel: return "no_model";
      case ReqError.BadField: return "bad_field";
      case ReqError.TooManyParts: return "too_many_parts";
      default: return "not_object";
    }
  }

  message(): string {
    switch (this.error) {
      case ReqError.None: return "";
      case ReqError.TooLarge: return "request body larger than the configured maximum";
      case ReqError.NotJson: return "request body is not JSON (at byte " + this.errorOffset.toString() + ")";
      case ReqError.TooDeep: return "request body nests deeper than the configured maximum";
      case ReqError.NoModel: return "request body has no \"model\" string";
      case ReqError.BadField: return "request field \"" + this.errorField + "\" has the wrong type";
      case ReqError.TooManyParts: return "request field \"" + this.errorField + "\" has too many parts";
      default: return "request body is not a JSON object";
    }
  }
}

const Q: u8 = 0x22; // "
const BS: u8 = 0x5c; // backslash

class Scanner {
  p: usize = 0;
  pos: i32 = 0;
  n: i32 = 0;
  failed: bool = false;
  stack: StaticArray<u8>;
  /** the last model name's bytes and string: most requests repeat a few models */
  lastModelRaw: ArrayBuffer = new ArrayBuffer(0);
  lastModel: string = "";
  /** readImageUrl's answer: the part's detail is "low" */
  lowDetail: bool = false;
  constructor(public limits: ParseLimits, public out: OpenAiRequest) {
    this.stack = new StaticArray<u8>(max(limits.maxDepth, 0) + 1);
  }

  reset(body: ArrayBuffer): void {
    // the limits object may have been changed since construction
    if (this.stack.length < this.limits.maxDepth + 1) this.stack = new StaticArray<u8>(this.limits.maxDepth + 1);
    this.p = changetype<usize>(body);
    this.n = body.byteLength;
    this.pos = 0;
    this.failed = false;
    this.out.reset();
  }

  @inline at(i: i32): u8 { return load<u8>(this.p + <usize>i); }

  fail(code: ReqError, field: string = ""): bool {
    if (!this.failed) {
      this.failed = true;
      this.out.error = code;
      this.out.errorField = field;
      this.out.errorOffset = this.pos;
    }
    return false;
  }

  @inline ws(): void {
    while (this.pos < this.n) {
      const c = this.at(this.pos);
      if (c == 0x20 || c == 0x0a || c == 0x0d || c == 0x09) this.pos++;
      else break;
    }
  }

  /** At an opening quote: skip the string, validating escapes; pos ends after the closing
   *  quote. Returns the offset of the closing quote, or -1. */
  str(): i32 {
    let i = this.pos + 1;
    const n = this.n;
    const p = this.p;
    while (true) {
      // 8 bytes at a time while none is a quote, a backslash or a control character: prompt
      // text is almost all of a body, and this is most of the scan's time
      while (i + 8 <= n) {
        const v = load<u64>(p + <usize>i);
        const q = v ^ 0x2222222222222222;
        const b = v ^ 0x5c5c5c5c5c5c5c5c;
        const t = ((q - 0x0101010101010101) & ~q) | ((b - 0x0101010101010101) & ~b) | ((v - 0x2020202020202020) & ~v);
        if ((t & 0x8080808080808080) != 0) break;
        i += 8;
      }
      if (i >= n) break;
      const c = load<u8>(p + <usize>i);
      if (c == Q) { this.pos = i + 1; return i; }
      if (c < 0x20) { this.pos = i; this.fail(ReqError.NotJson); return -1; }
      if (c == BS) {
        if (i + 1 >= n) break;
        const e = load<u8>(p + <usize>i + 1);
        if (e == 0x75) { // \uXXXX
          if (i + 6 > n) break;
          for (let k = 2; k < 6; k++) {
            if (!isHex(load<u8>(p + <usize>(i + k)))) { this.pos = i; this.fail(ReqError.NotJson); return -1; }
          }
          i += 6;
          continue;
        }
        if (e != Q && e != BS && e != 0x2f && e != 0x62 && e != 0x66 && e != 0x6e && e != 0x72 && e != 0x74) {
          this.pos = i; this.fail(ReqError.NotJson); return -1;
        }
        i += 2;
        continue;
      }
      i++;
    }
    this.pos = n;
    this.fail(ReqError.NotJson);
    return -1;
  }

  /** A number per RFC 8259; returns false on a syntax error. */
  num(): bool {
    let i = this.pos;
    const n = this.n;
    if (i < n && this.at(i) == 0x2d) i++;
    if (i >= n) { this.pos = i; return this.fail(ReqError.NotJson); }
    let c = this.at(i);
    if (c == 0x30) i++;
    else if (c >= 0x31 && c <= 0x39) { while (i < n && isDigit(this.at(i))) i++; }
    else { this.pos = i; return this.fail(ReqError.NotJson); }
    if (i < n && this.at(i) == 0x2e) {
      i++;
      if (i >= n || !isDigit(this.at(i))) { this.pos = i; return this.fail(ReqError.NotJson); }
      while (i < n && isDigit(this.at(i))) i++;
    }
    if (i < n && (this.at(i) == 0x65 || this.at(i) == 0x45)) {
      i++;
      if (i < n && (this.at(i) == 0x2b || this.at(i) == 0x2d)) i++;
      if (i >= n || !isDigit(this.at(i))) { this.pos = i; return this.fail(ReqError.NotJson); }
      while (i < n && isDigit(this.at(i))) i++;
    }
    this.pos = i;
    return true;
  }

  lit(word: string): bool {
    const len = word.length;
    if (this.n - this.pos < len) { this.pos = this.n; return this.fail(ReqError.NotJson); }
    for (let k = 0; k < len; k++) {
      if (<i32>this.at(this.pos + k) != word.charCodeAt(k)) { this.pos += k; return this.fail(ReqError.NotJson); }
    }
    this.pos += len;
    return true;
  }

  /** Skip any value at pos (after whitespace) with an explicit stack; `depth` is the depth of
   *  the container holding it. */
  skip(depth: i32): bool {
    let sp = 0;
    const stack = this.stack;
    const maxDepth = this.limits.maxDepth;
    // state: expecting a value
    while (true) {
      this.ws();
      if (this.pos >= this.n) { return this.fail(ReqError.NotJson); }
      let c = this.at(this.pos);
      if (c == 0x7b || c == 0x5b) {
        if (depth + sp + 1 > maxDepth) return this.fail(ReqError.TooDeep);
        unchecked(stack[sp++] = c);
        this.pos++;
        this.ws();
        if (this.pos < this.n && this.at(this.pos) == (c == 0x7b ? <u8>0x7d : <u8>0x5d)) {
          this.pos++;
          sp--;
        } else {
          if (c == 0x7b && !this.key()) return false;
          continue; // a value follows
        }
      } else if (c == Q) {
        if (this.str() < 0) return false;
      } else if (c == 0x2d || isDigit(c)) {
        if (!this.num()) return false;
      } else if (c == 0x74) { if (!this.lit("true")) return false; }
      else if (c == 0x66) { if (!this.lit("false")) return false; }
      else if (c == 0x6e) { if (!this.lit("null")) return false; }
      else return this.fail(ReqError.NotJson);
      // a value ended: close containers or move to the next element
      while (true) {
        if (sp == 0) return true;
        this.ws();
        if (this.pos >= this.n) return this.fail(ReqError.NotJson);
        c = this.at(this.pos);
        const open = unchecked(stack[sp - 1]);
        if (c == 0x2c) {
          this.pos++;
          if (open == 0x7b && !this.key()) return false;
          break; // next value
        }
        if ((open == 0x7b && c == 0x7d) || (open == 0x5b && c == 0x5d)) { this.pos++; sp--; continue; }
        return this.fail(ReqError.NotJson);
      }
    }
  }

  /** Inside an object, at a key: skip `"key" :`. */
  key(): bool {
    this.ws();
    if (this.pos >= this.n || this.at(this.pos) != Q) return this.fail(ReqError.NotJson);
    if (this.str() < 0) return false;
    this.ws();
    if (this.pos >= this.n || this.at(this.pos) != 0x3a) return this.fail(ReqError.NotJson);
    this.pos++;
    return true;
  }

  /** Iterate an object's members: calls back per key with pos at the value. */
  @inline peek(): i32 {
    this.ws();
    return this.pos < this.n ? <i32>this.at(this.pos) : -1;
  }

  @inline keyIs(start: i32, end: i32, word: string): bool {
    const len = word.length;
    if (end - start != len) return false;
    for (let k = 0; k < len; k++) if (<i32>this.at(start + k) != word.charCodeAt(k)) return false;
    return true;
  }

  addSpan(start: i32, end: i32, field: string): bool {
    const out = this.out;
    if (out.spans.length >= this.limits.maxPromptSpans * 2) return this.fail(ReqError.TooManyParts, field);
    out.spans.push(start);
    out.spans.push(end);
    out.promptBytes += end - start;
    return true;
  }
}

// ---- field readers (pos at the value, after whitespace)

function readModel(s: Scanner): bool {
  if (s.peek() != Q) {
    if (!s.skip(1)) return false;
    return s.fail(ReqError.NoModel, "model");
  }
  const start = s.pos + 1;
  const end = s.str();
  if (end < 0) return false;
  if (end == start || end - start > s.limits.maxModelBytes) return s.fail(ReqError.NoModel, "model");
  const len = end - start;
  s.out.modelStart = start;
  s.out.modelEnd = end;
  const raw = s.lastModelRaw;
  if (raw.byteLength == len && memory.compare(changetype<usize>(raw), s.p + <usize>start, <usize>len) == 0) {
    s.out.model = s.lastModel;
    return true;
  }
  const m = decodeJsonString(s.p, start, end);
  const copy = new ArrayBuffer(len);
  memory.copy(changetype<usize>(copy), s.p + <usize>start, <usize>len);
  s.lastModelRaw = copy;
  s.lastModel = m;
  s.out.model = m;
  return true;
}

function readInt(s: Scanner, field: string): i64 {
  // -1: absent/null; -2: error (reported)
  const c = s.peek();
  if (c == 0x6e) return s.lit("null") ? -1 : -2;
  if (c != 0x2d && !(c >= 0x30 && c <= 0x39)) {
    if (!s.skip(1)) return -2;
    s.fail(ReqError.BadField, field);
    return -2;
  }
  const start = s.pos;
  if (!s.num()) return -2;
  // an integer >= 0 of at most 9 digits (the limits of any model's context)
  const len = s.pos - start;
  let v: i64 = 0;
  let plain = len <= 9;
  for (let i = start; plain && i < s.pos; i++) {
    const d = s.at(i);
    if (!isDigit(d)) plain = false;
    else v = v * 10 + <i64>(d - 0x30);
  }
  if (plain) return v;
  // a float form (`100.0`, `1e2`, `1.5e1`): read when its value is an integer in range. JSON does
  // not tell 100 from 100.0, and clients (Python's json of a float) send the latter.
  if (len > 32) { s.fail(ReqError.BadField, field); return -2; }
  const f = parseFloat(String.UTF8.decodeUnsafe(s.p + <usize>start, <usize>len));
  if (!(f >= 0 && f <= 999999999 && Math.floor(f) == f)) { s.fail(ReqError.BadField, field); return -2; }
  return <i64>f;
}

function readStream(s: Scanner): bool {
  const c = s.peek();
  if (c == 0x74) { if (!s.lit("true")) return false; s.out.stream = true; return true; }
  if (c == 0x66) { if (!s.lit("false")) return false; s.out.stream = false; return true; }
  if (c == 0x6e) { if (!s.lit("null")) return false; s.out.stream = false; return true; }
  if (!s.skip(1)) return false;
  return s.fail(ReqError.BadField, "stream");
}

/** /v1/completions `prompt`: a string, an array of strings, or token ids (array of integers,
 *  or an array of such arrays). */
function readPrompt(s: Scanner): bool {
  const out = s.out;
  out.spans.length = 0;
  out.promptBytes = 0;
  let c = s.peek();
  if (c == Q) {
    const start = s.pos + 1;
    const end = s.str();
    if (end < 0) return false;
    out.promptKind = PROMPT_TEXT;
    return s.addSpan(start, end, "prompt");
  }
  // null: the spec's default prompt (a new document), no text
  if (c == 0x6e) { out.promptKind = PROMPT_NONE; return s.lit("null"); }
  if (c != 0x5b) {
    if (!s.skip(1)) return false;
    return s.fail(ReqError.BadField, "prompt");
  }
  const arrStart = s.pos;
  s.pos++;
  c = s.peek();
  if (c == Q) {
    out.promptKind = PROMPT_TEXT;
    while (true) {
      if (s.peek() != Q) {
        if (!s.skip(2)) return false;
        return s.fail(ReqError.BadField, "prompt");
      }
      const start = s.pos + 1;
      const end = s.str();
      if (end < 0) return false;
      if (!s.addSpan(start, end, "prompt")) return false;
      c = s.peek();
      s.pos++;
      if (c == 0x2c) continue;
      if (c == 0x5d) return true;
      s.pos--;
      return s.fail(ReqError.NotJson);
    }
  }
  // token ids: validate the array, keep its raw bytes as one span
  s.pos = arrStart;
  if (!s.skip(1)) return false;
  out.promptKind = PROMPT_TOKENS;
  return s.addSpan(arrStart, s.pos, "prompt");
}

/** A message's `content`: a string, null, or an array of parts whose `text` strings count. */
function readContent(s: Scanner): bool {
  let c = s.peek();
  if (c == Q) {
    const start = s.pos + 1;
    const end = s.str();
    if (end < 0) return false;
    return s.addSpan(start, end, "messages");
  }
  if (c == 0x6e) return s.lit("null");
  if (c != 0x5b) {
    if (!s.skip(3)) return false;
    return s.fail(ReqError.BadField, "messages.content");
  }
  s.pos++;
  if (s.peek() == 0x5d) { s.pos++; return true; }
  while (true) {
    if (s.peek() != 0x7b) {
      if (!s.skip(4)) return false;
      return s.fail(ReqError.BadField, "messages.content");
    }
    s.pos++;
    // part kind: 1 image (type image_url, or an image_url member), with its detail 2 low
    let image = false;
    let low = false;
    if (s.peek() == 0x7d) s.pos++;
    else {
      while (true) {
        if (s.peek() != Q) return s.fail(ReqError.NotJson);
        const ks = s.pos + 1;
        const ke = s.str();
        if (ke < 0) return false;
        s.ws();
        if (s.pos >= s.n || s.at(s.pos) != 0x3a) return s.fail(ReqError.NotJson);
        s.pos++;
        if (s.keyIs(ks, ke, "text") && s.peek() == Q) {
          const start = s.pos + 1;
          const end = s.str();
          if (end < 0) return false;
          if (!s.addSpan(start, end, "messages")) return false;
        } else if (s.keyIs(ks, ke, "type") && s.peek() == Q) {
          const ts = s.pos + 1;
          const te = s.str();
          if (te < 0) return false;
          if (s.keyIs(ts, te, "image_url") || s.keyIs(ts, te, "input_image") || s.keyIs(ts, te, "image")) image = true;
        } else if (s.keyIs(ks, ke, "image_url") && s.peek() == 0x7b) {
          image = true;
          if (!readImageUrl(s)) return false;
          if (s.lowDetail) low = true;
        } else if (!s.skip(5)) return false;
        c = s.peek();
        s.pos++;
        if (c == 0x2c) continue;
        if (c == 0x7d) break;
        s.pos--;
        return s.fail(ReqError.NotJson);
      }
    }
    if (image) {
      s.out.images++;
      s.out.imageTokens += low ? IMAGE_TOKENS_LOW : IMAGE_TOKENS;
    }
    c = s.peek();
    s.pos++;
    if (c == 0x2c) continue;
    if (c == 0x5d) return true;
    s.pos--;
    return s.fail(ReqError.NotJson);
  }
}

/** An `image_url` object: its `detail` is read (s.lowDetail), the rest skipped. */
function readImageUrl(s: Scanner): bool {
  s.lowDetail = false;
  s.pos++;
  if (s.peek() == 0x7d) { s.pos++; return true; }
  while (true) {
    if (s.peek() != Q) return s.fail(ReqError.NotJson);
    const ks = s.pos + 1;
    const ke = s.str();
    if (ke < 0) return false;
    s.ws();
    if (s.pos >= s.n || s.at(s.pos) != 0x3a) return s.fail(ReqError.NotJson);
    s.pos++;
    if (s.keyIs(ks, ke, "detail") && s.peek() == Q) {
      const ds = s.pos + 1;
      const de = s.str();
      if (de < 0) return false;
      s.lowDetail = s.keyIs(ds, de, "low");
    } else if (!s.skip(6)) return false;
    const c = s.peek();
    s.pos++;
    if (c == 0x2c) continue;
    if (c == 0x7d) return true;
    s.pos--;
    return s.fail(ReqError.NotJson);
  }
}

/** /v1/chat/completions `messages`: an array of objects with `role` and `content`. */
function readMessages(s: Scanner): bool {
  const out = s.out;
  out.spans.length = 0;
  out.promptBytes = 0;
  out.promptKind = PROMPT_TEXT;
  if (s.peek() != 0x5b) {
    if (!s.skip(1)) return false;
    return s.fail(ReqError.BadField, "messages");
  }
  s.pos++;
  if (s.peek() == 0x5d) { s.pos++; return true; }
  while (true) {
    if (s.peek() != 0x7b) {
      if (!s.skip(2)) return false;
      return s.fail(ReqError.BadField, "messages");
    }
    s.pos++;
    if (s.peek() == 0x7d) s.pos++;
    else {
      while (true) {
        if (s.peek() != Q) return s.fail(ReqError.NotJson);
        const ks = s.pos + 1;
        const ke = s.str();
        if (ke < 0) return false;
        s.ws();
        if (s.pos >= s.n || s.at(s.pos) != 0x3a) return s.fail(ReqError.NotJson);
        s.pos++;
        if (s.keyIs(ks, ke, "role")) {
          if (s.peek() != Q) {
            if (!s.skip(3)) return false;
            return s.fail(ReqError.BadField, "messages.role");
          }
          const start = s.pos + 1;
          const end = s.str();
          if (end < 0) return false;
          if (!s.addSpan(start, end, "messages")) return false;
        } else if (s.keyIs(ks, ke, "content")) {
          if (!readContent(s)) return false;
        } else if (!s.skip(3)) return false;
        const c = s.peek();
        s.pos++;
        if (c == 0x2c) continue;
        if (c == 0x7d) break;
        s.pos--;
        return s.fail(ReqError.NotJson);
      }
    }
    const c = s.peek();
    s.pos++;
    if (c == 0x2c) continue;
    if (c == 0x5d) return true;
    s.pos--;
    return s.fail(ReqError.NotJson);
  }
}

/**
 * A reusable parser: one per VM (or per configured service, for its limits). `parse` returns the
 * parser's own result object, valid until the next call; nothing is allocated per call beyond
 * span growth and a model name not seen last time.
 */
export class RequestParser {
  readonly out: OpenAiRequest;
  private s: Scanner;
  constructor(public limits: ParseLimits) {
    const out = new OpenAiRequest();
    this.out = out;
    this.s = new Scanner(limits, out);
  }

  /** `api` selects which prompt field counts (`prompt` for completions, `messages` for chat). */
  parse(body: ArrayBuffer, api: u8): OpenAiRequest {
    const s = this.s;
    s.reset(body);
    const out = this.out;
    if (body.byteLength > this.limits.maxBodyBytes) {
      out.error = ReqError.TooLarge;
      return out;
    }
    parseInto(s, api);
    return out;
  }
}

/** Parse with fresh objects (tests, one-off use); see RequestParser for the request path. */
export function parseOpenAiRequest(body: ArrayBuffer, api: u8, limits: ParseLimits): OpenAiRequest {
  const p = new RequestParser(limits);
  return p.parse(body, api);
}

function parseInto(s: Scanner, api: u8): void {
  const out = s.out;
  if (s.peek() != 0x7b) {
    if (s.pos >= s.n) { s.fail(ReqError.NotJson); return; }
    if (s.skip(0)) { s.ws(); if (s.pos == s.n) s.fail(ReqError.NotObject); else s.fail(ReqError.NotJson); }
    return;
  }
  s.pos++;
  let mtc: i64 = -1;
  let mt: i64 = -1;
  if (s.peek() == 0x7d) s.pos++;
  else {
    while (true) {
      if (s.peek() != Q) { s.fail(ReqError.NotJson); return; }
      const ks = s.pos + 1;
      const ke = s.str();
      if (ke < 0) return;
      s.ws();
      if (s.pos >= s.n || s.at(s.pos) != 0x3a) { s.fail(ReqError.NotJson); return; }
      s.pos++;
      s.ws();
      let ok = true;
      const len = ke - ks;
      if (len == 5 && s.keyIs(ks, ke, "model")) ok = readModel(s);
      else if (len == 6 && api == API_COMPLETIONS && s.keyIs(ks, ke, "prompt")) ok = readPrompt(s);
      else if (len == 8 && api == API_CHAT && s.keyIs(ks, ke, "messages")) ok = readMessages(s);
      else if (len == 10 && s.keyIs(ks, ke, "max_tokens")) { mt = readInt(s, "max_tokens"); ok = mt != -2; }
      else if (len == 21 && s.keyIs(ks, ke, "max_completion_tokens")) { mtc = readInt(s, "max_completion_tokens"); ok = mtc != -2; }
      else if (len == 6 && s.keyIs(ks, ke, "stream")) ok = readStream(s);
      else if (len == 1 && s.keyIs(ks, ke, "n")) {
        const n = readInt(s, "n");
        ok = n != -2;
        if (ok && n >= 0) {
          if (n < 1 || n > MAX_N) { s.fail(ReqError.BadField, "n"); return; }
          out.n = n;
        }
      } else if (api == API_CHAT && ((len == 5 && s.keyIs(ks, ke, "tools")) || (len == 9 && s.keyIs(ks, ke, "functions")))) {
        // the template renders the tool definitions into the prompt: their bytes count
        const vs = s.pos;
        ok = s.skip(1);
        if (ok && s.at(vs) != 0x6e) out.toolsBytes += s.pos - vs;
      }
      else ok = s.skip(1);
      if (!ok) return; // the first error found is the one reported
      const c = s.peek();
      s.pos++;
      if (c == 0x2c) continue;
      if (c == 0x7d) break;
      s.pos--;
      s.fail(ReqError.NotJson);
      return;
    }
  }
  s.ws();
  if (s.pos != s.n) { s.fail(ReqError.NotJson); return; }
  if (out.model.length == 0) { s.fail(ReqError.NoModel, "model"); return; }
  out.maxTokens = mtc >= 0 ? mtc : mt;
  return;
}

@inline function isDigit(c: u8): bool { return c >= 0x30 && c <= 0x39; }
@inline function isHex(c: u8): bool { return (c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46); }

function hexv(c: u8): u32 { return c <= 0x39 ? <u32>(c - 0x30) : c <= 0x46 ? <u32>(c - 0x41 + 10) : <u32>(c - 0x61 + 10); }

/** Decode the (already validated) JSON string bytes [start, end) to a string. */
function decodeJsonString(p: usize, start: i32, end: i32): string {
  let hasEscape = false;
  for (let i = start; i < end; i++) if (load<u8>(p + <usize>i) == BS) { hasEscape = true; break; }
  if (!hasEscape) return String.UTF8.decodeUnsafe(p + <usize>start, <usize>(end - start));
  let out = "";
  let run = start;
  let i = start;
  while (i < end) {
    if (load<u8>(p + <usize>i) != BS) { i++; continue; }
    out += String.UTF8.decodeUnsafe(p + <usize>run, <usize>(i - run));
    const e = load<u8>(p + <usize>i + 1);
    if (e == 0x75) {
      const u = (hexv(load<u8>(p + <usize>i + 2)) << 12) | (hexv(load<u8>(p + <usize>i + 3)) << 8) | (hexv(load<u8>(p + <usize>i + 4)) << 4) | hexv(load<u8>(p + <usize>i + 5));
      out += String.fromCharCode(<i32>u);
      i += 6;
    } else {
      out += e == 0x6e ? "\n" : e == 0x74 ? "\t" : e == 0x72 ? "\r" : e == 0x62 ? "\b" : e == 0x66 ? "\f" : String.fromCharCode(<i32>e);
      i += 2;
    }
    run = i;
  }
  out += String.UTF8.decodeUnsafe(p + <usize>run, <usize>(end - run));
  return out;
}

/**
 * Prompt tokens of a parsed request: text spans and tool definitions at `bytesPerToken`, plus the
 * image parts' tokens (IMAGE_TOKENS). What the size-aware cost prices prefill by.
 */
export function promptTokenEstimate(r: OpenAiRequest, bytesPerToken: f64): f64 {
  return <f64>(r.promptBytes + r.toolsBytes) / bytesPerToken + <f64>r.imageTokens;
}

/** Output tokens: the stated budget (else `defaultMaxTokens`) for each of the `n` choices. */
export function outTokenEstimate(r: OpenAiRequest, defaultMaxTokens: i32): f64 {
  return <f64>(r.maxTokens >= 0 ? r.maxTokens : <i64>defaultMaxTokens) * <f64>r.n;
}
