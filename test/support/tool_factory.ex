defmodule CMDC.Tool.Test.Factory do
  @moduledoc false
  # Tool modules made at run time, fast: compiled from Erlang abstract forms (about 1 ms each,
  # where Module.create/3 takes tens), so tests and benchmarks can make thousands.
  # The benchmarks load this file with Code.require_file/1.

  @doc false
  def tool(name, description \\ "A tool.", parameters \\ %{"type" => "object"}) do
    module = :"Elixir.CMDC.Tool.Test.Gen#{System.unique_integer([:positive])}"

    forms = [
      {:attribute, 1, :module, module},
      {:attribute, 1, :export, [name: 0, description: 0, parameters: 0, execute: 2]},
      fun(:name, name),
      fun(:description, description),
      fun(:parameters, parameters),
      {:function, 1, :execute, 2,
       [{:clause, 1, [{:var, 1, :_}, {:var, 1, :_}], [], [:erl_parse.abstract({:ok, name})]}]}
    ]

    {:ok, ^module, binary} = :compile.forms(forms, [:binary])
    {:module, ^module} = :code.load_binary(module, ~c"generated", binary)
    module
  end

  defp fun(name, value),
    do: {:function, 1, name, 0, [{:clause, 1, [], [], [:erl_parse.abstract(value)]}]}
end
