#!/usr/bin/env python3
"""A PreToolUse hook in Claude Code's format (see docs/HOOKS.md).

Denies shell-like arguments that delete recursively, asks before writing outside the project,
and lets everything else through. Copy `settings.json` next to it into `.claude/` (or
`.cmdc/`) of a trusted project, or into `~/.claude/`.
"""
import json
import os
import sys

call = json.load(sys.stdin)
args = call.get("tool_input") or {}
text = json.dumps(args)

if "rm -rf" in text:
    # Exit 2: the call is refused; stderr is what the model reads.
    print("recursive deletes are not allowed here", file=sys.stderr)
    sys.exit(2)

path = args.get("path")
if isinstance(path, str) and os.path.isabs(path):
    project = os.environ.get("CMDC_PROJECT_DIR", os.getcwd())
    if not os.path.realpath(path).startswith(os.path.realpath(project) + os.sep):
        print(json.dumps({"hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "ask",
            "permissionDecisionReason": f"{path} is outside the project",
        }}))
