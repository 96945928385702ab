#!/usr/bin/env bash
# Ledger client throughput and latency (E=3, Qw=2, Qa=2 over four bookie
# processes, 1 KiB entries, fsync on) at full and half load, with the
# disk's raw write+fsync limit measured in the same run (docs/perf.md).
#   bench/ledger.sh [ledgerbench flags, e.g. -n 100000 -window 1024]
set -euo pipefail
cd "$(dirname "$0")/.."
go build -o bin/strata ./cmd/strata
go run ./bench/ledgerbench -strata bin/strata "$@"
