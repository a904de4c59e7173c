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
