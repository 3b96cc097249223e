// The input schemas of the official MCP reference servers (server-everything, server-filesystem),
// read by listing their tools over stdio; prints [{name, source, schema}].
// Usage: node gen_mcp.mjs <npm folder holding the two servers>
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const modules = join(process.argv[2], "node_modules", "@modelcontextprotocol");

function list(pkg, args) {
  return new Promise((resolve, reject) => {
    const main = join(modules, pkg, "dist", "index.js");
    const child = spawn("node", [main, ...args], { stdio: ["pipe", "pipe", "ignore"] });
    let buf = "";
    const send = (m) => child.stdin.write(JSON.stringify({ jsonrpc: "2.0", ...m }) + "\n");
    child.stdout.on("data", (d) => {
      buf += d;
      let nl;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const msg = JSON.parse(buf.slice(0, nl));
        buf = buf.slice(nl + 1);
        if (msg.id === 1) {
          send({ method: "notifications/initialized" });
          send({ id: 2, method: "tools/list", params: {} });
        } else if (msg.id === 2) {
          child.kill();
          const version = JSON.parse(readFileSync(join(modules, pkg, "package.json"))).version;
          resolve(msg.result.tools.map((t) => ({ pkg, version, tool: t })));
        }
      }
    });
    child.on("error", reject);
    send({ id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "corpus", version: "1" } } });
  });
}

const dir = mkdtempSync(join(tmpdir(), "mcp-corpus-"));
const tools = [...(await list("server-everything", ["stdio"])), ...(await list("server-filesystem", [dir]))];
const out = tools.map(({ pkg, version, tool }) => ({
  name: `mcp_${pkg.replace("server-", "")}_${tool.name}`.replace(/[^A-Za-z0-9_]/g, "_"),
  source: `@modelcontextprotocol/${pkg} ${version}`,
  schema: tool.inputSchema,
}));
process.stdout.write(JSON.stringify(out));
