"""Drives cmdc_tool's stdio server through its end of life, as a client would, with raw frames.

Usage: python mcp_lifecycle.py MODE TOOL PID_FILE SERVER_COMMAND [ARGS...]
  MODE eof:  start a call of TOOL (arguments {"pid_file": PID_FILE}), wait until the tool wrote
             the pid file, close the server's stdin, and time how long the server takes to exit.
  MODE kill: the same, then SIGKILL the server (the VM) instead.
Prints one JSON object: exit_ms, server_pid, pids (the ids in PID_FILE), stdout_lines (every line
the server wrote on stdout), stdout_json (whether each was a JSON-RPC message).
"""
import json
import os
import signal
import subprocess
import sys
import time


def frame(msg):
    return (json.dumps(msg) + "\n").encode()


def main():
    mode, tool, pid_file, *command = sys.argv[1:]
    server = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    server.stdin.write(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}))
    server.stdin.write(frame({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    call = {"name": tool, "arguments": {"pid_file": pid_file}}
    server.stdin.write(frame({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}))
    server.stdin.flush()

    deadline = time.monotonic() + 120
    while not os.path.exists(pid_file):
        if time.monotonic() > deadline or server.poll() is not None:
            print(json.dumps({"error": "the tool never started"}))
            sys.exit(1)
        time.sleep(0.02)

    started = time.monotonic()
    if mode == "eof":
        server.stdin.close()
    else:
        os.kill(server.pid, signal.SIGKILL)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
    exit_ms = round((time.monotonic() - started) * 1000, 1)
    lines = server.stdout.read().decode().splitlines()

    def is_message(line):
        try:
            return json.loads(line).get("jsonrpc") == "2.0"
        except ValueError:
            return False

    with open(pid_file) as f:
        pids = [int(p) for p in f.read().split()]
    print(json.dumps({
        "exit_ms": exit_ms,
        "server_pid": server.pid,
        "pids": pids,
        "stdout_lines": lines,
        "stdout_json": [is_message(line) for line in lines],
    }))


if __name__ == "__main__":
    main()
