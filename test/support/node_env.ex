defmodule CMDC.Tool.NodeEnv do
  @moduledoc false
  # The official MCP TypeScript SDK (@modelcontextprotocol/sdk), installed from npm on first use
  # in the test cache (`CMDC.Tool.TestCache`). `{:error, reason}` when node/npm are missing or the
  # registry is unreachable.

  def sdk do
    sdk = Path.join(CMDC.Tool.TestCache.dir("mcp-node"), "node_modules/@modelcontextprotocol/sdk")

    cond do
      System.find_executable("node") == nil -> {:error, "node is not installed"}
      File.exists?(Path.join(sdk, "package.json")) -> {:ok, sdk}
      System.find_executable("npm") == nil -> {:error, "npm is not installed"}
      true -> CMDC.Tool.TestCache.with_lock("mcp-node", fn -> install(sdk) end)
    end
  end

  defp install(sdk) do
    dir = CMDC.Tool.TestCache.dir("mcp-node")
    File.mkdir_p!(dir)
    File.write!(Path.join(dir, "package.json"), ~s({"name": "mcp-node", "private": true}))
    args = ~w(install --silent --no-audit --no-fund @modelcontextprotocol/sdk)

    case System.cmd("npm", args, cd: dir, stderr_to_stdout: true) do
      {_, 0} -> {:ok, sdk}
      {out, status} -> {:error, "npm install failed (#{status}), registry unreachable? #{out}"}
    end
  end
end
