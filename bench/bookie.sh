#!/usr/bin/env bash
# Bookie throughput and latency, end to end, with the disk's raw
# write+fsync limit measured in the same run (see docs/perf.md).
#   bench/bookie.sh [bookiebench flags, e.g. -n 200000 -window 512 -rounds 3]
set -euo pipefail
cd "$(dirname "$0")/.."
go build -o bin/strata ./cmd/strata
go run ./bench/bookiebench -strata bin/strata "$@"
