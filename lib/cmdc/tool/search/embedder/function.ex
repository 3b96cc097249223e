defmodule CMDC.Tool.Search.Embedder.Function do
  @moduledoc false
  # `CMDC.Tool.Search.Embedder.function/2`'s embedder: the state holds the function and its id.
  # The callbacks of `CMDC.Tool.Search.Embedder` (not declared with `@behaviour`: that module
  # names this one, and the reference back would be an xref cycle).

  def id(%{id: id}), do: id

  def embed(%{fun: fun}, texts), do: fun.(texts)
end
