defmodule CMDC.Tool.Examples.EditFile do
  @moduledoc """
  Previews a text replacement in a file and leaves it pending (`CMDC.Tool.Pending`): the model
  reads the preview, then calls `resolve` with the id to `apply` (the file is written, if it has
  not changed since the preview) or `discard` it. Hooks and approvals apply to the `resolve`
  call like to any call (a `PreToolUse` hook matching `resolve` sees the preview in
  `pending_action`).

      iex> dir = Path.join(System.tmp_dir!(), "edit_doc_#{System.unique_integer([:positive])}")
      iex> File.mkdir_p!(dir) && File.write!(Path.join(dir, "a.txt"), "hello world\\n")
      iex> ctx = %CMDC.Context{session_id: "edit-doc", working_dir: dir}
      iex> tools = [CMDC.Tool.Examples.EditFile]
      iex> call = %{id: "1", name: "edit_file", arguments: %{"path" => "a.txt", "old_text" => "world", "new_text" => "there"}}
      iex> preview = CMDC.Tool.Runner.run(tools, call, ctx).content
      iex> preview =~ "- hello world\\n+ hello there"
      true
      iex> [%{id: id}] = CMDC.Tool.Pending.list("edit-doc")
      iex> CMDC.Tool.Runner.run(tools, %{id: "2", name: "resolve", arguments: %{"id" => id, "action" => "apply"}}, ctx).content
      "a.txt: 1 replacement written"
      iex> File.read!(Path.join(dir, "a.txt"))
      "hello there\\n"
  """
  @behaviour CMDC.Tool

  @impl true
  def name, do: "edit_file"

  @impl true
  def description,
    do:
      "Replace old_text with new_text in a file under the working directory. Shows a preview " <>
        "first: nothing is written until you call resolve with the preview's id."

  @impl true
  def parameters do
    %{
      "type" => "object",
      "properties" => %{
        "path" => %{"type" => "string", "description" => "Path relative to the working dir"},
        "old_text" => %{
          "type" => "string",
          "minLength" => 1,
          "description" => "Exact text to replace (once)"
        },
        "new_text" => %{"type" => "string", "description" => "Replacement"}
      },
      "required" => ["path", "old_text", "new_text"],
      "additionalProperties" => false
    }
  end

  @impl true
  def execute(%{"path" => rel, "old_text" => old, "new_text" => new}, ctx) do
    path = Path.expand(rel, ctx.working_dir || File.cwd!())

    with {:ok, text} <- read(path, rel),
         :ok <- once(text, old, rel),
         edited = String.replace(text, old, new, global: false),
         {:ok, id} <- push(ctx, rel, path, text, edited) do
      {:ok,
       "Preview of the edit to #{rel} (pending action #{id}):\n#{diff(text, edited)}\n" <>
         "Call resolve with id #{id} and action \"apply\" to write it, or \"discard\"."}
    end
  end

  defp read(path, rel) do
    case File.read(path) do
      {:ok, text} -> {:ok, text}
      {:error, reason} -> {:error, "#{rel}: #{:file.format_error(reason)}"}
    end
  end

  defp once(text, old, rel) do
    case length(String.split(text, old)) - 1 do
      1 -> :ok
      0 -> {:error, "#{rel}: old_text was not found"}
      n -> {:error, "#{rel}: old_text occurs #{n} times; give more context so it is unique"}
    end
  end

  defp push(ctx, rel, path, before, edited) do
    CMDC.Context.push_pending_action(ctx,
      label: "edit #{rel}",
      details: diff(before, edited),
      tool: name(),
      apply: fn _ctx ->
        # Written only if nobody changed the file since the preview.
        case File.read(path) do
          {:ok, ^before} ->
            File.write!(path, edited)
            {:ok, "#{rel}: 1 replacement written"}

          {:ok, _} ->
            {:error, "#{rel} changed since the preview: not written; preview the edit again"}

          {:error, reason} ->
            {:error, "#{rel}: #{:file.format_error(reason)}"}
        end
      end
    )
  end

  # The lines that differ, as `- old` / `+ new` (the edit is one replacement, so one hunk).
  defp diff(before, edited) do
    a = String.split(before, "\n")
    b = String.split(edited, "\n")
    prefix = common(a, b)
    suffix = common(Enum.reverse(Enum.drop(a, prefix)), Enum.reverse(Enum.drop(b, prefix)))
    removed = a |> Enum.drop(prefix) |> Enum.drop(-suffix)
    added = b |> Enum.drop(prefix) |> Enum.drop(-suffix)

    Enum.map_join(removed, "\n", &("- " <> &1)) <>
      "\n" <> Enum.map_join(added, "\n", &("+ " <> &1))
  end

  defp common([x | a], [x | b]), do: 1 + common(a, b)
  defp common(_, _), do: 0
end
