// Per-slot reads and writes of a managed Array's elements through its data pointer, for the
// per-answer work on InbandTable's state (lib/inband.ts, lib/inband-load.ts). `a[s]` compiles to a
// call of the array's bounds-checked getter or setter, which stores the array to the GC's shadow
// stack and checks for its overflow on every access (~100 such calls per answer, most of the
// answer's cost in the filter); these compile to one load or store. The caller guarantees
// 0 <= s < a.length: a slot the table is synced to (InbandTable.checkSlot at the entry points).
@inline export function getF(a: Array<f64>, s: i32): f64 { return load<f64>(a.dataStart + (<usize>s << 3)); }
@inline export function setF(a: Array<f64>, s: i32, v: f64): void { store<f64>(a.dataStart + (<usize>s << 3), v); }
@inline export function getI(a: Array<i32>, s: i32): i32 { return load<i32>(a.dataStart + (<usize>s << 2)); }
@inline export function setI(a: Array<i32>, s: i32, v: i32): void { store<i32>(a.dataStart + (<usize>s << 2), v); }
@inline export function getB(a: Array<bool>, s: i32): bool { return load<u8>(a.dataStart + <usize>s) != 0; }
@inline export function setB(a: Array<bool>, s: i32, v: bool): void { store<u8>(a.dataStart + <usize>s, v ? 1 : 0); }
@inline export function getU(a: Array<u32>, s: i32): u32 { return load<u32>(a.dataStart + (<usize>s << 2)); }
/** An element of an array of references (never null here: the table pushes one per slot). */
@inline export function getRef<T>(a: Array<T>, s: i32): T { return changetype<T>(load<usize>(a.dataStart + (<usize>s << alignof<usize>()))); }
