// Writer lease in shared data: 16 bytes = u32 vm token, u32 zero, u64 expiry (ms).
// Pure decision logic; the root context performs the CAS write the decision asks for.

export const LEASE_BYTES: i32 = 16;

export class LeaseDecision {
  /** Write our lease now (claim or renew). */
  write: bool = false;
  /** We hold the lease (after a successful write, if one was asked). */
  mine: bool = false;
}

export function encodeLease(token: u32, expiryMs: u64): ArrayBuffer {
  const b = new ArrayBuffer(LEASE_BYTES);
  store<u32>(changetype<usize>(b), token);
  store<u64>(changetype<usize>(b) + 8, expiryMs);
  return b;
}

/**
 * found/value: the current shared lease. A VM claims a missing, malformed or expired lease,
 * renews its own once half of it has run out, and otherwise leaves it alone.
 */
export function claimLease(found: bool, value: ArrayBuffer, token: u32, nowMs: u64, leaseMs: u64): LeaseDecision {
  const d = new LeaseDecision();
  if (!found || value.byteLength != LEASE_BYTES) { d.write = true; return d; }
  const holder = load<u32>(changetype<usize>(value));
  const expiry = load<u64>(changetype<usize>(value) + 8);
  if (holder == token) {
    d.mine = nowMs < expiry;
    d.write = expiry < nowMs + leaseMs / 2; // renew (or re-claim) past half-life
    return d;
  }
  d.write = nowMs >= expiry;
  return d;
}
