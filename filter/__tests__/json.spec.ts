import { parseJson, JKind } from "../assembly/lib/json";

describe("parseJson", () => {
  it("parses nested objects, arrays, strings with escapes and numbers", () => {
    const r = parseJson('{"a": {"b": [1, -2.5e2, "x\\u0041\\n"]}, "c": true, "d": null}');
    expect(r.error).toBe("");
    const v = r.value!;
    expect(v.kind).toBe(JKind.Obj);
    const b = v.get("a")!.get("b")!;
    expect(b.items.length).toBe(3);
    expect(b.items[0].n).toBe(1.0);
    expect(b.items[1].n).toBe(-250.0);
    expect(b.items[2].s).toBe("xA\n");
    expect(v.get("c")!.b).toBe(true);
    expect(v.get("d")!.kind).toBe(JKind.Null);
  });

  it("skips exactly the JSON whitespace: space, tab, line feed, carriage return", () => {
    const r = parseJson(' \t\r\n{ \t\r\n"a" \t\r\n: \t\r\n[ 1 \t\r\n, 2 ] \t\r\n} \t\r\n');
    expect(r.error).toBe("");
    expect(r.value!.get("a")!.items.length).toBe(2);
    expect(parseJson('{"a":\f1}').error).toBe("unexpected character '\f' at offset 5");
  });

  it("reports errors with an offset instead of aborting", () => {
    expect(parseJson('{"a": }').error).toBe("unexpected character '}' at offset 6");
    expect(parseJson('{"a": 1,}').error).toBe("expected a string key at offset 8");
    expect(parseJson('[1, 2').error).toBe("unexpected end of input in array at offset 5");
    expect(parseJson('{"a": 1} x').error).toBe("trailing characters at offset 9");
    expect(parseJson('{"a": 1, "a": 2}').error).toBe("duplicate key \"a\" at offset 12");
    expect(parseJson('"abc').error).toBe("unterminated string at offset 4");
    expect(parseJson('01').error).toBe("trailing characters at offset 1");
    expect(parseJson('1.').error).toBe("bad number at offset 2");
    expect(parseJson('{"a": "\\x"}').error).toBe("bad escape at offset 8");
    expect(parseJson('').error).toBe("unexpected end of input at offset 0");
    expect(parseJson('nul').error).toBe("unexpected character 'n' at offset 0");
    // a \u escape whose four digits end the input is read whole: the string is then unterminated
    expect(parseJson('"\\u0041').error).toBe("unterminated string at offset 7");
    expect(parseJson('"\\u004').error).toBe("bad \\u escape at offset 3");
  });

  it("bounds nesting depth", () => {
    let deep = "";
    for (let i = 0; i < 100; i++) deep += "[";
    expect(parseJson(deep).error).toBe("nesting deeper than 64 at offset 65");
  });

  it("is linear: 80,000 keys and 100,000 escapes parse quickly, a late duplicate is found", () => {
    const parts = new Array<string>();
    for (let i = 0; i < 80000; i++) parts.push('"k' + i.toString() + '":' + i.toString());
    const obj = "{" + parts.join(",") + "}";
    const r = parseJson(obj);
    expect(r.error).toBe("");
    expect(r.value!.get("k79999")!.n).toBe(79999.0);
    expect(r.value!.get("nope")).toBeNull();
    expect(parseJson("{" + parts.join(",") + ',"k5":1}').error.startsWith("duplicate key \"k5\"")).toBe(true);
    const esc = '"' + "\\n".repeat(100000) + '"';
    const s = parseJson(esc);
    expect(s.value!.s.length).toBe(100000);
  });
});
