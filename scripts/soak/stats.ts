/** Small numeric helpers for the soak: percentiles, means and a least-squares slope. */

/** The p-th percentile (0..100) of `values`, nearest-rank; NaN when empty. Sorts a copy. */
export function percentile(values: ArrayLike<number>, p: number): number {
  if (values.length === 0) return NaN;
  const sorted = Float64Array.from(values).sort();
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

export function mean(values: number[]): number {
  if (values.length === 0) return NaN;
  return values.reduce((a, v) => a + v, 0) / values.length;
}

/** Least-squares slope of y over x; NaN with fewer than two points. */
export function slope(points: Array<{ x: number; y: number }>): number {
  if (points.length < 2) return NaN;
  const mx = mean(points.map((p) => p.x));
  const my = mean(points.map((p) => p.y));
  let num = 0;
  let den = 0;
  for (const p of points) {
    num += (p.x - mx) * (p.y - my);
    den += (p.x - mx) ** 2;
  }
  return den === 0 ? NaN : num / den;
}

export const mb = (bytes: number) => bytes / 1024 / 1024;
export const fixed = (n: number, digits = 1) => (Number.isFinite(n) ? n.toFixed(digits) : "–");
