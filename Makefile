# cmdc_tool: `make demo` and `make test` do all set-up on a fresh machine.
.PHONY: all setup build demo test test-rust test-elixir lint fmt bench clean

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

lint: setup
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings
	cargo clippy -p cmdc_tool_nif --all-targets --features testing -- -D warnings
	mix format --check-formatted
	MIX_ENV=test mix compile --warnings-as-errors --force
	@# Elixir files depend on each other one way, as native/cmdc_tool_core/tests/layers.rs checks for Rust.
	mix xref graph --format cycles --fail-above 0

test-rust: setup
	cargo test --workspace

test-elixir: setup
	MIX_ENV=test mix test

test: lint test-rust test-elixir

fmt:
	cargo fmt --all
	mix format

bench: setup
	for b in bench/*.exs; do MIX_ENV=bench mix run $$b || exit 1; done

clean:
	mix clean
	cargo clean
