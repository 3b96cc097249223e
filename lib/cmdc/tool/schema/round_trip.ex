defmodule CMDC.Tool.RoundTrip do
  @moduledoc """
  Strict mode's round trip: what a strict schema told the model to send is accepted, and the
  tool receives what its *original* schema means.

  OpenAI strict mode makes every optional property required and nullable, so the model sends
  `null` for each one it leaves out (`{"city": "Oslo", "days": null}`). The strict rewrite
  records where it did that; when a call fails validation against the original schema, those
  nulls are dropped (the keys become absent, at any depth: nested objects, array items,
  `$defs`) and the call is validated again. A `null` the original schema accepts is never
  dropped, and a call valid as it is stays as it is, so non-strict calls behave as before
  (except that an optional `null` the original refuses is now read as "absent").

  Providers with a narrower tool-name rule than the registry's get mapped names (`fs.read` →
  `fs_read`, see `CMDC.Tool.Providers`); `original_name/2` maps a model's name back.

      iex> schema = CMDC.Tool.Schema.compile!(%{
      ...>   "type" => "object",
      ...>   "properties" => %{"city" => %{"type" => "string"}, "days" => %{"type" => "integer"}},
      ...>   "required" => ["city"]
      ...> })
      iex> CMDC.Tool.RoundTrip.validate(schema, %{"city" => "Oslo", "days" => nil})
      {:ok, %{"city" => "Oslo"}}
  """

  alias CMDC.Tool.{Native, Schema}

  @doc "`CMDC.Tool.Schema.validate/2`, accepting what the schema's strict form asks for."
  @spec validate(Schema.t(), term()) :: {:ok, term()} | {:error, [Schema.error()]}
  defdelegate validate(schema, args), to: Schema, as: :strict

  @doc "`CMDC.Tool.Schema.validate_json/2`, accepting what the schema's strict form asks for."
  @spec validate_json(Schema.t(), term()) :: {:ok, term()} | {:error, [Schema.error()]}
  defdelegate validate_json(schema, text), to: Schema, as: :strict_json

  @doc """
  After `errors` from validating `args` against `schema`: drops the nulls strict mode
  introduced and validates again. `{:ok, args_without_them}`, or `{:error, errors}` unchanged.
  """
  @spec retry(Schema.t(), term(), [Schema.error()]) ::
          {:ok, term()} | {:error, [Schema.error()]}
  defdelegate retry(schema, args, errors), to: Schema, as: :strict_retry

  @doc """
  The registered name a model meant by `called`: `called` when it is registered, else the one
  name a provider was given as `called` (`{:ok, name}`), or `:error`.

      iex> CMDC.Tool.RoundTrip.original_name(["fs.read", "echo"], "fs_read")
      {:ok, "fs.read"}
      iex> CMDC.Tool.RoundTrip.original_name(["echo"], "fs_read")
      :error
  """
  @spec original_name([String.t()], String.t()) :: {:ok, String.t()} | :error
  def original_name(registered, called) when is_list(registered) and is_binary(called) do
    case Native.tool_name_original(registered, called) do
      nil -> :error
      name -> {:ok, name}
    end
  end

  @doc """
  `{:ok, name}` when `name` follows the one tool-name rule (the registry's), else
  `{:error, message}` saying what to change.

      iex> CMDC.Tool.RoundTrip.check_name("fs.read")
      {:ok, "fs.read"}
      iex> {:error, message} = CMDC.Tool.RoundTrip.check_name("")
      iex> is_binary(message)
      true
  """
  @spec check_name(String.t()) :: {:ok, String.t()} | {:error, String.t()}
  def check_name(name) when is_binary(name), do: Native.tool_name_check(name)

  @doc """
  The name the provider `format` is given for the tool `name` (`original_name/2` maps it back).
  Raises `ArgumentError` for an unknown format, as `CMDC.Tool.Providers` does.

      iex> CMDC.Tool.RoundTrip.name_for("fs.read", :openai)
      "fs_read"
      iex> CMDC.Tool.RoundTrip.name_for("fs.read", :gemini)
      "fs.read"
  """
  @spec name_for(String.t(), atom()) :: String.t()
  def name_for(name, format) when is_binary(name) do
    case Native.tool_name_for(name, format) do
      {:ok, given} -> given
      {:error, message} -> raise ArgumentError, message
    end
  end

  @doc """
  The name a provider format is given for `name`, as a tagged tuple (`name_for/2` raises
  instead).

      iex> CMDC.Tool.RoundTrip.provider_name("fs.read", :openai)
      {:ok, "fs_read"}
  """
  @spec provider_name(String.t(), atom()) :: {:ok, String.t()} | {:error, String.t()}
  def provider_name(name, format) when is_binary(name), do: Native.tool_name_for(name, format)
end
