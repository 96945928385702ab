#!/usr/bin/env bash
# Core NATS side by side: the same `nats bench` commands (natscli v0.5.0)
# against the reference nats-server v2.15.3 and against a Strata broker
# (a one-region `strata up`), in one run, alternating rounds so that both
# see the same machine noise.
#
#   bench/nats.sh                 # 3 rounds, 500k msgs per run
#   ROUNDS=5 MSGS=1000000 bench/nats.sh
#
# Prints one line per (peer, mode, size, round) and a median table.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
MSGS=${MSGS:-500000}
REQS=${REQS:-50000}
SIZES=${SIZES:-"128B 1KiB"}

make -s build peers
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

cat >"$work/topo.yaml" <<'EOF'
mesh: bench
regions:
  - name: solo
    brokers: 1
    bookies: 1
    ledger: {ensemble: 1, write_quorum: 1, ack_quorum: 1}
EOF
bin/strata up -f "$work/topo.yaml" --data-dir "$work/data" --fresh >"$work/up.log" 2>&1 &
pids+=($!)
refport=$(( 20000 + RANDOM % 20000 ))
bin/nats-server -a 127.0.0.1 -p "$refport" >"$work/ref.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  grep -q "NATS: " "$work/up.log" && break
  sleep 0.1
done
strata_url=$(grep -o "NATS: [^ ,]*" "$work/up.log" | head -1 | cut -d' ' -f2)
ref_url="nats://127.0.0.1:$refport"
[ -n "$strata_url" ] || { cat "$work/up.log"; exit 1; }

rate() { grep -o "stats: [0-9,]* msgs/sec" "$1" | tail -1 | tr -d ',' | awk '{print $2}'; }

pubsub() { # url size → "pub sub" msgs/s
  local url=$1 size=$2
  bin/nats -s "$url" bench sub bench.core --msgs "$MSGS" --size "$size" --no-progress >"$work/sub.out" 2>&1 &
  local sp=$!
  sleep 1 # the subscriber has flushed its SUB
  bin/nats -s "$url" bench pub bench.core --msgs "$MSGS" --size "$size" --no-progress >"$work/pub.out" 2>&1
  wait "$sp"
  echo "$(rate "$work/pub.out") $(rate "$work/sub.out")"
}

service() { # url size → requests/s
  local url=$1 size=$2
  bin/nats -s "$url" bench service serve bench.svc --msgs "$REQS" --size "$size" --no-progress >"$work/serve.out" 2>&1 &
  local sp=$!
  sleep 1
  bin/nats -s "$url" bench service request bench.svc --msgs "$REQS" --size "$size" --no-progress >"$work/req.out" 2>&1
  kill "$sp" 2>/dev/null || true
  wait "$sp" 2>/dev/null || true
  rate "$work/req.out"
}

echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD) $(nproc) cores; msgs=$MSGS requests=$REQS rounds=$ROUNDS"
echo "# peer mode size round msgs/s"
results="$work/results"
for size in $SIZES; do
  for round in $(seq "$ROUNDS"); do
    for peer in nats-server strata; do
      url=$ref_url; [ "$peer" = strata ] && url=$strata_url
      read -r p s < <(pubsub "$url" "$size")
      echo "$peer pub $size $round $p" | tee -a "$results"
      echo "$peer sub $size $round $s" | tee -a "$results"
      r=$(service "$url" "$size")
      echo "$peer service $size $round $r" | tee -a "$results"
    done
  done
done

echo
echo "| mode | size | nats-server msgs/s (median) | strata msgs/s (median) | strata / nats-server |"
echo "|---|---|---|---|---|"
for size in $SIZES; do
  for mode in pub sub service; do
    ref=$(awk -v m=$mode -v s=$size '$1=="nats-server" && $2==m && $3==s {print $5}' "$results" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    our=$(awk -v m=$mode -v s=$size '$1=="strata" && $2==m && $3==s {print $5}' "$results" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    ratio=$(awk -v a="$our" -v b="$ref" 'BEGIN { if (b > 0) printf "%.2f", a/b; else print "-" }')
    echo "| $mode | $size | $ref | $our | $ratio |"
  done
done
