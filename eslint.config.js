// Lint rules, checked by `npm test` (ARCHITECTURE.md §5); formatting is Prettier's (.prettierrc.json).
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["**/node_modules/**", "dist/**", "packages/*/dist/**", "tmp/**", "test-artifacts/**", "data/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      // `!` marks a value the code has just established (a map entry it set, a match it
      // tested); tsc is strict, and spelling each out as a runtime check would hide them.
      "@typescript-eslint/no-non-null-assertion": "off",
      // A leading underscore names what is deliberately left unused (a destructured field dropped).
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_", destructuredArrayIgnorePattern: "^_" }],
    },
  },
  {
    // Elysia decides whether to await a handler or hook by reading its source (an
    // AsyncFunction, or text that looks like a call returned). Minified (the bundle `npm
    // start` runs, the single binary) a plain function returning a promise can lose that
    // look, and its pending promise is then answered unawaited: admin creates answered 400
    // while they created the app. So every function returning a promise in the files that
    // hand functions to Elysia is declared `async`, which minification keeps.
    files: ["src/routes/**/*.ts", "src/http/**/*.ts", "src/auth/**/*.ts", "src/pages/**/*.ts", "src/app.ts"],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: { "@typescript-eslint/promise-function-async": "error" },
  },
  {
    // Tests and scripts read untyped JSON (API answers, bench output) field by field.
    files: ["tests/**", "scripts/**"],
    rules: { "@typescript-eslint/no-explicit-any": "off" },
  },
);
