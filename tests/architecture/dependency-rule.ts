/**
 * The dependency rule as ARCHITECTURE.md states it: src/ is a stack of floors, written top
 * floor first, one line each (`name  path path …`, a path being a folder ending in `/` or one
 * file). A file may import files on its own floor and on the floors below it, never above.
 * Reading the rule from the document keeps the two from drifting apart.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";

export interface Floor {
  name: string;
  /** Its height: 0 is the bottom floor. */
  level: number;
  paths: string[];
}

const RULE_HEADING = "### The dependency rule";

export function readDependencyRule(root: string): Floor[] {
  const document = readFileSync(join(root, "ARCHITECTURE.md"), "utf8");
  const section = document.slice(document.indexOf(RULE_HEADING));
  const block = /```text\n([\s\S]*?)```/.exec(section)?.[1];
  if (!section.startsWith(RULE_HEADING) || !block) throw new Error(`ARCHITECTURE.md has no "${RULE_HEADING}" with a text block`);
  const lines = block.split("\n").filter((line) => line.trim() !== "");
  return lines.map((line, index) => {
    const [name = "", ...paths] = line.trim().split(/\s+/);
    return { name, level: lines.length - 1 - index, paths };
  });
}

/** The floor a file stands on: the one naming it, or else the one naming its nearest folder. */
export function floorOf(floors: Floor[], file: string): Floor | undefined {
  let best: { floor: Floor; length: number } | undefined;
  for (const floor of floors) {
    for (const path of floor.paths) {
      const matches = path.endsWith("/") ? file.startsWith(path) : file === path;
      if (matches && path.length > (best?.length ?? -1)) best = { floor, length: path.length };
    }
  }
  return best?.floor;
}

/** `src/store/sqlite/x.ts` → `src/store`: the top folder under src/ (or the file itself at src/'s root). */
export const topFolder = (file: string) => {
  const parts = file.split("/");
  return parts.length > 2 ? parts.slice(0, 2).join("/") : file;
};
