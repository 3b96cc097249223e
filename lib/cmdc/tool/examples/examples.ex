defmodule CMDC.Tool.Examples do
  @moduledoc """
  Small real tools bundled with the library: used by the docs, the demo and the tests.
  """

  defmodule Echo do
    @moduledoc "Echoes its `text` argument: the smallest possible tool."
    @behaviour CMDC.Tool

    @impl true
    def name, do: "echo"

    @impl true
    def description, do: "Echo the given text back."

    @impl true
    def parameters do
      %{
        "type" => "object",
        "properties" => %{"text" => %{"type" => "string", "description" => "Text to echo"}},
        "required" => ["text"]
      }
    end

    @impl true
    def execute(%{"text" => text}, _context), do: {:ok, text}
  end

  defmodule ReadFile do
    @moduledoc "Reads a UTF-8 text file under the context's working directory."
    @behaviour CMDC.Tool

    @impl true
    def name, do: "read_file"

    @impl true
    def description, do: "Read a UTF-8 text file under the working directory."

    @impl true
    def description(%{working_dir: dir}), do: "Read a UTF-8 text file under #{dir}."
    def description(_context), do: description()

    @impl true
    def parameters do
      %{
        "type" => "object",
        "properties" => %{
          "path" => %{"type" => "string", "description" => "Path relative to the working dir"},
          "limit" => %{
            "type" => "integer",
            "minimum" => 1,
            "description" => "Read at most this many lines"
          }
        },
        "required" => ["path"],
        "additionalProperties" => false
      }
    end

    @impl true
    def meta(%{"path" => path}), do: "read #{path}"

    @impl true
    def execute(%{"path" => path} = args, context) do
      root = Path.expand(context.working_dir || File.cwd!())
      full = Path.expand(path, root)

      cond do
        full != root and not String.starts_with?(full, root <> "/") ->
          {:error, "#{path} is outside the working directory #{root}"}

        true ->
          read(full, path, args["limit"])
      end
    end

    defp read(full, path, limit) do
      case File.read(full) do
        {:ok, text} ->
          if String.valid?(text),
            do: {:ok, take_lines(text, limit)},
            else: {:error, "#{path} is not UTF-8 text"}

        {:error, reason} ->
          {:error, "cannot read #{path}: #{:file.format_error(reason)}"}
      end
    end

    defp take_lines(text, nil), do: text

    defp take_lines(text, limit) do
      text |> String.split("\n") |> Enum.take(limit) |> Enum.join("\n")
    end
  end

  defmodule Countdown do
    @moduledoc "Counts down, streaming each step as a partial result: shows streaming and cancellation."
    @behaviour CMDC.Tool

    @impl true
    def name, do: "countdown"

    @impl true
    def description,
      do: "Count down from n to zero, one step every delay_ms, reporting each step."

    @impl true
    def parameters do
      %{
        "type" => "object",
        "properties" => %{
          "n" => %{"type" => "integer", "minimum" => 0, "maximum" => 1000},
          "delay_ms" => %{
            "type" => "integer",
            "minimum" => 0,
            "maximum" => 60_000,
            "default" => 100
          }
        },
        "required" => ["n"],
        "additionalProperties" => false
      }
    end

    @impl true
    def meta(%{"n" => n}), do: "count down from #{n}"

    @impl true
    def execute(%{"n" => n} = args, ctx) do
      delay = Map.get(args, "delay_ms", 100)

      for i <- n..1//-1 do
        CMDC.Context.update(ctx, "#{i}...")
        Process.sleep(delay)
      end

      {:ok, "liftoff after #{n} steps"}
    end
  end
end
