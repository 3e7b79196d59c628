// Bundle the extension into dist/extension.js (vscode is provided by the editor at run time).
import { build } from "esbuild";

await build({
  entryPoints: ["src/extension.ts"],
  bundle: true,
  outfile: "dist/extension.js",
  platform: "node",
  format: "cjs",
  target: "node18",
  external: ["vscode"],
  sourcemap: false,
  minify: process.argv.includes("--minify"),
  logLevel: "warning",
});
