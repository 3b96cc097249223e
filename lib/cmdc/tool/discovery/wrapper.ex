defmodule CMDC.Tool.Discovery.Wrapper do
  @moduledoc """
  Generates the small modules that serve a discovered tool renamed or re-described by its
  metadata: each delegates to the original module (`__discovery_target__/0` names it).
  """

  @doc """
  A module serving `module` under `name` and, when not `nil`, `description`; created once per
  module version, name and description.
  """
  @spec wrap(module(), String.t(), String.t() | nil) :: module()
  def wrap(module, name, description) do
    hash =
      :erlang.phash2({module, module.module_info(:md5), name, description}, 4_294_967_296)
      |> Integer.to_string(16)

    wrapper = Module.concat([CMDC.Tool.Discovery.Wrapped, "#{name}_#{hash}"])

    unless Code.ensure_loaded?(wrapper) do
      Module.create(wrapper, wrapper_body(module, name, description), Macro.Env.location(__ENV__))
    end

    wrapper
  end

  defp wrapper_body(module, name, description) do
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
      @doc false
      def __discovery_target__, do: unquote(module)
    end
  end
end
