// A scripted session against a filesystem MCP server (mcp-roots serve, or the official
// @modelcontextprotocol/server-filesystem), through the official TypeScript SDK client.
//
//   node fs_session.mjs SPEC.json
// SPEC: {"transport": "stdio"|"http", "command": [argv...] (stdio), "url": "..." (http),
//        "headers": {name: value} (http: sent on every request, e.g. the bearer token of mcp-roots serve),
//        "roots": [dir...] or null (null: no roots capability), "calls": [[tool, args], ...],
//        "deadline": seconds, "settle": [tool, args, text] (optional: before the calls, call the tool until its
//        answer holds text, within 30 s: a server that applies client roots in the background)}
// Prints one JSON object: {"tools": [...tools/list...], "results": [{isError, content, structured}...]}.
// Nothing here decides pass or fail; the Python tests assert on the output.
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ListRootsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const spec = JSON.parse(readFileSync(process.argv[2], "utf8"));
const watchdog = setTimeout(() => {
  process.stdout.write(JSON.stringify({ error: `watchdog: session exceeded ${spec.deadline} s` }) + "\n");
  process.exit(3);
}, (spec.deadline ?? 60) * 1000);

const withRoots = Array.isArray(spec.roots);
const client = new Client(
  { name: "mcp-roots-fs-session", version: "1.0.0" },
  { capabilities: withRoots ? { roots: { listChanged: true } } : {} },
);
if (withRoots) {
  client.setRequestHandler(ListRootsRequestSchema, async () => ({
    roots: spec.roots.map((d) => ({ uri: pathToFileURL(d).href, name: path.basename(d) })),
  }));
}
const transport =
  spec.transport === "http"
    ? new StreamableHTTPClientTransport(new URL(spec.url), { requestInit: { headers: spec.headers ?? {} } })
    : new StdioClientTransport({
        command: spec.command[0],
        args: spec.command.slice(1),
        env: { ...process.env },
        stderr: "ignore",
      });
await client.connect(transport);
const tools = (await client.listTools()).tools;
if (spec.settle) {
  const [name, args, want] = spec.settle;
  const until = Date.now() + 30000;
  while (Date.now() < until) {
    const r = await client.callTool({ name, arguments: args }, undefined, { timeout: 60000 });
    if ((r.content ?? []).some((c) => typeof c.text === "string" && c.text.includes(want))) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
const results = [];
for (const [name, args] of spec.calls) {
  try {
    const r = await client.callTool({ name, arguments: args }, undefined, { timeout: 60000 });
    results.push({ isError: r.isError === true, content: r.content ?? [], structured: r.structuredContent ?? null });
  } catch (error) {
    // A protocol error (an unknown tool, invalid arguments): reported as an error result.
    results.push({ isError: true, content: [{ type: "text", text: String(error.message ?? error) }], structured: null, protocolError: true });
  }
}
await client.close();
clearTimeout(watchdog);
process.stdout.write(JSON.stringify({ tools, results }) + "\n");
process.exit(0);
