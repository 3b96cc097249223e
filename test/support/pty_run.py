"""Runs a command on a pseudo-terminal, answering each "[y/N]" prompt with the next answer.

    python3 pty_run.py ANSWERS COMMAND...    # ANSWERS: comma-separated, e.g. "y,n"

Prints what the terminal showed, then "EXIT=<status>".
"""
import os
import pty
import select
import sys
import time

answers = [a for a in sys.argv[1].split(",") if a]
cmd = sys.argv[2:]
pid, fd = pty.fork()
if pid == 0:
    os.execvp(cmd[0], cmd)
out = b""
asked = 0
deadline = time.time() + 240
while time.time() < deadline:
    ready, _, _ = select.select([fd], [], [], 0.5)
    if fd not in ready:
        continue
    try:
        chunk = os.read(fd, 4096)
    except OSError:
        break
    if not chunk:
        break
    out += chunk
    while out.count(b"[y/N]") > asked:
        answer = answers[asked] if asked < len(answers) else ""
        os.write(fd, (answer + "\n").encode())
        asked += 1
_, status = os.waitpid(pid, 0)
sys.stdout.write(out.decode("utf-8", "replace"))
sys.stdout.write("\nEXIT=%d\n" % (os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1))
