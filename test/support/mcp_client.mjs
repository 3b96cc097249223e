// End-to-end MCP client for cmdc_tool's stdio server, using the official TypeScript SDK
// (@modelcontextprotocol/sdk). Usage: node mcp_client.mjs SDK_DIR SERVER_COMMAND [ARGS...]
// Prints one JSON object; `stream_errors` lists what the transport could not read (anything
// on stdout that is not a JSON-RPC message shows up there).
import { pathToFileURL } from "node:url";
import path from "node:path";

const [sdkDir, command, ...args] = process.argv.slice(2);
const sdk = (p) => import(pathToFileURL(path.join(sdkDir, "dist/esm", p)).href);
const { Client } = await sdk("client/index.js");
const { StdioClientTransport } = await sdk("client/stdio.js");

const errors = [];
const transport = new StdioClientTransport({ command, args, env: process.env, stderr: "ignore" });
const client = new Client({ name: "cmdc-test", version: "1.0.0" });
client.onerror = (e) => errors.push(String(e));

await client.connect(transport);
const report = { server: client.getServerVersion(), capabilities: client.getServerCapabilities() };
const listed = await client.listTools();
report.tools = Object.fromEntries(
  listed.tools.map((t) => [t.name, { title: t.title, annotations: t.annotations, outputSchema: t.outputSchema }])
);
report.calls = {};
for (const [key, name, toolArgs] of [
  ["noisy", "noisy", {}],
  ["weather", "weather", { city: "Oslo" }],
  ["weather_text", "weather", { city: "Rome", as: "text" }],
  ["weather_wrong", "weather", { city: "Oslo", as: "wrong" }],
  ["echo", "echo", { text: "après" }],
]) {
  try {
    const r = await client.callTool({ name, arguments: toolArgs });
    report.calls[key] = { isError: r.isError, text: r.content?.[0]?.text, structured: r.structuredContent };
  } catch (e) {
    report.calls[key] = { exception: String(e) };
  }
}
report.stream_errors = errors;
await client.close();
console.log(JSON.stringify(report));
