import { parseOpenAiRequest, RequestParser, ParseLimits, ReqError, API_CHAT, API_COMPLETIONS, PROMPT_NONE, PROMPT_TEXT, PROMPT_TOKENS, OpenAiRequest, promptTokenEstimate, outTokenEstimate, IMAGE_TOKENS, IMAGE_TOKENS_LOW } from "../assembly/lib/request/openai";

function parse(body: string, api: u8 = API_COMPLETIONS, limits: ParseLimits = new ParseLimits()): OpenAiRequest {
  return parseOpenAiRequest(String.UTF8.encode(body), api, limits);
}

/** The prompt spans' bytes, joined with "|". */
function spans(body: string, r: OpenAiRequest): string {
  const b = String.UTF8.encode(body);
  let out = "";
  for (let i = 0; i < r.spanCount(); i++) {
    if (i > 0) out += "|";
    out += String.UTF8.decodeUnsafe(changetype<usize>(b) + <usize>r.spans[2 * i], <usize>(r.spans[2 * i + 1] - r.spans[2 * i]));
  }
  return out;
}

describe("parseOpenAiRequest: completions", () => {
  it("extracts model, a string prompt as a span, max_tokens and stream, skipping other fields", () => {
    const body = '{"temperature":0.5,"model":"llama-3-8b","logit_bias":{"1":[2,{"x":null}]},"prompt":"Hello \\"you\\"","max_tokens":128,"stream":true,"stop":["a"]}';
    const r = parse(body);
    expect(r.error).toBe(ReqError.None);
    expect(r.model).toBe("llama-3-8b");
    expect(r.promptKind).toBe(PROMPT_TEXT);
    expect(spans(body, r)).toBe('Hello \\"you\\"');
    expect(r.promptBytes).toBe(13);
    expect(r.maxTokens).toBe(128);
    expect(r.stream).toBe(true);
  });

  it("accepts an array of strings and token ids; max_tokens absent or null is -1", () => {
    const a = '{"model":"m","prompt":["ab","cd"]}';
    const r = parse(a);
    expect(r.error).toBe(ReqError.None);
    expect(spans(a, r)).toBe("ab|cd");
    expect(r.maxTokens).toBe(-1);
    const t = '{"model":"m","prompt":[1, 2, 3],"max_tokens":null}';
    const rt = parse(t);
    expect(rt.error).toBe(ReqError.None);
    expect(rt.promptKind).toBe(PROMPT_TOKENS);
    expect(spans(t, rt)).toBe("[1, 2, 3]");
    expect(rt.maxTokens).toBe(-1);
    expect(parse('{"model":"m","prompt":[[1,2],[3]]}').promptKind).toBe(PROMPT_TOKENS);
  });

  it("max_completion_tokens wins over max_tokens; decodes escapes in model", () => {
    const r = parse('{"model":"a\\u0062c\\n","prompt":"x","max_tokens":5,"max_completion_tokens":7}');
    expect(r.error).toBe(ReqError.None);
    expect(r.model).toBe("abc\n");
    expect(r.maxTokens).toBe(7);
  });

  it("ignores messages on the completions API", () => {
    const r = parse('{"model":"m","messages":[{"role":"user","content":"x"}]}');
    expect(r.error).toBe(ReqError.None);
    expect(r.spanCount()).toBe(0);
  });
});

describe("parseOpenAiRequest: chat", () => {
  it("takes role and text spans of each message in order, content as string or parts", () => {
    const body = '{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","name":"u","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"there"}]},{"role":"assistant","content":null}],"stream":false}';
    const r = parse(body, API_CHAT);
    expect(r.error).toBe(ReqError.None);
    expect(spans(body, r)).toBe("system|be brief|user|hi|there|assistant");
    expect(r.stream).toBe(false);
  });

  it("ignores prompt on the chat API", () => {
    const r = parse('{"model":"m","prompt":"x","messages":[]}', API_CHAT);
    expect(r.error).toBe(ReqError.None);
    expect(r.spanCount()).toBe(0);
  });
});

describe("parseOpenAiRequest: errors, each with its own code", () => {
  it("too large: above the configured maximum, before reading", () => {
    const l = new ParseLimits();
    l.maxBodyBytes = 16;
    expect(parse('{"model":"m","prompt":"0123456789"}', API_COMPLETIONS, l).error).toBe(ReqError.TooLarge);
    expect(parse('{"model":"m"}', API_COMPLETIONS, l).error).toBe(ReqError.None);
  });

  it("not JSON: syntax errors anywhere, trailing bytes, empty body, bad escapes, raw control characters", () => {
    expect(parse("").error).toBe(ReqError.NotJson);
    expect(parse("model=m").error).toBe(ReqError.NotJson);
    expect(parse('{"model":"m",}').error).toBe(ReqError.NotJson);
    expect(parse('{"model":"m"} x').error).toBe(ReqError.NotJson);
    expect(parse('{"model":"m","x":[1,2}').error).toBe(ReqError.NotJson);
    expect(parse('{"model":"m","x":{"a" 1}}').error).toBe(ReqError.NotJson);
    expect(parse('{"model":"m","prompt":"a\\qb"}').error).toBe(ReqError.NotJson);
    expect(parse('{"model":"m","prompt":"a\nb"}').error).toBe(ReqError.NotJson);
    expect(parse('{"model":"m","x":01}').error).toBe(ReqError.NotJson);
    expect(parse('{"model":"m","x":tru}').error).toBe(ReqError.NotJson);
    expect(parse('{"model":"m","prompt":"abc').error).toBe(ReqError.NotJson);
    const r = parse('{"model":"m",}');
    expect(r.errorOffset).toBe(13);
  });

  it("not an object: valid JSON of another type", () => {
    expect(parse("[1,2]").error).toBe(ReqError.NotObject);
    expect(parse(' "x" ').error).toBe(ReqError.NotObject);
  });

  it("no model: missing, empty, not a string, too long", () => {
    expect(parse('{"prompt":"x"}').error).toBe(ReqError.NoModel);
    expect(parse('{"model":"","prompt":"x"}').error).toBe(ReqError.NoModel);
    expect(parse('{"model":7,"prompt":"x"}').error).toBe(ReqError.NoModel);
    const l = new ParseLimits();
    l.maxModelBytes = 4;
    expect(parse('{"model":"abcde"}', API_COMPLETIONS, l).error).toBe(ReqError.NoModel);
    expect(parse('{"prompt":"x"}').errorField).toBe("model");
  });

  it("bad field: names the field", () => {
    const a = parse('{"model":"m","max_tokens":1.5}');
    expect(a.error).toBe(ReqError.BadField);
    expect(a.errorField).toBe("max_tokens");
    expect(parse('{"model":"m","max_completion_tokens":-1}').errorField).toBe("max_completion_tokens");
    expect(parse('{"model":"m","max_tokens":"9"}').errorField).toBe("max_tokens");
    expect(parse('{"model":"m","max_tokens":12345678901}').errorField).toBe("max_tokens");
    expect(parse('{"model":"m","stream":"yes"}').errorField).toBe("stream");
    expect(parse('{"model":"m","prompt":{"a":1}}').errorField).toBe("prompt");
    expect(parse('{"model":"m","prompt":["a",1]}').errorField).toBe("prompt");
    expect(parse('{"model":"m","messages":"x"}', API_CHAT).errorField).toBe("messages");
    expect(parse('{"model":"m","messages":[{"role":1}]}', API_CHAT).errorField).toBe("messages.role");
    expect(parse('{"model":"m","messages":[{"role":"u","content":5}]}', API_CHAT).errorField).toBe("messages.content");
    expect(a.message()).toBe('request field "max_tokens" has the wrong type');
  });

  it("too deep: nesting beyond the limit is an error, not a trap, at any size", () => {
    let deep = '{"model":"m","x":';
    for (let i = 0; i < 100000; i++) deep += "[";
    const r = parse(deep);
    expect(r.error).toBe(ReqError.TooDeep);
    let ok = '{"model":"m","x":';
    for (let i = 0; i < 30; i++) ok += "[";
    for (let i = 0; i < 30; i++) ok += "]";
    expect(parse(ok + "}").error).toBe(ReqError.None);
  });

  it("too many parts: prompt spans are bounded", () => {
    const l = new ParseLimits();
    l.maxPromptSpans = 3;
    const r = parse('{"model":"m","prompt":["a","b","c","d"]}', API_COMPLETIONS, l);
    expect(r.error).toBe(ReqError.TooManyParts);
    expect(r.errorField).toBe("prompt");
    expect(parse('{"model":"m","prompt":["a","b","c"]}', API_COMPLETIONS, l).error).toBe(ReqError.None);
  });
});

describe("RequestParser", () => {
  it("reuses its result: each parse starts from a clean state; the model cache returns the right name", () => {
    const p = new RequestParser(new ParseLimits());
    const a = p.parse(String.UTF8.encode('{"model":"m1","prompt":["a","b"],"max_tokens":3,"stream":true}'), API_COMPLETIONS);
    expect(a.error).toBe(ReqError.None);
    expect(a.spanCount()).toBe(2);
    const b = p.parse(String.UTF8.encode('{"model":"m2","prompt":"c"}'), API_COMPLETIONS);
    expect(b.model).toBe("m2");
    expect(b.spanCount()).toBe(1);
    expect(b.maxTokens).toBe(-1);
    expect(b.stream).toBe(false);
    expect(p.parse(String.UTF8.encode('{"model":"m2","prompt":"c"}'), API_COMPLETIONS).model).toBe("m2");
    expect(p.parse(String.UTF8.encode('{"model":"m3"}'), API_COMPLETIONS).model).toBe("m3");
    const bad = p.parse(String.UTF8.encode('{"prompt":"x"}'), API_COMPLETIONS);
    expect(bad.error).toBe(ReqError.NoModel);
    expect(p.parse(String.UTF8.encode('{"model":"m1","prompt":"x"}'), API_COMPLETIONS).error).toBe(ReqError.None);
  });

  it("follows a limits change made after construction (deeper stack)", () => {
    const l = new ParseLimits();
    l.maxDepth = 2;
    const p = new RequestParser(l);
    expect(p.parse(String.UTF8.encode('{"model":"m","x":[[1]]}'), API_COMPLETIONS).error).toBe(ReqError.TooDeep);
    l.maxDepth = 40;
    let ok = '{"model":"m","x":';
    for (let i = 0; i < 38; i++) ok += "[";
    for (let i = 0; i < 38; i++) ok += "]";
    expect(p.parse(String.UTF8.encode(ok + "}"), API_COMPLETIONS).error).toBe(ReqError.None);
  });
});

describe("OpenAI body: JSON numbers and truncation", () => {
  it("refuses a number with a dot or an exponent not followed by a digit, accepts the complete forms", () => {
    const bad = ['{"model":"m","max_tokens":1.}', '{"model":"m","max_tokens":1.x}', '{"model":"m","max_tokens":1e}', '{"model":"m","max_tokens":1e+}'];
    for (let i = 0; i < bad.length; i++) if (parse(bad[i]).error != ReqError.NotJson) throw new Error("accepted " + bad[i]);
    expect(parse('{"model":"m","temperature":1.5e+2,"top_p":0.25E-1}').error).toBe(ReqError.None);
  });
  it("a body cut after \"stream\": is not JSON (not a wrong type)", () => {
    expect(parse('{"model":"m","stream":').error).toBe(ReqError.NotJson);
    expect(parse('{"model":"m","stream":1}').error).toBe(ReqError.BadField);
  });
});

describe("OpenAI body: the size estimate (tools, images, n, null prompt, integral floats)", () => {
  it("prompt: null is a prompt of no text, read (not a wrong type)", () => {
    const r = parse('{"model":"m","prompt":null,"max_tokens":7}');
    expect(r.error).toBe(ReqError.None);
    expect(r.promptKind).toBe(PROMPT_NONE);
    expect(r.promptBytes).toBe(0);
    expect(r.maxTokens).toBe(7);
  });
  it("integral floats are read: 100.0, 1e2, 1.5e1; a fraction or a negative is still a wrong type", () => {
    expect(parse('{"model":"m","max_tokens":100.0}').maxTokens).toBe(100);
    expect(parse('{"model":"m","max_tokens":1e2}').maxTokens).toBe(100);
    expect(parse('{"model":"m","max_completion_tokens":1.5e1}').maxTokens).toBe(15);
    expect(parse('{"model":"m","max_tokens":0.0}').maxTokens).toBe(0);
    expect(parse('{"model":"m","max_tokens":100.5}').errorField).toBe("max_tokens");
    expect(parse('{"model":"m","max_tokens":-1.0}').errorField).toBe("max_tokens");
    expect(parse('{"model":"m","max_tokens":1e10}').errorField).toBe("max_tokens");
    expect(parse('{"model":"m","n":2.0}').n).toBe(2);
  });
  it("n multiplies the decode budget; absent or null is 1; 0 or above 128 is a wrong type", () => {
    const r = parse('{"model":"m","prompt":"abcd","max_tokens":10,"n":3}');
    expect(r.n).toBe(3);
    expect(outTokenEstimate(r, 256)).toBe(30.0);
    expect(outTokenEstimate(parse('{"model":"m","n":2}'), 256)).toBe(512.0);
    expect(parse('{"model":"m","n":null}').n).toBe(1);
    expect(outTokenEstimate(parse('{"model":"m","max_tokens":10}'), 256)).toBe(10.0);
    expect(parse('{"model":"m","n":0}').errorField).toBe("n");
    expect(parse('{"model":"m","n":129}').errorField).toBe("n");
    expect(parse('{"model":"m","n":"2"}').errorField).toBe("n");
  });
  it("tools count as prompt bytes in chat (the template renders them), not as hashed spans", () => {
    const tools = '[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]';
    const body = '{"model":"m","tools":' + tools + ',"messages":[{"role":"user","content":"hi"}]}';
    const r = parse(body, API_CHAT);
    expect(r.error).toBe(ReqError.None);
    expect(r.toolsBytes).toBe(tools.length);
    expect(spans(body, r)).toBe("user|hi");
    expect(promptTokenEstimate(r, 4)).toBe(<f64>(6 + tools.length) / 4);
    // functions (deprecated) too; null tools count nothing; completions has no template
    expect(parse('{"model":"m","functions":[{"name":"f"}],"messages":[]}', API_CHAT).toolsBytes).toBe(14);
    expect(parse('{"model":"m","tools":null,"messages":[]}', API_CHAT).toolsBytes).toBe(0);
    expect(parse('{"model":"m","tools":[{"a":1}],"prompt":"x"}').toolsBytes).toBe(0);
  });
  it("image parts count IMAGE_TOKENS each (IMAGE_TOKENS_LOW for detail low); their URL bytes are not text", () => {
    const body = '{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"what is this"},' +
      '{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA","detail":"high"}},' +
      '{"type":"image_url","image_url":{"detail":"low","url":"https://x/y.png"}},{"type":"image_url","image_url":"https://x/z.png"}]}]}';
    const r = parse(body, API_CHAT);
    expect(r.error).toBe(ReqError.None);
    expect(r.images).toBe(3);
    expect(r.imageTokens).toBe(IMAGE_TOKENS * 2 + IMAGE_TOKENS_LOW);
    expect(spans(body, r)).toBe("user|what is this");
    expect(promptTokenEstimate(r, 4)).toBe(<f64>(4 + 12) / 4 + <f64>(IMAGE_TOKENS * 2 + IMAGE_TOKENS_LOW));
    expect(IMAGE_TOKENS).toBe(765);
    expect(IMAGE_TOKENS_LOW).toBe(85);
    // a text-only chat: no image tokens, the estimate is the bytes alone
    const t = parse('{"model":"m","messages":[{"role":"user","content":"abcd"}]}', API_CHAT);
    expect(promptTokenEstimate(t, 4)).toBe(2.0);
  });
});
