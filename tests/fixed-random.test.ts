/**
 * The seeded walks' generator (tests/helpers/fixed-random.ts). Computed in floating point, its
 * step rounded once the product passed 2^53 and the walk fell into a cycle of 10,466 draws, so
 * a test that drew 40,000 times saw about 14,000 different ones.
 */
import { expect, test } from "bun:test";
import { fixedRandom } from "./helpers/fixed-random";

test("each draw follows the exact sequence (seed × 1,103,515,245 + 12,345) mod 2^31, past where the rounded one cycled", () => {
  for (const seed of [0, 7, 35, 2_147_483_647]) {
    const draw = fixedRandom(seed);
    let exact = BigInt(seed);
    for (let i = 0; i < 30_000; i++) {
      exact = (exact * 1_103_515_245n + 12_345n) % 2_147_483_648n;
      const expected = Math.floor((Number(exact) / 2_147_483_648) * 1_000_000);
      if (draw(1_000_000) !== expected) throw new Error(`seed ${seed}: draw ${i} left the sequence`);
    }
  }
});

test("draws stay below n and reach both ends of the range", () => {
  const draw = fixedRandom(11);
  const seen = new Set<number>();
  for (let i = 0; i < 10_000; i++) {
    const value = draw(10);
    expect(value >= 0 && value < 10 && Number.isInteger(value)).toBe(true);
    seen.add(value);
  }
  expect([...seen].sort()).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
});
