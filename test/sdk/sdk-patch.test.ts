// The SDK fixes carried in patches/@solo-io+proxy-runtime+0.1.8.patch are each needed:
// reverting one of them (in a scratch copy of the patched SDK) breaks the build or the behaviour.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

const root = path.resolve(__dirname, "../..");
const sdk = path.join(root, "node_modules/@solo-io/proxy-runtime");
const asc = path.join(root, "node_modules/.bin/asc");

/** A scratch project whose SDK copy has `edit` applied to one file; returns compile output. */
function compileWith(file: string, edit: (src: string) => string, entry: string): { ok: boolean; output: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sdk-patch-"));
  try {
    const copy = path.join(dir, "node_modules/@solo-io/proxy-runtime");
    fs.mkdirSync(path.dirname(copy), { recursive: true });
    fs.cpSync(sdk, copy, { recursive: true });
    fs.symlinkSync(path.join(root, "node_modules/assemblyscript"), path.join(dir, "node_modules/assemblyscript"));
    const target = path.join(copy, "assembly", file);
    const before = fs.readFileSync(target, "utf8");
    const after = edit(before);
    assert.notEqual(after, before, `the edit to ${file} must change it (is the patch still applied?)`);
    fs.writeFileSync(target, after);
    fs.writeFileSync(path.join(dir, "entry.ts"), entry);
    try {
      const output = execFileSync(asc, ["entry.ts", "-o", "out.wasm", "--runtime", "incremental", "--use", "abort=abort_proc_exit"],
        { cwd: dir, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
      return { ok: true, output };
    } catch (e: any) {
      return { ok: false, output: String(e.stdout) + String(e.stderr) };
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const PLAIN_ENTRY = `
export * from "@solo-io/proxy-runtime/assembly/proxy";
import { RootContext, Context, registerRootContext } from "@solo-io/proxy-runtime/assembly";
class R extends RootContext { createContext(id: u32): Context { return new Context(id, this); } }
registerRootContext((id: u32): RootContext => new R(id), "x");
`;

const HTTP_CALL_ENTRY = `
export * from "@solo-io/proxy-runtime/assembly/proxy";
import { RootContext, Context, BaseContext, registerRootContext } from "@solo-io/proxy-runtime/assembly";
function cb(origin: BaseContext, headers: u32, body: usize, trailers: u32): void {}
class R extends RootContext {
  createContext(id: u32): Context { return new Context(id, this); }
  onTick(): void { this.httpCall("c", [], new ArrayBuffer(0), [], 10, this, cb); }
}
registerRootContext((id: u32): RootContext => new R(id), "x");
`;

test("the patched SDK builds with AssemblyScript 0.27", () => {
  const r = compileWith("malloc.ts", (s) => s + "\n// unchanged\n", PLAIN_ENTRY);
  assert.equal(r.ok, true, r.output);
  const h = compileWith("runtime.ts", (s) => s + "\n// unchanged\n", HTTP_CALL_ENTRY);
  assert.equal(h.ok, true, h.output);
});

test("fix 1: malloc/free on __pin/__unpin (rt/index-full is gone in 0.27)", () => {
  const r = compileWith("malloc.ts", () => `import { __retain, __release } from "rt/index-full";
export function malloc(size: i32): usize { return __retain(changetype<usize>(new ArrayBuffer(size))); }
export function free(ptr: usize): void { __release(ptr); }
`, PLAIN_ENTRY);
  assert.equal(r.ok, false);
  assert.match(r.output, /rt\/index-full/);
});

test("fix 2: proc_exit declared as a wasi_snapshot_preview1 import", () => {
  const r = compileWith("runtime.ts", (s) => s.replace(/\/\/ Patched: AssemblyScript >= 0\.20 has no bindings\/wasi_unstable[\s\S]*?declare function proc_exit\(code: u32\): void;/,
    'import { proc_exit } from "bindings/wasi_unstable";'), PLAIN_ENTRY);
  assert.equal(r.ok, false);
  assert.match(r.output, /wasi_unstable/);
});

test("fix 3: RootContext.httpCall accepts the BaseContext callback it stores", () => {
  const r = compileWith("runtime.ts", (s) => s.replace(
    "cb: (origin_context: BaseContext, headers: u32, body_size: usize, trailers: u32) => void): WasmResultValues {",
    "cb: (origin_context: Context, headers: u32, body_size: usize, trailers: u32) => void): WasmResultValues {"), HTTP_CALL_ENTRY);
  assert.equal(r.ok, false);
  assert.match(r.output, /TS2322|not assignable/);
});
