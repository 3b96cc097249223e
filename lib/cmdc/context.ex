defmodule CMDC.Context do
  @moduledoc """
  The full execution context handed to `c:CMDC.Tool.execute/2`.

  Fields:
    * `:session_id` - the agent session the call belongs to.
    * `:working_dir` - the directory tools resolve relative paths against.
    * `:sandbox` - the sandbox policy or handle the agent runs tools under (opaque to tools).
    * `:shell` - the user's shell (`:bash`, `:zsh`, `:pwsh`, ...), for tools that build commands.
    * `:tool_call_id` - the id the model gave the call (set by the runner).
    * `:assigns` - free-form data the host application passes to its tools.
    * `:private` - room for what the runner adds (streaming, cancellation, approver); tools reach
      it through the functions of this module, never directly.

  `tool_context/1` derives the lightweight map `c:CMDC.Tool.description/1` receives.

      iex> ctx = %CMDC.Context{session_id: "s1", working_dir: "/tmp", shell: :bash}
      iex> CMDC.Context.tool_context(ctx)
      %{working_dir: "/tmp", shell: :bash}
  """

  @type t :: %__MODULE__{
          session_id: String.t() | nil,
          working_dir: String.t() | nil,
          sandbox: term(),
          shell: atom() | nil,
          tool_call_id: String.t() | nil,
          assigns: map(),
          private: map()
        }

  defstruct session_id: nil,
            working_dir: nil,
            sandbox: nil,
            shell: nil,
            tool_call_id: nil,
            assigns: %{},
            private: %{}

  @doc """
  Builds a context from a keyword list or map.

      iex> CMDC.Context.new(session_id: "s1").session_id
      "s1"
  """
  @spec new(keyword() | map()) :: t()
  def new(fields \\ []), do: struct!(__MODULE__, fields)

  @doc """
  The `t:CMDC.Tool.tool_context/0` for this context (only the keys that are set).

      iex> CMDC.Context.tool_context(%CMDC.Context{})
      %{}
  """
  @spec tool_context(t()) :: CMDC.Tool.tool_context()
  def tool_context(%__MODULE__{working_dir: dir, shell: shell}) do
    %{}
    |> put_if(:working_dir, dir)
    |> put_if(:shell, shell)
  end

  @doc """
  Sends a partial result (text or a details map) to whoever runs the tool; the caller receives
  partial results in order, before the final result. Outside a runner it does nothing.

      iex> CMDC.Context.update(%CMDC.Context{}, "50% done")
      :ok
  """
  @spec update(t(), String.t() | map()) :: :ok
  def update(%__MODULE__{private: %{update: fun}}, payload) when is_function(fun, 1) do
    fun.(payload)
    :ok
  end

  def update(%__MODULE__{}, _payload), do: :ok

  @doc """
  Asks the runner to abort the whole turn (the seeds' `ctx.abort()`): the call ends as an error
  result carrying `reason`, and `CMDC.Tool.Runner.run_many/4` cancels the calls still running.
  Does not return.
  """
  @spec abort(t(), term()) :: no_return()
  def abort(%__MODULE__{}, reason \\ :aborted), do: throw({:cmdc_tool_abort, reason})

  @doc """
  Registers a pending action (a preview the model applies or discards later with the `resolve`
  tool): `:label`, `:details`, `:apply` (`fn context -> {:ok, text} | {:error, text} end`),
  optional `:discard` (`fn reason -> any end`) and `:policy`. Returns `{:ok, id}` or
  `{:error, message}`. See `CMDC.Tool.Pending`.
  """
  @spec push_pending_action(t(), keyword() | map()) :: {:ok, String.t()} | {:error, String.t()}
  defdelegate push_pending_action(context, action), to: CMDC.Tool.Pending, as: :push

  defp put_if(map, _key, nil), do: map
  defp put_if(map, key, value), do: Map.put(map, key, value)
end
