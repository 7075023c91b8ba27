// Access to the golden snapshot fixtures (test/fixtures/snapshot/manifest.json), provided by
// as-pect.config.mjs through the "fixtures" imports.
@external("fixtures", "count") declare function fixtureCount(): i32;
@external("fixtures", "size") declare function fixtureSize(i: i32): i32;
@external("fixtures", "read") declare function fixtureRead(i: i32, dst: usize): void;
@external("fixtures", "textLength") declare function fixtureTextLength(kind: i32, i: i32): i32;
@external("fixtures", "text") declare function fixtureText(kind: i32, i: i32, dst: usize): void;

export class Fixture {
  constructor(public file: string, public expectReject: bool, public error: string, public bytes: ArrayBuffer) {}
}

function text(kind: i32, i: i32): string {
  const buf = new ArrayBuffer(fixtureTextLength(kind, i));
  if (buf.byteLength > 0) fixtureText(kind, i, changetype<usize>(buf));
  return String.UTF8.decode(buf);
}

export function loadFixtures(): Array<Fixture> {
  const out = new Array<Fixture>();
  const n = fixtureCount();
  for (let i = 0; i < n; i++) {
    const bytes = new ArrayBuffer(fixtureSize(i));
    if (bytes.byteLength > 0) fixtureRead(i, changetype<usize>(bytes));
    out.push(new Fixture(text(0, i), text(1, i) == "reject", text(2, i), bytes));
  }
  return out;
}

export function fixture(file: string): ArrayBuffer {
  const all = loadFixtures();
  for (let i = 0; i < all.length; i++) if (all[i].file == file) return all[i].bytes;
  throw new Error("no fixture " + file);
}
