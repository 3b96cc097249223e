defmodule CMDC.Tool.Search.Embedder.Function do
  @moduledoc false
  # `CMDC.Tool.Search.Embedder.function/2`'s embedder: the state holds the function and its id.
  @behaviour CMDC.Tool.Search.Embedder

  @impl true
  def id(%{id: id}), do: id

  @impl true
  def embed(%{fun: fun}, texts), do: fun.(texts)
end
