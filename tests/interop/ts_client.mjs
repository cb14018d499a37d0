// A third-party client for the mcp-roots reference server: the official TypeScript SDK
// (@modelcontextprotocol/sdk, pinned in package.json), over stdio or streamable HTTP.
//
// It plays one scenario and prints one JSON summary on stdout; tests/adapters/test_interop_ts.py runs it and
// asserts on the summary. Nothing here decides pass or fail except the watchdog (exit 3 on overrun).
//
//   node ts_client.mjs --transport stdio --python PY --server SERVER --fallback DIR --root-a DIR ...
//   node ts_client.mjs --transport http --url http://127.0.0.1:PORT/mcp --root-a DIR ...
//   --scenario roots (default): grant, change, burst. --scenario fallback: reads where the fallback roots
//   must apply; add --no-roots to connect without the roots capability at all.
import { parseArgs } from "node:util";
import { pathToFileURL } from "node:url";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ListRootsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const { values: opt } = parseArgs({
  options: {
    transport: { type: "string", default: "stdio" },
    python: { type: "string" },
    server: { type: "string" },
    url: { type: "string" },
    scenario: { type: "string", default: "roots" },
    "no-roots": { type: "boolean", default: false },
    "root-a": { type: "string" },
    "root-b": { type: "string" },
    "root-c": { type: "string" },
    fallback: { type: "string" },
    outside: { type: "string" },
    burst: { type: "string", default: "1000" },
    "burst-batch": { type: "string", default: "50" },
    "call-timeout": { type: "string", default: "15" },
    deadline: { type: "string", default: "60" },
  },
});

const callTimeoutMs = Number(opt["call-timeout"]) * 1000;
const watchdog = setTimeout(() => {
  process.stdout.write(JSON.stringify({ error: `watchdog: scenario exceeded ${opt.deadline} s` }) + "\n");
  process.exit(3);
}, Number(opt.deadline) * 1000);

// The roots this client grants; the roots/list handler answers from it, so changing it is a roots change.
let granted = [];
let rootsListRequests = 0;
const grant = (...dirs) => {
  granted = dirs.map((d) => ({ uri: pathToFileURL(d).href, name: path.basename(d) }));
};

const withRoots = !opt["no-roots"];
const client = new Client(
  { name: "mcp-roots-interop-ts", version: "1.0.0" },
  { capabilities: withRoots ? { roots: { listChanged: true } } : {} },
);
if (withRoots) {
  client.setRequestHandler(ListRootsRequestSchema, async () => {
    rootsListRequests += 1;
    return { roots: granted };
  });
}

function makeTransport() {
  if (opt.transport === "stdio") {
    const args = [opt.server];
    if (opt.fallback) args.push("--roots", opt.fallback);
    // The whole environment, not the SDK's short safe list: the server needs the venv's settings.
    return new StdioClientTransport({ command: opt.python, args, env: { ...process.env }, stderr: "inherit" });
  }
  if (opt.transport === "http") return new StreamableHTTPClientTransport(new URL(opt.url));
  throw new Error(`unknown --transport ${opt.transport}`);
}

// One tool call, reduced to what the test asserts on.
async function call(name, args = {}) {
  const result = await client.callTool({ name, arguments: args }, undefined, { timeout: callTimeoutMs });
  const text = (result.content ?? []).map((c) => c.text ?? "").join("");
  return { isError: result.isError === true, text, structured: result.structuredContent ?? null };
}
const read = (dir, file) => call("read_text", { path: path.join(dir, file) });
async function rootPaths() {
  const r = await call("list_roots");
  const list = r.structured?.result ?? JSON.parse(r.text || "[]");
  return list.map((root) => root.path);
}

const summary = { transport: opt.transport, roots_capability: withRoots };
const transport = makeTransport();
try {
  if (withRoots) grant(opt["root-a"]);
  await client.connect(transport);
  summary.protocol_version = transport.protocolVersion ?? null;
  summary.server = client.getServerVersion()?.name ?? null;

  if (opt.scenario === "fallback") {
    summary.fallback_read = await read(opt.fallback, "fallback.txt");
    summary.root_a_read = await read(opt["root-a"], "a.txt");
    summary.outside_read = await read(opt.outside, "secret.txt");
    summary.roots = await rootPaths();
    summary.roots_list_requests_total = rootsListRequests;
  } else if (opt.scenario === "roots") {
    // 0. The very first tool call, right after connecting, then (bounded) until the client's roots are in
    // force: over streamable HTTP the server's first roots/list can race this client's GET stream.
    summary.immediate = await read(opt["root-a"], "a.txt");
    const waitStarted = performance.now();
    let inForce = await rootPaths();
    while (!(inForce.length === 1 && inForce[0] === opt["root-a"]) && performance.now() - waitStarted < 15000) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      inForce = await rootPaths();
    }
    summary.roots_in_force_after_seconds = (performance.now() - waitStarted) / 1000;

    // 1. Inside the granted root: content. Outside it: isError.
    summary.first = {
      inside: await read(opt["root-a"], "a.txt"),
      other_root: await read(opt["root-b"], "b.txt"),
      outside: await read(opt.outside, "secret.txt"),
      traversal: await call("read_text", { path: path.join(opt["root-a"], "..", "outside", "secret.txt") }),
      write_inside: await call("write_text", { path: path.join(opt["root-a"], "from-ts.txt"), content: "ts" }),
      write_outside: await call("write_text", { path: path.join(opt.outside, "from-ts.txt"), content: "ts" }),
      list_dir: await call("list_dir", { path: opt["root-a"] }),
      roots: await rootPaths(),
    };

    // 2. Change the roots to B and say so; the very next call must see the new boundary.
    grant(opt["root-b"]);
    await client.sendRootsListChanged();
    summary.changed = {
      new_root: await read(opt["root-b"], "b.txt"),
      old_root: await read(opt["root-a"], "a.txt"),
      roots: await rootPaths(),
    };

    // 3. A burst of list_changed while the roots flip between A and B, ending on C alone.
    // Sent in concurrent batches, as a chatty host would: over HTTP each notification is its own POST.
    const burst = Number(opt.burst);
    const batch = Number(opt["burst-batch"]);
    const before = rootsListRequests;
    const started = performance.now();
    for (let sent = 0; sent < burst; sent += batch) {
      const size = Math.min(batch, burst - sent);
      if (sent + size >= burst) grant(opt["root-c"]);
      else grant((sent / batch) % 2 ? opt["root-a"] : opt["root-b"]);
      await Promise.all(Array.from({ length: size }, () => client.sendRootsListChanged()));
    }
    const sentMs = performance.now() - started;
    summary.burst = {
      notifications: burst,
      send_seconds: sentMs / 1000,
      after: {
        root_c: await read(opt["root-c"], "c.txt"),
        root_a: await read(opt["root-a"], "a.txt"),
        root_b: await read(opt["root-b"], "b.txt"),
        roots: await rootPaths(),
      },
    };
    // Let any refresh still scheduled by the burst finish before counting it.
    await new Promise((resolve) => setTimeout(resolve, 500));
    summary.burst.roots_list_requests = rootsListRequests - before;
    summary.roots_list_requests_total = rootsListRequests;
  } else {
    throw new Error(`unknown --scenario ${opt.scenario}`);
  }
} catch (err) {
  summary.error = String(err?.stack ?? err);
} finally {
  try {
    if (opt.transport === "http" && transport.sessionId) await transport.terminateSession();
    await client.close();
  } catch (err) {
    summary.close_error = String(err);
  }
  clearTimeout(watchdog);
}
process.stdout.write(JSON.stringify(summary) + "\n");
process.exit(summary.error ? 1 : 0);
