/**
 * The import graph of src/, read from the sources as written: static imports and re-exports
 * (type-only ones too, since a type shared the wrong way round is a layering fault as much as
 * a call is), dynamic `import()` and `require()`. Only relative imports are edges; packages
 * from node_modules are outside the rule.
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { Glob } from "bun";

/** One import: `from` imports `to`, both paths relative to the repository root. */
export interface ImportEdge {
  from: string;
  to: string;
}

const IMPORT_FORMS = [
  /(?:^|\n)\s*(?:import|export)\s[^;]*?\sfrom\s*["']([^"']+)["']/g,
  /(?:^|\n)\s*import\s*["']([^"']+)["']/g,
  /\bimport\(\s*["']([^"']+)["']\s*\)/g,
  /\brequire\(\s*["']([^"']+)["']\s*\)/g,
];

/** The module specifiers a TypeScript source imports, in any of the forms above. */
export function importSpecifiers(source: string): string[] {
  const withoutComments = source.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|[^:"'`])\/\/.*$/gm, "$1");
  return IMPORT_FORMS.flatMap((form) => [...withoutComments.matchAll(form)].map((match) => match[1]!));
}

/** Every .ts file under `folder` (relative to `root`), declaration files excepted. */
export function sourceFiles(root: string, folder: string): string[] {
  return [...new Glob("**/*.ts").scanSync(join(root, folder))]
    .filter((file) => !file.endsWith(".d.ts"))
    .map((file) => join(folder, file))
    .sort();
}

export function importEdges(root: string, files: string[]): ImportEdge[] {
  return files.flatMap((from) =>
    importSpecifiers(readFileSync(join(root, from), "utf8"))
      .filter((specifier) => specifier.startsWith("."))
      .map((specifier) => ({ from, to: resolveModule(root, from, specifier) })),
  );
}

function resolveModule(root: string, from: string, specifier: string): string {
  const target = resolve(root, dirname(from), specifier);
  const candidates = [target, `${target}.ts`, join(target, "index.ts")];
  const found = candidates.find((path) => existsSync(path) && !path.endsWith("/") && /\.\w+$/.test(path)) ?? target;
  return relative(root, found);
}

/** Groups of files that import each other round a cycle (Tarjan's strongly connected components). */
export function importCycles(edges: ImportEdge[]): string[][] {
  const next = new Map<string, string[]>();
  for (const { from, to } of edges) next.set(from, [...(next.get(from) ?? []), to]);
  const order = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const visit = (file: string) => {
    order.set(file, order.size);
    low.set(file, order.get(file)!);
    stack.push(file);
    onStack.add(file);
    for (const to of next.get(file) ?? []) {
      if (!order.has(to)) {
        visit(to);
        low.set(file, Math.min(low.get(file)!, low.get(to)!));
      } else if (onStack.has(to)) low.set(file, Math.min(low.get(file)!, order.get(to)!));
    }
    if (low.get(file) !== order.get(file)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(member);
    } while (member !== file);
    if (component.length > 1) cycles.push(component.sort());
  };
  for (const file of next.keys()) if (!order.has(file)) visit(file);
  return cycles;
}
