#!/usr/bin/env bash
# Installs what cmdc_tool needs to build and test on a fresh Debian machine: Elixir and the
# Erlang headers (apt), when they are missing. Rust (cargo) is expected on PATH.
set -euo pipefail

need_apt=()
command -v mix >/dev/null 2>&1 || need_apt+=(elixir)
if ! command -v erl >/dev/null 2>&1 || [ -z "$(ls /usr/lib/erlang/usr/include/erl_nif.h 2>/dev/null)" ]; then
  need_apt+=(erlang-dev)
fi

if [ ${#need_apt[@]} -gt 0 ]; then
  echo "==> installing ${need_apt[*]} with apt-get"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq elixir erlang-dev >/dev/null
fi

command -v cargo >/dev/null 2>&1 || {
  echo "cargo not found: install Rust (https://rustup.rs) and run again" >&2
  exit 1
}

# hex.pm is unreachable and the project needs nothing from it; make sure mix never asks.
export MIX_ENV="${MIX_ENV:-dev}"
echo "==> toolchain: $(elixir --version | tail -n 1), $(cargo --version)"
