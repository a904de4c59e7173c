/**
 * "Did you mean": the known word nearest a mistyped one, by edit distance (insertions,
 * deletions, substitutions and swaps of two neighbours each count one: the optimal string
 * alignment distance), when it is near enough to be a typo: `keys rotate` for `key rotate`,
 * `kye list` for `key list`. Nothing for a word that is far from every known one.
 */

/** The candidate nearest `typed`, or null when none is within a typo of it. */
export function nearest(typed: string, candidates: readonly string[]): string | null {
  // One slip in a short word, two in a longer one: more would suggest what was not meant.
  const limit = typed.length <= 4 ? 1 : 2;
  let best: { word: string; distance: number } | null = null;
  for (const word of candidates) {
    const distance = editDistance(typed, word);
    if (distance <= limit && (best === null || distance < best.distance)) best = { word, distance };
  }
  return best?.word ?? null;
}

function editDistance(a: string, b: string): number {
  // rows[i][j]: the distance between a's first i characters and b's first j.
  const rows = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(rows[i - 1]![j]! + 1, rows[i]![j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, rows[i - 2]![j - 2]! + 1);
      rows[i]![j] = d;
    }
  }
  return rows[a.length]![b.length]!;
}
