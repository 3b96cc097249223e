defmodule CMDC.Tool.Test.Factory do
  @moduledoc false
  # Tool modules made at run time, fast: assembled from BEAM assembly (`:from_asm`), which skips
  # the compiler's passes (tens of µs per module where Module.create/3 takes milliseconds), so
  # tests and benchmarks can make thousands. The benchmarks load this file with
  # Code.require_file/1.

  @doc false
  def tool(name, description \\ "A tool.", parameters \\ %{"type" => "object"}) do
    {module, binary} = assemble(name, description, parameters)
    {:module, ^module} = :code.load_binary(module, ~c"generated", binary)
    module
  end

  @doc false
  # Many tools, loaded in one `:code.atomic_load/1`: every module load waits for a code barrier
  # (~2 ms idle, 10-25 ms on a busy machine), so 2,000 tools one by one took most of a minute.
  # Each item is a name or `{name, description}` or `{name, description, parameters}`.
  def tools(items) do
    assembled = Enum.map(items, &assemble_item/1)
    :ok = :code.atomic_load(Enum.map(assembled, fn {m, bin} -> {m, ~c"generated", bin} end))
    Enum.map(assembled, &elem(&1, 0))
  end

  defp assemble_item({name, description}), do: assemble(name, description, %{"type" => "object"})
  defp assemble_item({name, description, parameters}), do: assemble(name, description, parameters)
  defp assemble_item(name), do: assemble(name, "A tool.", %{"type" => "object"})

  defp assemble(name, description, parameters) do
    module = :"Elixir.CMDC.Tool.Test.Gen#{System.unique_integer([:positive])}"

    {functions, next} =
      Enum.map_reduce(
        [name: name, description: description, parameters: parameters],
        1,
        fn {fun, value}, label -> {constant(module, fun, value, label), label + 2} end
      )

    execute =
      function(module, :execute, 2, next, [{:move, {:literal, {:ok, name}}, {:x, 0}}, :return])

    info0 =
      function(module, :module_info, 0, next + 2, [
        {:move, {:atom, module}, {:x, 0}},
        {:call_ext_only, 1, {:extfunc, :erlang, :get_module_info, 1}}
      ])

    info1 =
      function(module, :module_info, 1, next + 4, [
        {:move, {:x, 0}, {:x, 1}},
        {:move, {:atom, module}, {:x, 0}},
        {:call_ext_only, 2, {:extfunc, :erlang, :get_module_info, 2}}
      ])

    exports = [name: 0, description: 0, parameters: 0, execute: 2, module_info: 0, module_info: 1]
    asm = {module, exports, [], functions ++ [execute, info0, info1], next + 6}
    {:ok, ^module, binary} = :compile.forms(asm, [:from_asm, :binary, :no_spawn_compiler_process])
    {module, binary}
  end

  defp constant(module, fun, value, label),
    do: function(module, fun, 0, label, [{:move, {:literal, value}, {:x, 0}}, :return])

  defp function(module, name, arity, label, body) do
    {:function, name, arity, label + 1,
     [{:label, label}, {:func_info, {:atom, module}, {:atom, name}, arity}, {:label, label + 1}] ++
       body}
  end
end
