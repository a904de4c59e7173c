/**
 * The order of an A/B pair's two rounds on one running process: the baseline first in even
 * pairs, the other side first in odd ones (A, B; B, A; …). With one order for every pair, the
 * other side always ran later than its baseline, so a host that sped up or slowed down
 * through the run counted against one side only; alternating the order cancels a steady
 * drift over each two pairs.
 */
export function inTurns<Side>(pairIndex: number, baseline: Side, other: Side): [Side, Side] {
  return pairIndex % 2 === 0 ? [baseline, other] : [other, baseline];
}

/**
 * Runs pair `pairIndex`'s two rounds one after the other in its turn's order, and returns
 * them as [baseline, other] whichever ran first.
 */
export async function pairInTurns<Round>(pairIndex: number, baseline: () => Promise<Round>, other: () => Promise<Round>): Promise<[Round, Round]> {
  const [first, second] = inTurns(pairIndex, baseline, other);
  const firstRound = await first();
  const secondRound = await second();
  return first === baseline ? [firstRound, secondRound] : [secondRound, firstRound];
}
