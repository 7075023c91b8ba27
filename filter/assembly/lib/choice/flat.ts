// Raw reads and writes into the plan's flat arrays (StaticArray data starts at the object's
// address). The per-candidate loops use these on pointers held in locals instead of indexing the
// arrays: a managed reference used in a loop is spilled to the GC's shadow stack on every use,
// which roughly doubled the cost of a full scan at 256 instances (bench/request-cost.ts).
@inline export function ptr<T>(a: StaticArray<T>): usize { return changetype<usize>(a); }
@inline export function f64At(p: usize, i: i32): f64 { return load<f64>(p + (<usize>i << 3)); }
@inline export function setF64At(p: usize, i: i32, v: f64): void { store<f64>(p + (<usize>i << 3), v); }
@inline export function i32At(p: usize, i: i32): i32 { return load<i32>(p + (<usize>i << 2)); }
