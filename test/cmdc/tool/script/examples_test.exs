defmodule CMDC.Tool.ScriptExamplesTest do
  # A Python function's docstring Examples section, and a PowerShell function's `.EXAMPLE`
  # sections (read natively: no pwsh needed), become the tool's examples/0.
  use ExUnit.Case, async: true
  import CMDC.Tool.ScriptCase

  alias CMDC.Tool.Registry

  @script ~S'''
  def search(q: str, max: int = 10) -> str:
      """Search the web.

      Args:
          q: The query.
          max: How many results.

      Examples:
          >>> search("elixir nif")
          'results...'
          >>> search(q="rust",
          ...        max=3)
          {'q': 'rust'}

      Returns:
          The results.
      """
      return q


  def weather(city: str) -> str:
      """Weather for a city.

      Examples
      --------
      >>> weather(city="Paris")
      'sunny'

      Notes
      -----
      Cached for an hour.
      """
      return city


  def as_json(city: str, days: int = 1) -> str:
      """JSON examples.

      Examples:
          {"city": "Paris"}
          {"city": "Lyon", "days": 3}
      """
      return city


  def prose(x: int) -> int:
      """Doubles a number.

      Example:
          Call it with any integer.
      """
      return 2 * x
  '''

  test "Google, NumPy and JSON forms give examples/0; the section leaves the description" do
    dir = tmp_dir("examples")
    {_group, tools} = load!(write!(dir, "ex.py", @script))

    assert tools["search"].examples() == [%{"q" => "elixir nif"}, %{"q" => "rust", "max" => 3}]
    assert tools["search"].description() == "Search the web.\n\nReturns:\n    The results."
    assert tools["weather"].examples() == [%{"city" => "Paris"}]
    assert tools["weather"].description() =~ "Cached for an hour."
    refute tools["weather"].description() =~ "Examples"
    assert tools["as_json"].examples() == [%{"city" => "Paris"}, %{"city" => "Lyon", "days" => 3}]
    # Prose examples stay in the description; the tool has none.
    assert tools["prose"].examples() == []
    assert tools["prose"].description() =~ "Call it with any integer."

    reg = Registry.new()
    assert :ok = Registry.register(reg, Map.values(tools))
    by_name = Map.new(CMDC.Tool.to_schema(reg, %{}, format: :anthropic), &{&1["name"], &1})
    assert by_name["search"]["input_examples"] == tools["search"].examples()
    refute Map.has_key?(by_name["prose"], "input_examples")
    [chat] = CMDC.Tool.to_schema([tools["weather"]], %{}, format: :openai)
    assert chat["function"]["description"] =~ ~s(Examples:\n{"city":"Paris"})
  end

  test "the cached description keeps the examples" do
    dir = tmp_dir("examples_cache")
    path = write!(dir, "ex.py", @script)
    {_group, _tools} = load!(path)
    {group, tools} = load!(path)
    assert group.status == :cached
    assert tools["as_json"].examples() == [%{"city" => "Paris"}, %{"city" => "Lyon", "days" => 3}]
  end

  test "an example that does not match, or cannot be read, is an error naming the tool" do
    dir = tmp_dir("examples_bad")

    {_group, tools} =
      load!(
        write!(dir, "bad.py", ~S'''
        def wrong(days: int) -> str:
            """Wrong type.

            Examples:
                >>> wrong(days="three")
            """
            return ""


        def unreadable(days: int) -> str:
            """Not a literal.

            Examples:
                >>> unreadable(days=len("abc"))
            """
            return ""


        def fine(days: int) -> str:
            """Fine.

            Examples:
                >>> fine(2)
            """
            return ""
        ''')
      )

    reg = Registry.new()

    assert {:error, {:invalid_tool, _, message}} = Registry.register(reg, tools["wrong"])
    assert message =~ ~s(example 1 of tool "wrong" does not match its parameters: at /days)

    assert {:error, {:invalid_tool, _, message}} = Registry.register(reg, tools["unreadable"])
    assert message =~ ~s(example 1 of tool "unreadable" is not an object: "unreadable(days=len)

    # The others still register.
    assert :ok = Registry.register(reg, tools["fine"])
    assert tools["fine"].examples() == [%{"days" => 2}]
  end

  @ps1 ~S"""
  <#
  .SYNOPSIS
      Weather tools.
  #>

  function Get-Forecast {
      <#
      .SYNOPSIS
          The forecast for a city.
      .PARAMETER City
          The city.
      .EXAMPLE
          PS C:\> Get-Forecast -City 'New York' -Days 3
          Three days of New York's weather.
      .EXAMPLE
          Get-Forecast Paris -Metric
      .EXAMPLE
          Get-Forecast -City $env:CITY
      .EXAMPLE
          Shows the forecast, in prose.
      #>
      param(
          [Parameter(Mandatory = $true)][string]$City,
          [ValidateRange(1, 10)][int]$Days = 1,
          [switch]$Metric
      )
      "sunny"
  }

  function Get-Tide {
      <#
      .SYNOPSIS
          Tides of a port.
      .EXAMPLE
          Get-Tide -Port Brest -Days 30
      #>
      param([Parameter(Mandatory = $true)][string]$Port, [ValidateRange(1, 7)][int]$Days = 1)
      "high"
  }
  """

  test "PowerShell .EXAMPLE calls give examples/0; one out of range is an error naming the tool" do
    dir = tmp_dir("ps_examples")
    {group, tools} = load!(write!(dir, "weather.ps1", @ps1))
    assert group.kind == :powershell

    forecast = tools["Get-Forecast"]

    assert forecast.examples() == [
             %{"City" => "New York", "Days" => 3},
             %{"City" => "Paris", "Metric" => true}
           ]

    assert forecast.description() == "The forecast for a city."

    reg = Registry.new()
    assert :ok = Registry.register(reg, forecast)
    [tool] = CMDC.Tool.to_schema(reg, %{}, format: :anthropic)
    assert tool["input_examples"] == forecast.examples()

    assert {:error, {:invalid_tool, _, message}} = Registry.register(reg, tools["Get-Tide"])
    assert message =~ ~s(example 1 of tool "Get-Tide" does not match its parameters: at /Days)

    # The cache written by the first load keeps them.
    {group, tools} = load!(Path.join(dir, "weather.ps1"))
    assert group.status == :cached
    assert tools["Get-Forecast"].examples() == forecast.examples()
  end
end
