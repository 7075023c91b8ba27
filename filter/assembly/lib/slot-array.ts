// Per-slot reads and writes of a managed Array's elements through its data pointer (`a.dataStart`),
// for the per-answer work on InbandTable's state (lib/inband.ts, lib/inband-load.ts) and the
// request path's in-flight counts (lib/inflight.ts). `a[s]` compiles to a call of the array's
// bounds-checked getter or setter (`unchecked(a[s])` to a call of the unchecked one), which stores
// the array to the GC's shadow stack and checks for its overflow on every access (~100 such calls
// per answer, most of the answer's cost in the filter); these compile to one load or store. They take the pointer,
// not the array: an inlined managed parameter is a managed local, stored to the shadow stack too.
// The caller guarantees 0 <= s < a.length: a slot the table is synced to (InbandTable.checkSlot at
// its entry points), a slot a stream holds (Inflight).
@inline export function getF(p: usize, s: i32): f64 { return load<f64>(p + (<usize>s << 3)); }
@inline export function setF(p: usize, s: i32, v: f64): void { store<f64>(p + (<usize>s << 3), v); }
@inline export function getI(p: usize, s: i32): i32 { return load<i32>(p + (<usize>s << 2)); }
@inline export function setI(p: usize, s: i32, v: i32): void { store<i32>(p + (<usize>s << 2), v); }
@inline export function getB(p: usize, s: i32): bool { return load<u8>(p + <usize>s) != 0; }
@inline export function setB(p: usize, s: i32, v: bool): void { store<u8>(p + <usize>s, v ? 1 : 0); }
@inline export function getU(p: usize, s: i32): u32 { return load<u32>(p + (<usize>s << 2)); }
/** An element of an array of references (never null here: the table pushes one per slot). */
@inline export function getRef<T>(p: usize, s: i32): T { return changetype<T>(load<usize>(p + (<usize>s << alignof<usize>()))); }
