// Why a candidate was left out of a choice. Counted per reason (switchyard.lb.skip.<name>).
export const SKIP_NONE: i32 = 0;
export const SKIP_UNHEALTHY: i32 = 1;
export const SKIP_SATURATED: i32 = 2;
export const SKIP_SLOW: i32 = 3;
export const SKIP_STALE: i32 = 4;
export const SKIP_LINK: i32 = 5;
export const SKIP_REASONS: i32 = 6;

export function skipName(r: i32): string {
  switch (r) {
    case SKIP_UNHEALTHY: return "unhealthy";
    case SKIP_SATURATED: return "saturated";
    case SKIP_SLOW: return "slow";
    case SKIP_STALE: return "stale";
    case SKIP_LINK: return "link_degraded";
    default: return "none";
  }
}
