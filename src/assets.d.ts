/**
 * Files imported `with { type: "file" }`: Bun gives their path on disk, or inside the single
 * binary once `bun build --compile` has embedded them (src/pages/docs-page.ts).
 */
declare module "swagger-ui-dist/swagger-ui-bundle.js" {
  const path: string;
  export default path;
}

declare module "swagger-ui-dist/swagger-ui.css" {
  const path: string;
  export default path;
}
