# cmdc_tool's PowerShell runner: one call per process (pwsh -NoProfile -File cmdc_runner.ps1).
# Reads {"script": path, "fn": name, "args": {...}} as JSON on stdin, dot-sources the script, calls
# the function with the arguments splatted, applies Format-<Name> when the script defines one, and
# writes one line "\u001eCMDC_RESULT {json}" (or "\u001eCMDC_ERROR {json}") on stdout.
# NOTE: written without pwsh at hand (it cannot be installed where this library is built), so it
# is untested; the Rust side treats any other output as the script's log.
$ErrorActionPreference = 'Stop'
[Console]::OutputEncoding = [System.Text.Encoding]::UTF8
$mark = [char]0x1e
try {
    $request = [Console]::In.ReadToEnd() | ConvertFrom-Json -AsHashtable
    $script = $request['script']
    $name = $request['fn']
    $params = $request['args']
    if ($null -eq $params) { $params = @{} }
    Set-Location -LiteralPath (Split-Path -Parent $script)
    . $script *> $null
    $log = & $name @params 6>&1 5>&1 4>&1 3>&1 2>&1 | Tee-Object -Variable all | Out-Null
    $value = @($all | Where-Object { $_ -isnot [System.Management.Automation.InformationRecord] -and $_ -isnot [System.Management.Automation.ErrorRecord] -and $_ -isnot [System.Management.Automation.WarningRecord] -and $_ -isnot [System.Management.Automation.VerboseRecord] -and $_ -isnot [System.Management.Automation.DebugRecord] })
    if ($value.Count -eq 1) { $value = $value[0] } elseif ($value.Count -eq 0) { $value = $null }
    $reply = @{ value = $value; log = (($all | Where-Object { $_ -is [System.Management.Automation.InformationRecord] }) -join "`n") }
    $formatter = Get-Command -Name "Format-$name" -CommandType Function -ErrorAction SilentlyContinue
    if ($formatter) { $reply['text'] = [string](& $formatter $value $params) }
    Write-Output ("$mark" + 'CMDC_RESULT ' + ($reply | ConvertTo-Json -Depth 32 -Compress))
} catch {
    $err = @{ kind = 'exception'; message = $_.Exception.Message; log = ($_ | Out-String) }
    Write-Output ("$mark" + 'CMDC_ERROR ' + ($err | ConvertTo-Json -Compress))
}
