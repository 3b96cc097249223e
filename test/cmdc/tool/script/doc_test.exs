defmodule CMDC.Tool.ScriptDocTest do
  use ExUnit.Case, async: true
  doctest CMDC.Tool.Script
end
