// The official filesystem server's own helpers, for the unit tests to compare against: minimatch (with
// dot: true, as the server calls it) and jsdiff's createTwoFilesPatch (as the server's edit_file does).
//   node fs_reference.mjs CASES.json  ->  one JSON array of answers on stdout
// CASES: [["glob", path, pattern] | ["diff", name, old, new], ...]
import { readFileSync } from "node:fs";
import { minimatch } from "minimatch";
import { createTwoFilesPatch } from "diff";

const cases = JSON.parse(readFileSync(process.argv[2], "utf8"));
const answers = cases.map(([kind, ...args]) => {
  if (kind === "glob") return minimatch(args[0], args[1], { dot: true });
  if (kind === "diff") return createTwoFilesPatch(args[0], args[0], args[1], args[2], "original", "modified");
  throw new Error(`unknown case kind ${kind}`);
});
process.stdout.write(JSON.stringify(answers) + "\n");
