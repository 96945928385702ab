#!/usr/bin/env bash
# JetStream side by side (issue 6): the same `nats bench js` commands
# (natscli v0.5.0) against a Strata region and against nats-server v2.15.3
# JetStream with file storage, in one run, the targets alternating within
# each round so that all see the same machine noise.
#
# Targets (TARGETS, default all five):
#   strata    `strata up -f bench/js-topology.yaml`: 1 broker, 4 bookies,
#             ledgers E3/Qw2/Qa2, fsync before ack (the default)
#   r1        one nats-server, default sync (fsync every 2 min)
#   r1always  one nats-server, jetstream { sync_interval: always }
#   r3        three nats-servers clustered on loopback, stream R3, default sync
#   r3always  the same with sync_interval: always
#
# For each round, size and target (R is 3 for r3*, else 1):
#   nats bench js pub async SUBJ --stream S --create --replicas R --msgs N --size Z --batch 500
#   nats bench js consume --stream S --msgs N --size Z --batch 500
#   nats consumer rm -f S nats-bench      # so that fetch reads the stream again
#   nats bench js fetch   --stream S --msgs N --size Z --batch 500
#   nats stream rm -f S                   # unless KEEP=1
# the bench commands with --no-progress --csv; every run gets a stream (and
# subject) of its own. natscli v0.5.0's consume and fetch take no subject,
# and create their durable only under the default name nats-bench.
#
#   bench/js.sh                                   # everything, 200k msgs
#   TARGETS="r1 r3 r3always" bench/js.sh          # the peer only
#   MSGS=50000 SIZES=1KiB ROUNDS=3 bench/js.sh
#
# Env: MSGS (200000), SIZES ("128B 1KiB"), TARGETS, ROUNDS (1; the table
# shows medians), BATCH (500), ATTEMPTS (2: when a command fails, that
# target's pub/consume/fetch is run again on a new stream; every failure is
# listed at the end), KEEP=1 (keep the data and logs, print where),
# STRATA (a strata binary to use instead of `make build`), STRATA_REPLICAS
# (--replicas for Strata's streams, 1: its replication is the ledger's
# E/Qw/Qa), CMD_TIMEOUT (seconds per nats command, 900), TMPDIR (where the
# data directories go: pick the disk to measure), SERVER_ENV (VAR=value
# words set for the servers, nats-server and strata up, not for the nats
# client: e.g. SERVER_ENV="GOMAXPROCS=1").
set -euo pipefail
cd "$(dirname "$0")/.."
MSGS=${MSGS:-200000}
SIZES=${SIZES:-"128B 1KiB"}
TARGETS=${TARGETS:-"strata r1 r1always r3 r3always"}
ROUNDS=${ROUNDS:-1}
BATCH=${BATCH:-500}
KEEP=${KEEP:-0}
STRATA_REPLICAS=${STRATA_REPLICAS:-1}
CMD_TIMEOUT=${CMD_TIMEOUT:-900}
ATTEMPTS=${ATTEMPTS:-2}
SERVER_ENV=${SERVER_ENV:-}

for t in $TARGETS; do
  case $t in strata | r1 | r1always | r3 | r3always) ;; *)
    echo "js.sh: unknown target $t (strata r1 r1always r3 r3always)" >&2
    exit 2
    ;;
  esac
done
has() { [[ " $TARGETS " == *" $1 "* ]]; }

make -s peers
if has strata && [ -z "${STRATA:-}" ]; then
  make -s build
  STRATA=bin/strata
fi
NATS=bin/nats

work=$(mktemp -d "${TMPDIR:-/tmp}/strata-jsbench.XXXXXX")
. bench/lib.sh
trap cleanup EXIT
trap 'exit 130' INT TERM

declare -A url replicas
mkdir -p "$work/logs"

# start_nats NAME N SYNC_ALWAYS: N nats-servers (a cluster when N > 1) with
# JetStream file storage under $work/NAME; sets url[NAME] to the first one.
start_nats() {
  local name=$1 n=$2 always=$3 i
  local cports=() ports=() mons=() routes=""
  for i in $(seq "$n"); do
    free_port
    ports+=("$port")
    free_port
    mons+=("$port")
    free_port
    cports+=("$port")
    routes+="${routes:+, }nats-route://127.0.0.1:${cports[-1]}"
  done
  for i in $(seq 0 $((n - 1))); do
    local dir="$work/$name/n$((i + 1))" conf="$work/$name/n$((i + 1)).conf"
    mkdir -p "$dir"
    {
      echo "server_name: $name-n$((i + 1))"
      echo "listen: 127.0.0.1:${ports[i]}"
      echo "http: 127.0.0.1:${mons[i]}"
      echo "jetstream {"
      echo "  store_dir: \"$dir\""
      [ "$always" = 1 ] && echo "  sync_interval: always"
      echo "}"
      if [ "$n" -gt 1 ]; then
        echo "cluster {"
        echo "  name: $name"
        echo "  listen: 127.0.0.1:${cports[i]}"
        echo "  routes: [$routes]"
        echo "}"
      fi
    } >"$conf"
    env $SERVER_ENV bin/nats-server -c "$conf" >"$work/logs/$name-n$((i + 1)).log" 2>&1 &
    pids+=($!)
  done
  # /healthz answers 200 once JetStream is up and, in a cluster, has a
  # meta leader and is current.
  for i in $(seq 0 $((n - 1))); do
    if ! wait_for "$name-n$((i + 1)) /healthz" 60 healthz "${mons[i]}"; then
      tail -20 "$work/logs/$name-n$((i + 1)).log" >&2
      exit 1
    fi
  done
  url[$name]="nats://127.0.0.1:${ports[0]}"
  replicas[$name]=$n
}

start_strata() {
  env $SERVER_ENV "$STRATA" up -f bench/js-topology.yaml --data-dir "$work/strata" --fresh >"$work/logs/strata-up.log" 2>&1 &
  pids+=($!)
  local up=$!
  # mesh.json is written once every node is ready; the region's NATS URLs
  # are its first "nats://" strings.
  for _ in $(seq 1200); do
    grep -qs '"nats://' "$work/strata/mesh.json" && break
    kill -0 "$up" 2>/dev/null || break
    sleep 0.1
  done
  if ! grep -qs '"nats://' "$work/strata/mesh.json"; then
    echo "js.sh: strata up did not write a NATS URL to mesh.json:" >&2
    cat "$work/logs/strata-up.log" >&2
    exit 1
  fi
  url[strata]=$(grep -o '"nats://[^"]*"' "$work/strata/mesh.json" | head -1 | tr -d '"')
  replicas[strata]=$STRATA_REPLICAS
}

for t in $TARGETS; do
  case $t in
  strata) start_strata ;;
  r1) start_nats r1 1 0 ;;
  r1always) start_nats r1always 1 1 ;;
  r3) start_nats r3 3 0 ;;
  r3always) start_nats r3always 3 1 ;;
  esac
  echo "# $t: ${url[$t]}" >&2
done

results="$work/results"   # one line per measured run
failures="$work/failures" # one line per failed command
: >"$results"
: >"$failures"

# run TARGET MODE SIZE ROUND ATTEMPT CMD...: runs one nats command with
# --no-progress --csv and keeps its output under logs/. On success it appends
# "target mode size round msgs/s bytes/s p50 p99" to $work/attempt (p50/p99:
# ms until a pub batch of $BATCH is acked; "-" for consume and fetch), on
# failure a line to the failures.
run() {
  local t=$1 mode=$2 size=$3 round=$4 attempt=$5
  shift 5
  local base="$work/logs/$t-$size-$round-$attempt-$mode" rc=0 why
  # In the background, so that a signal to this script is handled at once
  # (bash runs traps only between foreground commands) and cleanup stops it.
  timeout "$CMD_TIMEOUT" "$@" --no-progress --csv "$base.csv" >"$base.out" 2>&1 &
  current=$!
  wait "$current" || rc=$?
  current=
  if [ "$rc" = 0 ] && [ -s "$base.csv" ]; then
    # columns: #RunID,ClientID,MsgCount,MsgBytes,MsgsPerSec,BytesPerSec,
    # DurationSecs, then latencies in µs (P50 in column 11, P99 in 13).
    # Only pub's mean something: the time to get the acks of a batch;
    # fetch's time only the Fetch call, which returns before the messages.
    awk -F, -v p="$t $mode $size $round" -v m="$mode" 'NR == 2 {
      printf "%s %d %.0f", p, $5, $6
      if (m == "pub" && NF >= 13) printf " %.1f %.1f\n", $11 / 1000, $13 / 1000; else printf " - -\n"
    }' "$base.csv" | tee -a "$work/attempt"
    return 0
  fi
  why=$(grep -m1 -o 'nats: error: .*' "$base.out" || tail -1 "$base.out")
  [ "$rc" = 124 ] && why="timed out after ${CMD_TIMEOUT}s"
  echo "$t $mode $size round $round attempt $attempt: $why" | tee -a "$failures" | sed 's/^/# FAILED /' >&2
  return 1
}

# one TARGET SIZE ROUND ATTEMPT: publish into a new stream, consume it, and
# fetch it; each stream has a subject of its own (streams must not overlap).
one() {
  local t=$1 size=$2 round=$3 attempt=$4 s=${url[$1]} rc=0
  local stream="jsb_${t}_${size}_${round}_${attempt}" subj="jsb.$t.$size.$round.$attempt"
  local common=(--stream "$stream" --msgs "$MSGS" --size "$size" --batch "$BATCH")
  : >"$work/attempt"
  run "$t" pub "$size" "$round" "$attempt" \
    "$NATS" -s "$s" bench js pub async "$subj" "${common[@]}" --create --replicas "${replicas[$t]}" &&
    run "$t" consume "$size" "$round" "$attempt" "$NATS" -s "$s" bench js consume "${common[@]}" &&
    {
      # consume acked everything on the durable nats-bench; fetch creates
      # it anew (deliver all) only if it is gone.
      "$NATS" -s "$s" consumer rm -f "$stream" nats-bench >/dev/null 2>&1 || true
      run "$t" fetch "$size" "$round" "$attempt" "$NATS" -s "$s" bench js fetch "${common[@]}"
    } || rc=1
  if [ "$KEEP" != 1 ]; then
    "$NATS" -s "$s" stream rm -f "$stream" >/dev/null 2>&1 || true
  fi
  # A failed attempt's figures count only if no attempt is left.
  if [ "$rc" = 0 ] || [ "$attempt" = "$ATTEMPTS" ]; then
    cat "$work/attempt" >>"$results"
  fi
  return "$rc"
}

started=$(date +%s)
echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD) $(nproc) cores; msgs=$MSGS batch=$BATCH rounds=$ROUNDS attempts=$ATTEMPTS targets=$TARGETS"
echo "# target mode size round msgs/s bytes/s pub-batch-p50-ms pub-batch-p99-ms"
for round in $(seq "$ROUNDS"); do
  for size in $SIZES; do
    for t in $TARGETS; do
      for attempt in $(seq "$ATTEMPTS"); do
        one "$t" "$size" "$round" "$attempt" && break
      done
    done
  done
done
elapsed=$(($(date +%s) - started))

# median COLUMN TARGET MODE SIZE: the median over rounds (empty if none).
median() {
  awk -v c="$1" -v t="$2" -v m="$3" -v s="$4" '$1 == t && $2 == m && $3 == s && $c != "-" {print $c}' "$results" |
    sort -n | awk '{a[NR] = $1} END {if (NR) print a[int((NR + 1) / 2)]}'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a != "" && b > 0) printf "%.2f", a / b; else print "-"}'; }
cell() { # MODE: msgs/s (MiB/s); "lat": pub's p50 / p99 ms per batch
  local t=$1 mode=$2 size=$3 m b
  if [ "$mode" = lat ]; then
    m=$(median 7 "$t" pub "$size")
    b=$(median 8 "$t" pub "$size")
    if [ -z "$m" ]; then echo "-"; else echo "$m / $b"; fi
    return
  fi
  m=$(median 5 "$t" "$mode" "$size")
  b=$(median 6 "$t" "$mode" "$size")
  if [ -z "$m" ]; then echo "-"; else awk -v m="$m" -v b="$b" 'BEGIN {printf "%d (%.1f)", m, b / 1048576}'; fi
}

echo
echo "# runs took ${elapsed}s. Cells: msgs/s (MiB/s), medians of $ROUNDS round(s);"
echo "# pub ack ms: p50 / p99 time until a batch of $BATCH is acked; ratios are of msgs/s"
header="| size | mode |"
rule="|---|---|"
for t in $TARGETS; do
  header+=" $t |"
  rule+="---|"
done
if has strata; then
  has r3always && { header+=" strata ÷ r3always |"; rule+="---|"; }
  has r3 && { header+=" strata ÷ r3 |"; rule+="---|"; }
fi
echo "$header"
echo "$rule"
for size in $SIZES; do
  for mode in pub lat consume fetch; do
    label=$mode
    [ "$mode" = lat ] && label="pub ack ms"
    line="| $size | $label |"
    for t in $TARGETS; do line+=" $(cell "$t" "$mode" "$size") |"; done
    if has strata; then
      if [ "$mode" = lat ]; then
        has r3always && line+=" |"
        has r3 && line+=" |"
      else
        our=$(median 5 strata "$mode" "$size")
        has r3always && line+=" $(ratio "$our" "$(median 5 r3always "$mode" "$size")") |"
        has r3 && line+=" $(ratio "$our" "$(median 5 r3 "$mode" "$size")") |"
      fi
    fi
    echo "$line"
  done
done
if [ -s "$failures" ]; then
  echo
  echo "# failed commands (a failed attempt is repeated on a new stream, up to ATTEMPTS=$ATTEMPTS):"
  sed 's/^/#   /' "$failures"
fi
