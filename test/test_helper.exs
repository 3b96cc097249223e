# Deadlines only bound a hang (CMDC.Tool.Eventually): a machine busy with other builds makes a
# test slower, never red. So a message has 30 s to arrive and a test 5 minutes to finish; a test
# passes as soon as what it waits for happens.
# CMDC_TEST_TIMES=1 adds CMDC.Tool.TestTimes: the slowest modules and tests, printed at the end.
ExUnit.start(
  assert_receive_timeout: 30_000,
  timeout: 300_000,
  formatters: CMDC.Tool.TestTimes.formatters()
)

# MCP slot modules freed beyond the warm pool are purged in the background; each purge waits for
# a code barrier (~2 ms on an idle machine, far more under a test run's load). Purged at once
# here, so the thousands the MCP tests free are purged while the suite goes on, not left to the
# tests that wait for a settled pool (slots_test, hostile_test). Tests may set their own.
Application.put_env(:cmdc_tool, :mcp_slot_linger_ms, 0)
