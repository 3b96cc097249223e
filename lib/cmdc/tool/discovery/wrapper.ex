defmodule CMDC.Tool.Discovery.Wrapper do
  @moduledoc """
  Generates the small modules that serve a discovered tool renamed, re-described or given
  settings by its metadata: each delegates to the original module (`__discovery_target__/0`
  names it).

  The metadata's settings (`policy`, `timeout`, …) travel with the wrapper, layered over the
  original's own (`tool_options/0` or a script's `__tool_settings__/0`) as a registry's would
  be, so they hold in any tool list — the CLI's, the MCP server's, a plain list given to
  `CMDC.Tool.Runner` — not only in a registry filled by `CMDC.Tool.Discovery.load_into/2`.
  """

  @doc """
  A module serving `module` under `name` and, when not `nil`, `description`, and with the
  `display` given (`:title`, `:annotations`: `CMDC.Tool.Structured`'s callbacks; `:examples`:
  `c:CMDC.Tool.examples/0`; else the original's) and `settings` (the metadata's, string keys);
  created once per module version, name, description, display and settings.
  """
  @spec wrap(module(), String.t(), String.t() | nil, map(), map()) :: module()
  def wrap(module, name, description, display \\ %{}, settings \\ %{}) do
    hash =
      {module, module.module_info(:md5), name, description, display, settings}
      |> :erlang.phash2(4_294_967_296)
      |> Integer.to_string(16)

    wrapper = Module.concat([CMDC.Tool.Discovery.Wrapped, "#{name}_#{hash}"])

    unless Code.ensure_loaded?(wrapper) do
      body = wrapper_body(module, name, description, display, settings)
      Module.create(wrapper, body, Macro.Env.location(__ENV__))
    end

    wrapper
  end

  @doc """
  The settings a wrapper of `module` called `name` serves: the metadata's `settings` over the
  original's own, normalized as `CMDC.Tool.Runner.Settings.merge/3` does.
  """
  @spec settings(module(), String.t(), map()) :: map()
  def settings(module, name, settings),
    do: CMDC.Tool.Runner.Settings.merge(module, name, settings)

  defp wrapper_body(module, name, description, display, settings) do
    describe =
      if description do
        quote do
          @impl true
          def description, do: unquote(description)
        end
      else
        quote do
          @impl true
          def description, do: unquote(module).description()
        end
      end

    describe_in_context =
      if description == nil and function_exported?(module, :description, 1) do
        quote do
          @impl true
          def description(context), do: unquote(module).description(context)
        end
      end

    meta =
      if function_exported?(module, :meta, 1) do
        quote do
          @impl true
          def meta(args), do: unquote(module).meta(args)
        end
      end

    # The optional callbacks: the metadata's value, else the original's.
    optional =
      for fun <- [:title, :annotations, :output_schema, :examples] do
        cond do
          Map.has_key?(display, fun) ->
            quote do
              @impl true
              def unquote(fun)(), do: unquote(Macro.escape(display[fun]))
            end

          function_exported?(module, fun, 0) ->
            quote do
              @impl true
              def unquote(fun)(), do: unquote(module).unquote(fun)()
            end

          true ->
            nil
        end
      end

    quote do
      @moduledoc false
      @behaviour CMDC.Tool
      @impl true
      def name, do: unquote(name)
      unquote(describe)
      unquote(describe_in_context)
      @impl true
      def parameters, do: unquote(module).parameters()
      @impl true
      def execute(args, context), do: unquote(module).execute(args, context)
      unquote(meta)
      unquote_splicing(optional)
      @doc false
      def __tool_settings__,
        do:
          CMDC.Tool.Discovery.Wrapper.settings(
            unquote(module),
            unquote(name),
            unquote(Macro.escape(settings))
          )

      @doc false
      def __discovery_target__, do: unquote(module)
    end
  end
end
