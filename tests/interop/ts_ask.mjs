// A session against `mcp-roots serve --ask` through the official TypeScript SDK client, whose elicitation
// handler plays the user (tests/filesystem/test_serve_ask.py).
//
//   node ts_ask.mjs SPEC.json
// SPEC: {"command": [argv...] (stdio), "answers": [ElicitResult...] (the handler's answers, in turn),
//        "calls": [[tool, args], ...], "deadline": seconds (default 60)}
// Prints one JSON object: {"results": [{isError, text}...], "questions": [{message, folders, accesses}...]}.
// Nothing here decides pass or fail; the Python test asserts on the output.
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const spec = JSON.parse(readFileSync(process.argv[2], "utf8"));
const watchdog = setTimeout(() => {
  process.stdout.write(JSON.stringify({ error: `watchdog: session exceeded ${spec.deadline ?? 60} s` }) + "\n");
  process.exit(3);
}, (spec.deadline ?? 60) * 1000);

// Elicitation, and no roots: the server asks its user for folders.
const client = new Client({ name: "mcp-roots-ts-ask", version: "1.0.0" }, { capabilities: { elicitation: {} } });
const questions = [];
const answers = [...spec.answers];
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  const properties = request.params.requestedSchema?.properties ?? {};
  questions.push({
    message: request.params.message,
    folders: properties.folder?.enum ?? null,
    accesses: properties.access?.enum ?? null,
  });
  return answers.shift() ?? { action: "cancel" };
});
const transport = new StdioClientTransport({
  command: spec.command[0],
  args: spec.command.slice(1),
  env: { ...process.env },
  stderr: "ignore",
});
await client.connect(transport);
const results = [];
for (const [name, args] of spec.calls) {
  const r = await client.callTool({ name, arguments: args }, undefined, { timeout: 60000 });
  results.push({ isError: r.isError === true, text: (r.content ?? []).map((c) => c.text ?? "").join("") });
}
await client.close();
clearTimeout(watchdog);
process.stdout.write(JSON.stringify({ results, questions }) + "\n");
