// Service-time distributions (milliseconds) with their exact first and second moments, so a
// simulation run can be checked against M/G/1 theory. All sampling goes through a seeded Rng.
import { openUniform, type Rng, standardNormal } from './prng';

export type DistSpec =
  | { kind: 'fixed'; meanMs: number }
  | { kind: 'exponential'; meanMs: number }
  /** sigma of the underlying normal; mu is chosen so that the mean is meanMs */
  | { kind: 'lognormal'; meanMs: number; sigma: number }
  /** classic Pareto with shape alpha > 1, scale chosen so that the mean is meanMs */
  | { kind: 'pareto'; meanMs: number; alpha: number }
  /** Pareto truncated to [minMs, maxMs] */
  | { kind: 'bounded-pareto'; alpha: number; minMs: number; maxMs: number };

export interface Distribution {
  spec: DistSpec;
  sample(rng: Rng): number;
  /** E[S] (ms) */
  mean: number;
  /** E[S²] (ms²); Infinity when it does not exist */
  secondMoment: number;
  /** P(S <= x) */
  cdf(x: number): number;
}

export function makeDistribution(spec: DistSpec): Distribution {
  switch (spec.kind) {
    case 'fixed': {
      const m = spec.meanMs;
      return { spec, mean: m, secondMoment: m * m, sample: () => m, cdf: (x) => (x >= m ? 1 : 0) };
    }
    case 'exponential': {
      const m = spec.meanMs;
      return { spec, mean: m, secondMoment: 2 * m * m, sample: (r) => -m * Math.log(openUniform(r)), cdf: (x) => (x <= 0 ? 0 : 1 - Math.exp(-x / m)) };
    }
    case 'lognormal': {
      const s = spec.sigma;
      const mu = Math.log(spec.meanMs) - (s * s) / 2;
      return {
        spec,
        mean: spec.meanMs,
        secondMoment: Math.exp(2 * mu + 2 * s * s),
        sample: (r) => Math.exp(mu + s * standardNormal(r)),
        cdf: (x) => (x <= 0 ? 0 : normalCdf((Math.log(x) - mu) / s)),
      };
    }
    case 'pareto': {
      const a = spec.alpha;
      if (!(a > 1)) throw new RangeError('pareto: alpha must be > 1 (finite mean)');
      const xm = (spec.meanMs * (a - 1)) / a;
      return {
        spec,
        mean: spec.meanMs,
        secondMoment: a > 2 ? (a * xm * xm) / (a - 2) : Infinity,
        sample: (r) => xm / Math.pow(openUniform(r), 1 / a),
        cdf: (x) => (x < xm ? 0 : 1 - Math.pow(xm / x, a)),
      };
    }
    case 'bounded-pareto': {
      const { alpha: a, minMs: L, maxMs: H } = spec;
      if (!(L > 0 && H > L && a > 0)) throw new RangeError('bounded-pareto: need 0 < minMs < maxMs, alpha > 0');
      const la = Math.pow(L, a);
      const norm = 1 - Math.pow(L / H, a);
      // E[S^k] = a L^a / (1 - (L/H)^a) * (H^(k-a) - L^(k-a)) / (k - a), with the log form at k = a
      const moment = (k: number): number =>
        Math.abs(k - a) < 1e-12 ? ((a * la) / norm) * Math.log(H / L) : (((a * la) / norm) * (Math.pow(H, k - a) - Math.pow(L, k - a))) / (k - a);
      return {
        spec,
        mean: moment(1),
        secondMoment: moment(2),
        sample: (r) => L / Math.pow(1 - r() * norm, 1 / a),
        cdf: (x) => (x < L ? 0 : x >= H ? 1 : (1 - Math.pow(L / x, a)) / norm),
      };
    }
  }
}

/** Φ(z), Abramowitz-Stegun 7.1.26 via erf (|error| < 1.5e-7). */
export function normalCdf(z: number): number {
  const x = Math.abs(z) / Math.SQRT2;
  const t = 1 / (1 + 0.3275911 * x);
  const y = 1 - ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * Math.exp(-x * x);
  return z >= 0 ? 0.5 * (1 + y) : 0.5 * (1 - y);
}
