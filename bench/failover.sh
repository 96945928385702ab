#!/usr/bin/env bash
# Topic failover and forwarding (issue 7, docs/perf.md): one region of
# real `strata node` processes (3 brokers, 4 bookies, E3/Qw2/Qa2, default
# lease settings); -runs times a stream's owner is SIGKILLed while a
# publisher and a consumer work through another broker; then throughput
# through the owner vs through a forwarding broker.
#   bench/failover.sh [failoverbench flags, e.g. -runs 20 -msgs 100000 -size 128 -keep]
set -euo pipefail
cd "$(dirname "$0")/.."
go build -o bin/strata ./cmd/strata
go run ./bench/failoverbench -strata bin/strata "$@"
