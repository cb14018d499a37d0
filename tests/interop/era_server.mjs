// One tool server on the TypeScript SDK for wrap's era tests: its tool `read` reads whatever path it is given.
import { readFileSync } from "node:fs";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const server = new McpServer({ name: "era-ts", version: "1.0.0" });
server.tool("read", "Read a text file.", { path: z.string() }, async ({ path }) => ({
  content: [{ type: "text", text: readFileSync(path, "utf8") }],
}));
await server.connect(new StdioServerTransport());
