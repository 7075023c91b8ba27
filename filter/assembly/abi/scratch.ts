// The VM's allocator for the host (the `malloc` export; proxy-wasm-cpp-host calls it for every
// value it hands to the VM), with one scratch area for the request path's header reads: a value
// read only to be looked at (:status, a known :authority) then costs no garbage-collected object.
// Everything else gets a pinned ArrayBuffer, as the SDK's malloc gives (adopted by take()).

/** Values up to this size fit the scratch area (a longer one gets an ArrayBuffer as usual). */
export const SCRATCH_BYTES: i32 = 2048;
export const SCRATCH: usize = memory.data(SCRATCH_BYTES, 16);
let armed = false;

/** The next allocation of at most SCRATCH_BYTES (and only the next) lands in SCRATCH. */
export function armScratch(): void { armed = true; }
export function disarmScratch(): void { armed = false; }

export function malloc(size: i32): usize {
  if (armed) {
    armed = false;
    if (size >= 0 && size <= SCRATCH_BYTES) return SCRATCH;
  }
  return __pin(changetype<usize>(new ArrayBuffer(size)));
}
