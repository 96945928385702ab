#!/usr/bin/env bash
# Control plane (issue 23, docs/perf.md "Control plane (issue 23)"):
# three regions of real `strata node` processes on loopback (meta, 3
# bookies E2/Qw2/Qa2, 2 brokers each; one Serf WAN pool; admin auth off).
# Propagation p50/p90/p99/max of a policy PATCH in r1 until r2's and r3's
# brokers serve it; admin API req/s and latency on one broker (GET and
# PATCH policies, 16 keep-alive clients); `strata apply -f` of a file with
# 1,000 namespaces (skipped with a message if the binary has no apply) and
# the same 1,000 namespaces as direct PUTs, until r2 and r3 have them.
#   bench/config.sh [configbench flags, e.g. -n 200 -duration 10s -clients 16 -origins r1,r2 -out FILE -keep]
set -euo pipefail
cd "$(dirname "$0")/.."
go build -o bin/strata ./cmd/strata
go run ./bench/configbench -strata bin/strata "$@"
