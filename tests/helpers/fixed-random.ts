/**
 * The same pseudo-random walk on every run: a linear congruential sequence from `seed`
 * (modulus 2^31, so its period is the full 2^31 draws), each draw an integer below n taken
 * from the sequence's high bits (its low bits repeat with a short period: `seed % 4` cycles
 * through four values).
 *
 * The step is computed in 32-bit integer arithmetic (`Math.imul`): `seed * 1_103_515_245` in
 * floating point passes 2^53 and rounds, and the rounded sequence fell into a cycle of 10,466
 * draws, shorter than some of the walks that use it.
 */
export function fixedRandom(seed: number): (n: number) => number {
  seed = seed >>> 0;
  return (n) => {
    seed = (Math.imul(seed, 1_103_515_245) + 12_345) & 0x7fff_ffff;
    return Math.floor((seed / 2_147_483_648) * n);
  };
}
