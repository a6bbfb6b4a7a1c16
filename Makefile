# The two commands of the README: `make run` and `make test`. Everything else is optional.
CARGO ?= cargo

.PHONY: run test bench-text fmt

## Replay the bundled sample through the text core and show what would be indexed.
run:
	$(CARGO) run --release --locked -p casement-indexer -- dry-run $(INPUT)

## Formatting check, clippy with warnings denied, and every test of the workspace.
test:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings
	$(CARGO) test --workspace --locked

## Embedding work of sentence diffing vs chunk-hash vs whole-document re-embedding over the
## 18F Handbook history (needs ../shared/data); writes target/bench/text.json.
bench-text:
	$(CARGO) bench --locked -p casement-text --bench text_replay

fmt:
	$(CARGO) fmt --all
