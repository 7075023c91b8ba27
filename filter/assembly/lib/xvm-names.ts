// The names of the cross-VM gauges (lib/xvm.ts) come from a small pool shared by the VMs, so that
// the set of gauge names is bounded by the VMs alive at once, not by the VMs ever started. A VM's
// token (root.ts allocateVmToken) is new at every VM start: a VM that Envoy reloads after a failure
// (PluginConfig failure_policy FAIL_RELOAD) or that a new plugin configuration replaces would
// otherwise define a new gauge per slot each time, and Envoy keeps a stat while its scope lives.
// The pool is one shared-data document (`switchyard.xvm.names.v1`): per name, from 1 up, the token
// of the VM that holds it (u32) and when it last said so (u64 ms). A VM keeps its name by renewing
// it on every tick; a name not renewed within maxAgeMs (the gauge map's section expiry) is free,
// and the lowest free name goes to the next VM that asks. Its new holder writes each gauge before
// it lists it (lib/xvm.ts encodeOwn), so what the previous holder left in them is never read.
// A VM that stalled past maxAgeMs and finds its name taken claims another on its next tick (and
// defines its gauges anew); until then, at most one tick, both write the same name's gauges.

export const XVM_NAME_RECORD_BYTES: i32 = 12;

/** The result of one claim: the name held (0: none, the document could not be read) and the document to write. */
export class NameClaim {
  name: u32 = 0;
  doc: ArrayBuffer = new ArrayBuffer(0);
}

/**
 * `token`'s name in the pool document `doc` at `nowMs`: the one it holds if that is still its
 * own, else the lowest name free (never held, or not renewed within `maxAgeMs`), else a new one at
 * the end. A document whose length is not a whole number of records is read as empty (every name
 * free: the next writes rebuild it). The pool has at most as many names as VMs renewed within
 * maxAgeMs of each other, plus one.
 */
export function claimName(doc: ArrayBuffer, token: u32, nowMs: u64, maxAgeMs: u64, out: NameClaim): NameClaim {
  let n = doc.byteLength / XVM_NAME_RECORD_BYTES;
  if (doc.byteLength % XVM_NAME_RECORD_BYTES != 0) n = 0;
  const p = changetype<usize>(doc);
  let mine = -1, free = -1;
  for (let i = 0; i < n; i++) {
    const r = p + <usize>(i * XVM_NAME_RECORD_BYTES);
    const holder = load<u32>(r);
    const at = load<u64>(r + 4);
    if (holder == token && mine < 0) mine = i;
    else if (free < 0 && (holder == 0 || <i64>nowMs - <i64>at > <i64>maxAgeMs)) free = i;
  }
  const i = mine >= 0 ? mine : free >= 0 ? free : n;
  const size = (i < n ? n : n + 1) * XVM_NAME_RECORD_BYTES;
  const next = new ArrayBuffer(size);
  if (n > 0) memory.copy(changetype<usize>(next), p, <usize>(n * XVM_NAME_RECORD_BYTES));
  const r = changetype<usize>(next) + <usize>(i * XVM_NAME_RECORD_BYTES);
  store<u32>(r, token);
  store<u64>(r + 4, nowMs);
  out.name = <u32>(i + 1);
  out.doc = next;
  return out;
}
