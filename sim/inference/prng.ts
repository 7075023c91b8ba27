// Seeded PRNG (mulberry32): small, fast, reproducible across runs and platforms.
export type Rng = () => number;

/** Uniform [0, 1) generator from a 32-bit seed. */
export function mulberry32(seed: number): Rng {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Uniform (0, 1): never 0, safe for log(). */
export function openUniform(rng: Rng): number {
  let u = rng();
  while (u === 0) u = rng();
  return u;
}

/** Standard normal (Box-Muller; one of the pair is discarded to keep the stream simple). */
export function standardNormal(rng: Rng): number {
  const u1 = openUniform(rng);
  const u2 = rng();
  return Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
}
