#!/usr/bin/env bash
# `strata audit` of one replicated topic of N small messages (issue 26,
# docs/perf.md "Audit"): a two-region `strata up`, N messages of 16 bytes
# published in east and replicated to west, then the audit run RUNS times
# (--watch 0): wall time and bytes the audit received.
#   bench/audit.sh [auditbench flags, e.g. -n 1000000 -runs 3]
set -euo pipefail
cd "$(dirname "$0")/.."
go build -o bin/strata ./cmd/strata
go run ./bench/auditbench -strata bin/strata -topology bench/audit-topology.yaml "$@"
