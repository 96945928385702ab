#!/usr/bin/env bash
# `strata drill failover` benchmark (issue 26, docs/perf.md "DR drill"):
# RUNS drills per mode on the default mesh of `strata up`, cutting REGION
# (us-east) at LOAD for FOR each, and the p50 and max of RPO and RTO, the
# sum of lost messages and the catch-up p50 per mode.
#   bench/drill.sh [MODES="kill freeze"] [RUNS=5] [LOAD=100/s] [FOR=10s] [KEEP=1] [NETNS=1]
# NETNS=1 runs `strata up --netns` (root: each region in a network
# namespace of its own), which mode "partition" needs.
# Mode "hook-freeze" freezes the region with --cut-cmd/--heal-cmd
# (SIGSTOP/SIGCONT of its node processes from mesh.json) instead of the
# fault socket. Needs jq.
set -euo pipefail
cd "$(dirname "$0")/.."
MODES=${MODES:-"kill freeze"} RUNS=${RUNS:-5} LOAD=${LOAD:-100/s} FOR=${FOR:-10s} REGION=${REGION:-us-east}
work=$(mktemp -d /tmp/strata-drill.XXXXXX)
KEEP=${KEEP:-0}
source bench/lib.sh
trap cleanup EXIT
trap 'exit 130' INT TERM
go build -o bin/strata ./cmd/strata
upflags=()
[ "${NETNS:-0}" = 1 ] && upflags=(--netns)
bin/strata up "${upflags[@]}" --data-dir "$work/data" >"$work/up.log" 2>&1 &
pids+=($!)
for _ in $(seq 600); do bin/strata status --data-dir "$work/data" >/dev/null 2>&1 && break; sleep 0.1; done
sleep 5 # every node alive in its pools
echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD) $(nproc) cores; default mesh; region $REGION, load $LOAD, outage $FOR, $RUNS runs per mode${NETNS:+, up --netns}"
pct() { sort -n | awk -v p="$1" '{a[NR]=$1} END {if (NR==0) {print "-"; exit} i=int(NR*p+0.999); if (i<1) i=1; print a[i]}'; }
echo "| mode | RPO msgs p50 / max | RPO s p50 / max | RTO publish s p50 / max | RTO consume s p50 / max | lost | catch-up s p50 |"
echo "|---|---|---|---|---|---|---|"
for mode in $MODES; do
  : >"$work/$mode.json"
  for i in $(seq "$RUNS"); do
    args=(--mode "$mode")
    if [ "$mode" = hook-freeze ]; then
      list=$(jq -r --arg r "$REGION" '.regions[] | select(.name==$r) | .nodes[].pid' "$work/data/mesh.json" | tr '\n' ' ')
      args=(--cut-cmd "kill -STOP $list" --heal-cmd "kill -CONT $list")
    fi
    bin/strata drill failover --data-dir "$work/data" --region "$REGION" --load "$LOAD" --for "$FOR" --json "${args[@]}" \
      | jq -c . >>"$work/$mode.json" || echo "# $mode run $i failed (report kept in $work/$mode.json)" >&2
  done
  f="$work/$mode.json"
  col() { jq -r "$1 // \"never\"" "$f"; }
  echo "| $mode | $(col .rpo.msgs | pct .5) / $(col .rpo.msgs | pct 1) | $(col .rpo.s | pct .5) / $(col .rpo.s | pct 1) | $(col .rto.publish_s | pct .5) / $(col .rto.publish_s | pct 1) | $(col .rto.consume_s | pct .5) / $(col .rto.consume_s | pct 1) | $(jq -s 'map(.lost) | add' "$f") | $(col .catch_up_s | pct .5) |"
done
