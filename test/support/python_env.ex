defmodule CMDC.Tool.PythonEnv do
  @moduledoc false
  # A virtual environment with the official MCP Python SDK, made on first use in the test
  # cache outside the checkout (`CMDC.Tool.TestCache`; PyPI is reachable from every machine of
  # this project; nothing else is needed).

  def python do
    venv = CMDC.Tool.TestCache.dir("mcp-venv")
    py = Path.join([venv, "bin", "python"])

    if ready?(py) do
      {:ok, py}
    else
      CMDC.Tool.TestCache.with_lock("mcp-venv", fn ->
        if ready?(py), do: {:ok, py}, else: create(venv, py)
      end)
    end
  end

  defp ready?(py),
    do:
      File.exists?(py) and
        match?({_, 0}, System.cmd(py, ["-c", "import mcp"], stderr_to_stdout: true))

  defp create(venv, py) do
    python3 =
      System.find_executable("python3") || raise "python3 is needed for the MCP end-to-end test"

    with {_, 0} <- System.cmd(python3, ["-m", "venv", venv], stderr_to_stdout: true),
         {_, 0} <-
           System.cmd(py, ["-m", "pip", "install", "--quiet", "mcp"], stderr_to_stdout: true) do
      {:ok, py}
    else
      {out, status} -> {:error, "creating #{venv} failed (#{status}): #{out}"}
    end
  end
end
