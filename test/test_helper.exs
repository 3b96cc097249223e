# CI machines are small and busy: give messages time to arrive before failing a test.
ExUnit.start(assert_receive_timeout: 3_000)
