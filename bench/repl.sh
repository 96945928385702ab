#!/usr/bin/env bash
# Geo-replication lag and throughput (issue 8, docs/perf.md): three
# regions of real `strata node` processes on loopback (meta, 3 bookies
# E2/Qw2/Qa2, 2 brokers each; one Serf WAN pool), namespace demo/geo
# replicated to all; 1 KiB JetStream publishes in us-east at 1k and 10k
# msgs/s and at saturation, core NATS subscribers in eu-west and ap-south
# measure each copy's lag (p50/p90/p99/max) and the delivered rate.
#   bench/repl.sh [replbench flags, e.g. -rates 1000,10000,max -duration 10s -size 1024 -out FILE -keep]
set -euo pipefail
cd "$(dirname "$0")/.."
go build -o bin/strata ./cmd/strata
go run ./bench/replbench -strata bin/strata "$@"
