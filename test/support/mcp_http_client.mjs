// Drives cmdc_tool's MCP HTTP server with the official TypeScript SDK's StreamableHTTPClientTransport.
// Usage: node mcp_http_client.mjs SDK_DIR URL [TOKEN]
// Prints one JSON object with what it observed. Nothing here is cmdc_tool's code.
import { pathToFileURL } from "node:url";
import path from "node:path";

const [sdkDir, url, token] = process.argv.slice(2);
const sdk = (p) => import(pathToFileURL(path.join(sdkDir, "dist/esm", p)).href);
const { Client } = await sdk("client/index.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");

const errors = [];
const requestInit = token ? { headers: { Authorization: `Bearer ${token}` } } : undefined;
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit });
const client = new Client({ name: "cmdc-test", version: "1.0.0" });
client.onerror = (e) => errors.push(String(e));

await client.connect(transport);
const report = {
  server: client.getServerVersion(),
  session: transport.sessionId ?? null,
  protocol: transport.protocolVersion ?? null,
};
report.tools = (await client.listTools()).tools.map((t) => t.name);
const progress = [];
const echo = await client.callTool({ name: "echo", arguments: { text: "après" } });
report.echo = { isError: echo.isError, text: echo.content?.[0]?.text };
const countdown = await client.callTool(
  { name: "countdown", arguments: { n: 3, delay_ms: 20 } },
  undefined,
  { onprogress: (p) => progress.push(p.message) }
);
report.countdown = { text: countdown.content?.[0]?.text, progress };
try {
  await client.callTool({ name: "nope", arguments: {} });
  report.unknown = "no error";
} catch (e) {
  report.unknown = String(e);
}
await transport.terminateSession();
report.stream_errors = errors;
await client.close();
console.log(JSON.stringify(report));
