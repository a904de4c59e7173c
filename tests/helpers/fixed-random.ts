/**
 * The same pseudo-random walk on every run: a linear congruential sequence from `seed`, each
 * draw an integer below n taken from the sequence's high bits (its low bits repeat with a
 * short period: `seed % 4` cycles through four values).
 */
export function fixedRandom(seed: number): (n: number) => number {
  return (n) => {
    seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
    return Math.floor((seed / 2_147_483_648) * n);
  };
}
