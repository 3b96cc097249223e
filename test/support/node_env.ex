defmodule CMDC.Tool.NodeEnv do
  @moduledoc false
  # The official MCP TypeScript SDK (@modelcontextprotocol/sdk), installed from npm on first use
  # under _build/. `{:error, reason}` when node/npm are missing or the registry is unreachable.

  @dir Path.expand("../../_build/mcp-node", __DIR__)

  def sdk do
    sdk = Path.join(@dir, "node_modules/@modelcontextprotocol/sdk")

    cond do
      System.find_executable("node") == nil -> {:error, "node is not installed"}
      File.exists?(Path.join(sdk, "package.json")) -> {:ok, sdk}
      System.find_executable("npm") == nil -> {:error, "npm is not installed"}
      true -> install(sdk)
    end
  end

  defp install(sdk) do
    File.mkdir_p!(@dir)
    File.write!(Path.join(@dir, "package.json"), ~s({"name": "mcp-node", "private": true}))
    args = ~w(install --silent --no-audit --no-fund @modelcontextprotocol/sdk)

    case System.cmd("npm", args, cd: @dir, stderr_to_stdout: true) do
      {_, 0} -> {:ok, sdk}
      {out, status} -> {:error, "npm install failed (#{status}), registry unreachable? #{out}"}
    end
  end
end
