defmodule CMDC.Tool.Native.Build do
  @moduledoc false
  # Which native library this Mix environment's build installs (the native compiler in
  # mix.exs), fixed when this module compiles. `CMDC.Tool.Native` reads it at compile time, so
  # it is recompiled whenever this module is.
  #
  # `__mix_recompile__?/0` lives here, not in `CMDC.Tool.Native`: to ask it, Mix loads the
  # module from the previous build before compiling anything, and loading `CMDC.Tool.Native`
  # runs its `@on_load`, which would load the library the native compiler has just installed
  # against the previous build's stubs (`bad_lib: Function not found …` for every NIF added
  # since). This module loads nothing.

  @features Mix.Tasks.Compile.CmdcNative.features()

  @doc false
  def features, do: @features

  @doc false
  def library, do: Mix.Tasks.Compile.CmdcNative.library(@features)

  @doc false
  # Recompiled (and `CMDC.Tool.Native` with it) when CMDC_NIF_TESTING or CMDC_TOOL_EMBEDDER
  # changes what the native compiler builds.
  def __mix_recompile__?, do: Mix.Tasks.Compile.CmdcNative.features() != @features
end
