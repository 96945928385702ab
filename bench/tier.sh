#!/usr/bin/env bash
# Tiered reads vs bookie reads (issue 9): a topic read sequentially from
# its earliest message from three bookie processes, then from each tier
# (a directory; an in-process S3-compatible server over HTTP) after its
# ledgers were offloaded and their bookie copies deleted, with a cold
# tiered read's first-message latency (docs/perf.md).
#   bench/tier.sh [tierbench flags, e.g. -n 200000 -size 1024]
set -euo pipefail
cd "$(dirname "$0")/.."
go build -o bin/strata ./cmd/strata
go run ./bench/tierbench -strata bin/strata "$@"
