"""Dumps the tool lists of real MCP servers into bench/search_eval/tools.json (the evaluation
catalog of bench/search.exs). Run once, by hand, with the `mcp` package:

    python bench/search_eval/dump_tools.py NPM_DIR [BIN_DIR] > bench/search_eval/tools.json

NPM_DIR holds the npm servers (node_modules/.bin/...), BIN_DIR the PyPI ones (mcp-server-git,
mcp-server-time, mcp-server-fetch). Each server is started over stdio,
asked `tools/list`, and stopped; one failing server is reported on stderr and skipped. Only
what search reads is kept: name, description, and each parameter's description.
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

NPM = {
    "memory": ["mcp-server-memory"],
    "github": ["mcp-server-github"],
    "sequential_thinking": ["mcp-server-sequential-thinking"],
    "puppeteer": ["mcp-server-puppeteer"],
    "slack": ["mcp-server-slack"],
    "gitlab": ["mcp-server-gitlab"],
    "google_maps": ["mcp-server-google-maps"],
    "brave_search": ["mcp-server-brave-search"],
    "everything": ["mcp-server-everything"],
    "filesystem": ["mcp-server-filesystem", "/tmp"],
    "playwright": ["playwright-mcp"],
    "notion": ["notion-mcp-server"],
    "chrome_devtools": ["chrome-devtools-mcp"],
    "supabase": ["mcp-server-supabase", "--access-token", "x"],
    "kubernetes": ["mcp-server-kubernetes"],
    "mongodb": ["mongodb-mcp-server"],
    "desktop_commander": ["desktop-commander"],
    "playwright_ea": ["playwright-mcp-server"],
    "firecrawl": ["firecrawl-mcp"],
    "context7": ["context7-mcp"],
    "redis": ["mcp-server-redis"],
    "postgres": ["mcp-server-postgres", "postgresql://localhost/none"],
    "everart": ["mcp-server-everart"],
    "aws_kb": ["mcp-server-aws-kb-retrieval"],
    "heroku": ["heroku-mcp-server"],
    "azure_devops": ["mcp-server-azuredevops", "none"],
}

PYPI = {
    "git": ["mcp-server-git", "--repository", "."],
    "time": ["mcp-server-time"],
    "fetch": ["mcp-server-fetch"],
}

ENV = {
    "GITHUB_PERSONAL_ACCESS_TOKEN": "x",
    "SLACK_BOT_TOKEN": "x",
    "SLACK_TEAM_ID": "x",
    "GITLAB_PERSONAL_ACCESS_TOKEN": "x",
    "GOOGLE_MAPS_API_KEY": "x",
    "BRAVE_API_KEY": "x",
    "FIRECRAWL_API_KEY": "x",
    "EVERART_API_KEY": "x",
    "HEROKU_API_KEY": "x",
}


def slim(schema):
    props = (schema or {}).get("properties") or {}
    return {
        "type": "object",
        "properties": {
            k: ({"description": v["description"]} if isinstance(v, dict) and "description" in v else {})
            for k, v in props.items()
        },
    }


async def tools(command, args):
    params = StdioServerParameters(command=command, args=args, env={**os.environ, **ENV})
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            return (await session.list_tools()).tools


async def main():
    npm = sys.argv[1]
    bins = sys.argv[2] if len(sys.argv) > 2 else None
    servers = [(s, os.path.join(npm, "node_modules", ".bin", b), a) for s, (b, *a) in NPM.items()]
    if bins:
        servers += [(s, os.path.join(bins, b), a) for s, (b, *a) in PYPI.items()]
    out = []
    for server, path, args in servers:
        if not os.path.exists(path):
            print(f"{server}: {path} absent", file=sys.stderr)
            continue
        try:
            found = await asyncio.wait_for(tools(path, args), 90)
        except Exception as e:
            print(f"{server}: {e!r}"[:300], file=sys.stderr)
            continue
        print(f"{server}: {len(found)} tools", file=sys.stderr)
        for t in found:
            out.append({"server": server, "name": t.name, "description": t.description or "",
                        "parameters": slim(t.input_schema)})
    # One tool a line: a modest file that diffs well.
    lines = (json.dumps(t, separators=(",", ":"), ensure_ascii=False) for t in out)
    sys.stdout.write("[\n" + ",\n".join(lines) + "\n]\n")


asyncio.run(main())
