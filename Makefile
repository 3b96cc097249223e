# cmdc_tool: `make demo` and `make test` do all set-up on a fresh machine.
.PHONY: all setup build demo test test-rust test-elixir rust-checks lint lint-format lint-compile lint-rust fmt bench clean

all: build

setup:
	@bash scripts/setup.sh

build: setup
	mix compile

demo: setup
	mix compile
	@echo; echo "== mix cmdc.tools list: the tools found, and what could not be loaded =="
	mix cmdc.tools list --examples
	@echo; echo "== mix cmdc.tools schema --format anthropic: what a model request carries =="
	mix cmdc.tools schema --format anthropic --examples
	@echo; echo "== a valid call of an Elixir tool, streaming partial results =="
	mix cmdc.tools call --examples countdown '{"n": 3, "delay_ms": 200}'
	@echo; echo "== a valid call of a Python script tool (examples/tools/text_tools.py) =="
	mix cmdc.tools call --examples count_slowly '{"n": 3, "delay_ms": 200}'
	@echo; echo "== an invalid call: the error result the model gets =="
	-mix cmdc.tools call --examples read_file '{"path": 42, "limit": 0}'
	@echo; echo "== the library API from Elixir: define, describe, validate =="
	mix run examples/demo.exs

lint: lint-format lint-compile lint-rust

lint-format: setup
	cargo fmt --all --check
	mix format --check-formatted

# Also the build the ExUnit suite runs on (the NIF with its testing feature, then every module).
lint-compile: setup
	MIX_ENV=test mix compile --warnings-as-errors --force
	@# Elixir files depend on each other one way, as native/cmdc_tool_core/tests/layers.rs checks for Rust.
	@# On the test build just made (MIX_ENV=dev would build the default-feature NIF and every
	@# module again: 3.5 min of a loaded make test).
	MIX_ENV=test mix xref graph --format cycles --fail-above 0

CLIPPY = cargo clippy --workspace --all-targets -- -D warnings
CLIPPY_TESTING = cargo clippy -p cmdc_tool_nif --all-targets --features testing -- -D warnings

lint-rust: setup
	$(CLIPPY)
	$(CLIPPY_TESTING)

test-rust: setup
	cargo test --workspace

test-elixir: setup
	MIX_ENV=test mix test

# The Rust checks (CPU-bound) run beside the ExUnit suite, which mostly waits on the programs,
# servers and VMs it starts: on 2 cores that saves their wall time. Each side's output is
# printed whole when it ends.
test: lint-format lint-compile
	$(MAKE) --no-print-directory -j2 --output-sync=target rust-checks test-elixir

# One after the other: the other job slot is the ExUnit suite's. (MAKEFLAGS emptied: cargo would
# look for make's job server, whose descriptors a recipe does not get.)
rust-checks: setup
	MAKEFLAGS= $(CLIPPY)
	MAKEFLAGS= $(CLIPPY_TESTING)
	MAKEFLAGS= cargo test --workspace

fmt:
	cargo fmt --all
	mix format

bench: setup
	for b in bench/*.exs; do MIX_ENV=bench mix run $$b || exit 1; done

clean:
	mix clean
	cargo clean
