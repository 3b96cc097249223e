defmodule CMDC.Tool.Script.Gen do
  @moduledoc false
  # Generates the tool module of one script function, fast.
  #
  # `Module.create/3` costs several milliseconds per module (the Elixir compiler), too much for a
  # start-up that loads hundreds of script tools. Every generated module has the same code, so a
  # template module is compiled once per VM; each tool module is that BEAM with two atoms of its
  # atom table renamed: the module name and a stamp derived from the tool's data (so a changed
  # description changes the module's MD5 and `CMDC.Tool.Schema.for_module/1` recompiles its
  # schema). Loading such a binary takes tens of microseconds. The data itself (name,
  # description, parameters, settings) lives in `:persistent_term` under
  # `{CMDC.Tool.Script, module}`. When the BEAM format is one this code does not know, it falls
  # back to compiling the same forms under the real name.
  #
  # The generated functions call an *owner* module (`__field__/2`, `execute/3`, `meta/2`):
  # `CMDC.Tool.Script` by default, `CMDC.Tool.MCP.Remote` for tools of MCP servers. The owner is
  # one more renamed atom, and the data key is `{owner, module}`.

  @template :"Elixir.CMDC.Tool.Script.Template"
  @stamp :cmdc_stamp_template
  # The template's placeholder owner, patched to the caller's owner in each copy. An atom, not
  # an alias: this module only names it in generated code (CMDC.Tool.Script calls this module).
  @owner :"Elixir.CMDC.Tool.Script"

  @source """
  -module('Elixir.CMDC.Tool.Script.Template').
  -behaviour('Elixir.CMDC.Tool').
  -export([name/0, description/0, parameters/0, execute/2, meta/1, '__tool_settings__'/0,
           '__script__'/0, '__stamp__'/0, title/0, annotations/0, output_schema/0, examples/0]).
  name() -> 'Elixir.CMDC.Tool.Script':'__field__'('Elixir.CMDC.Tool.Script.Template', name).
  description() ->
      'Elixir.CMDC.Tool.Script':'__field__'('Elixir.CMDC.Tool.Script.Template', description).
  parameters() ->
      'Elixir.CMDC.Tool.Script':'__field__'('Elixir.CMDC.Tool.Script.Template', parameters).
  '__tool_settings__'() ->
      'Elixir.CMDC.Tool.Script':'__field__'('Elixir.CMDC.Tool.Script.Template', settings).
  '__script__'() ->
      'Elixir.CMDC.Tool.Script':'__field__'('Elixir.CMDC.Tool.Script.Template', script).
  execute(Args, Context) ->
      'Elixir.CMDC.Tool.Script':execute('Elixir.CMDC.Tool.Script.Template', Args, Context).
  meta(Args) -> 'Elixir.CMDC.Tool.Script':meta('Elixir.CMDC.Tool.Script.Template', Args).
  '__stamp__'() -> cmdc_stamp_template.
  title() -> 'Elixir.CMDC.Tool.Script.Gen':optional('Elixir.CMDC.Tool.Script',
      'Elixir.CMDC.Tool.Script.Template', title).
  annotations() -> 'Elixir.CMDC.Tool.Script.Gen':optional('Elixir.CMDC.Tool.Script',
      'Elixir.CMDC.Tool.Script.Template', annotations).
  output_schema() -> 'Elixir.CMDC.Tool.Script.Gen':optional('Elixir.CMDC.Tool.Script',
      'Elixir.CMDC.Tool.Script.Template', output_schema).
  examples() -> 'Elixir.CMDC.Tool.Script.Gen':examples('Elixir.CMDC.Tool.Script',
      'Elixir.CMDC.Tool.Script.Template').
  """

  defmodule Forms do
    @moduledoc false
    # Erlang source text to a BEAM binary: at build time for the template, at run time only
    # for a module the template cannot serve.
    def compile(source, module) do
      {:ok, tokens, _} = :erl_scan.string(String.to_charlist(source))

      forms =
        tokens
        |> Enum.chunk_while(
          [],
          fn
            {:dot, _} = dot, acc -> {:cont, Enum.reverse([dot | acc]), []}
            token, acc -> {:cont, [token | acc]}
          end,
          fn acc -> {:cont, acc} end
        )
        |> Enum.map(fn form_tokens ->
          {:ok, form} = :erl_parse.parse_form(form_tokens)
          form
        end)

      {:ok, ^module, binary} = :compile.forms(forms, [:binary, :return_errors])
      binary
    end
  end

  # The template, compiled with the library: loading script tools never starts the Erlang
  # compiler (its first use costs a VM hundreds of milliseconds of start-up).
  @template_beam Forms.compile(@source, @template)

  @doc false
  def define(module, data, owner), do: define_many([{module, data}], owner)

  @doc false
  # Defines many tool modules with one code-loading commit (each commit waits for every
  # scheduler, so loading 200 modules one by one costs far more than loading them together).
  def define_many(defs, owner) do
    stale =
      defs
      |> Enum.reverse()
      |> Enum.uniq_by(&elem(&1, 0))
      |> Enum.flat_map(fn {module, data} ->
        key = {owner, module}
        stamp = :"cmdc_stamp_#{Integer.to_string(:erlang.phash2(data, 4_294_967_296), 36)}"

        case :persistent_term.get(key, nil) do
          ^data -> :ok
          _ -> :persistent_term.put(key, data)
        end

        if :erlang.module_loaded(module) and function_exported?(module, :__stamp__, 0) and
             module.__stamp__() == stamp do
          []
        else
          [{module, stamp}]
        end
      end)

    load_all(stale, owner)
  end

  @doc false
  # The optional callbacks of `CMDC.Tool.Structured` (title, annotations, output schema): the
  # tool data's field, or nil when the owner's data has none.
  def optional(owner, module, key) do
    case :persistent_term.get({owner, module}, nil) do
      %{} = data -> Map.get(data, key)
      nil -> if function_exported?(owner, :__optional__, 2), do: owner.__optional__(module, key)
    end
  end

  @doc false
  # `c:CMDC.Tool.examples/0`: the tool data's examples (a docstring's Examples section), `[]`
  # when it has none.
  def examples(owner, module), do: optional(owner, module, :examples) || []

  @doc false
  # Loads copies of the template that keep no data under `{owner, module}`: their owner keeps
  # it elsewhere and exports `__optional__/2` for the optional callbacks (the reusable slots of
  # `CMDC.Tool.MCP.Slots`). One code-loading commit for the list.
  def load_bare(modules, owner), do: load_all(Enum.map(modules, &{&1, :cmdc_stamp_bare}), owner)

  @doc false
  def undefine(module, owner) do
    :code.purge(module)
    :code.delete(module)
    :code.purge(module)
    :persistent_term.erase({owner, module})
    :ok
  end

  defp load_all([], _owner), do: :ok

  defp load_all(stale, owner) do
    binaries =
      Enum.map(stale, fn {module, stamp} ->
        # old code of an earlier version would make loading fail: drop it first
        if :erlang.module_loaded(module), do: :code.purge(module)

        binary =
          with {:ok, template} <- template(),
               {:ok, patched} <-
                 patch(template, %{@template => module, @stamp => stamp, @owner => owner}) do
            patched
          else
            _ -> compile(module, stamp, owner)
          end

        {module, ~c"cmdc_tool_script", binary}
      end)

    case :code.atomic_load(binaries) do
      :ok ->
        :ok

      {:error, _} ->
        # one by one, compiling any binary the loader refused
        Enum.each(binaries, fn {module, file, binary} ->
          case :code.load_binary(module, file, binary) do
            {:module, ^module} ->
              :ok

            {:error, _} ->
              {module, stamp} = List.keyfind(stale, module, 0)
              :code.purge(module)
              {:module, ^module} = :code.load_binary(module, file, compile(module, stamp, owner))
          end
        end)
    end
  end

  defp template, do: {:ok, @template_beam}

  defp compile(module, stamp, owner) do
    @source
    |> String.replace("'Elixir.CMDC.Tool.Script.Template'", "'#{module}'")
    |> String.replace("'Elixir.CMDC.Tool.Script':", "'#{owner}':")
    |> String.replace("('Elixir.CMDC.Tool.Script',", "('#{owner}',")
    |> String.replace("cmdc_stamp_template", "'#{stamp}'")
    |> Forms.compile(module)
  end

  # Renames atoms in the atom table (chunk "AtU8" with one length byte per atom).
  @doc false
  def patch(<<"FOR1", _size::32, "BEAM", rest::binary>>, renames) do
    with {:ok, chunks} <- chunks(rest, []),
         {:ok, chunks} <- rename(chunks, renames) do
      body = IO.iodata_to_binary(Enum.map(chunks, &encode_chunk/1))
      {:ok, <<"FOR1", byte_size(body) + 4::32, "BEAM", body::binary>>}
    end
  end

  def patch(_, _), do: :error

  defp chunks(<<>>, acc), do: {:ok, Enum.reverse(acc)}

  defp chunks(<<id::binary-4, size::32, data::binary-size(size), rest::binary>>, acc) do
    pad = rem(4 - rem(size, 4), 4)

    case rest do
      <<_::binary-size(pad), rest::binary>> -> chunks(rest, [{id, data} | acc])
      _ -> :error
    end
  end

  defp chunks(_, _), do: :error

  defp rename(chunks, renames) do
    renames = Map.new(renames, fn {from, to} -> {Atom.to_string(from), Atom.to_string(to)} end)

    Enum.reduce_while(chunks, {:ok, []}, fn
      {"AtU8", <<count::signed-32, atoms::binary>>}, {:ok, acc} when count > 0 ->
        case read_atoms(atoms, count, []) do
          {:ok, names} ->
            names = Enum.map(names, &Map.get(renames, &1, &1))

            if Enum.all?(names, &(byte_size(&1) < 256)) do
              data = [<<count::32>> | Enum.map(names, &<<byte_size(&1)::8, &1::binary>>)]
              {:cont, {:ok, [{"AtU8", IO.iodata_to_binary(data)} | acc]}}
            else
              {:halt, :error}
            end

          :error ->
            {:halt, :error}
        end

      {"AtU8", _}, _ ->
        {:halt, :error}

      chunk, {:ok, acc} ->
        {:cont, {:ok, [chunk | acc]}}
    end)
    |> case do
      {:ok, acc} -> {:ok, Enum.reverse(acc)}
      :error -> :error
    end
  end

  defp read_atoms(rest, 0, acc), do: if(rest == <<>>, do: {:ok, Enum.reverse(acc)}, else: :error)

  defp read_atoms(<<len::8, name::binary-size(len), rest::binary>>, n, acc),
    do: read_atoms(rest, n - 1, [name | acc])

  defp read_atoms(_, _, _), do: :error

  defp encode_chunk({id, data}) do
    size = byte_size(data)
    pad = rem(4 - rem(size, 4), 4)
    [id, <<size::32>>, data, :binary.copy(<<0>>, pad)]
  end
end
