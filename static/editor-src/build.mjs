// Build the editor bundle: one minified IIFE file with a versioned name, committed so serving needs no npm.
import { build } from "esbuild";
import { readFileSync } from "node:fs";

const version = JSON.parse(readFileSync("node_modules/codemirror/package.json", "utf8")).version;
const outfile = `../editor/codemirror-${version}.bundle.js`;

await build({
  entryPoints: ["editor.js"],
  bundle: true,
  minify: true,
  format: "iife",
  target: ["es2020"],
  legalComments: "eof",
  outfile,
  logLevel: "info",
});
