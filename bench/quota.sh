#!/usr/bin/env bash
# Publish cost with tenant quotas on vs off (issue 25; goal: <= 3%): one
# Strata mesh, `strata up -f bench/quota-topology.yaml` (1 broker, 4
# bookies, ledgers E3/Qw2/Qa2, fsync before ack, as bench/js.sh and
# bench/auth.sh), with two tenants alike but for their quotas: open has
# none, metered has every quota set so high that none is ever reached. The
# same `nats bench` commands (natscli v0.5.0) publish as either tenant,
# the two alternating within each round (each round starts with the other
# one), so that both see the same machine noise.
#
# Targets: open and metered. For each round, mode and target (MODES,
# default both):
#   pub  nats bench pub T.x --msgs MSGS --size 128 (core NATS, nobody
#        subscribed; charged to the subject's first token, auth is off)
#   js   nats req T.ns.qR x (auto-creates topic T/ns/qR, stream "T:ns:qR"),
#        then nats bench js pub async T.ns.qR --stream T:ns:qR --msgs JSMSGS
#        --size 128 --batch 500, then nats stream rm
# the bench commands with --no-progress --csv. Around each bench command
# the script reads the broker process's CPU time (utime + stime of
# /proc/PID/stat, PID from mesh.json): the table shows it per 100k
# messages, which the shared machine disturbs less than the rates.
#
# Before the mesh starts (GOBENCH=1, the default) it runs the Go
# benchmarks of the gate, GOCOUNT times each:
#   go test -run '^$' -bench 'PublishQuota|AdmitCore' -benchmem ./broker
#   go test -run '^$' -bench BrokerAdmit -benchmem ./tenancy/quota
#
#   bench/quota.sh                                   # everything, 3 rounds
#   ROUNDS=1 MSGS=500000 JSMSGS=20000 GOBENCH=0 bench/quota.sh   # a quick try
#   MODES=pub ROUNDS=7 bench/quota.sh
#   STRATA=/tmp/strata-old STRATA_B=bin/strata bench/quota.sh   # two builds A/B
#
# With STRATA_B (another strata binary) a second mesh, b, runs beside the
# first, a, for the whole run; every round measures both tenants on both
# (targets a-open a-metered b-open b-metered, each round starting one
# further on), and a last table compares b with a.
#
# Env: ROUNDS (3; the table shows medians), MSGS (4000000), JSMSGS
# (100000), MODES, GOBENCH (1), GOCOUNT (ROUNDS), KEEP=1 (keep the data
# and logs, print where), STRATA (a strata binary instead of `make
# build`), CMD_TIMEOUT (seconds per command, 300), TMPDIR (where the data
# directory goes), SERVER_ENV (VAR=value words for `strata up` only),
# PROFILE_DIR (absolute: the nodes write CPU profiles of their whole life
# there, <region>.<id>.pprof, when the run ends).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
MSGS=${MSGS:-4000000}
JSMSGS=${JSMSGS:-100000}
SIZE=128B
BATCH=500
MODES=${MODES:-"pub js"}
GOBENCH=${GOBENCH:-1}
GOCOUNT=${GOCOUNT:-$ROUNDS}
KEEP=${KEEP:-0}
CMD_TIMEOUT=${CMD_TIMEOUT:-300}
SERVER_ENV=${SERVER_ENV:-}
PROFILE_DIR=${PROFILE_DIR:-}
STRATA_B=${STRATA_B:-}

for m in $MODES; do
  case $m in pub | js) ;; *)
    echo "quota.sh: unknown mode $m (pub js)" >&2
    exit 2
    ;;
  esac
done

make -s peers
if [ -z "${STRATA:-}" ]; then
  make -s build
  STRATA=bin/strata
fi
NATS=bin/nats

work=$(mktemp -d "${TMPDIR:-/tmp}/strata-quotabench.XXXXXX")
mkdir -p "$work/logs"
STOP_TICKS=${STOP_TICKS:-200} # strata up stops its nodes gracefully (they write their profiles)
. bench/lib.sh
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD) $(nproc) cores $(go env GOVERSION); msgs=$MSGS jsmsgs=$JSMSGS size=$SIZE rounds=$ROUNDS modes=$MODES"

if [ "$GOBENCH" = 1 ]; then
  echo "# go test -run '^\$' -bench 'PublishQuota|AdmitCore' -benchmem -count $GOCOUNT ./broker"
  go test -run '^$' -bench 'PublishQuota|AdmitCore' -benchmem -count "$GOCOUNT" ./broker | grep '^Benchmark'
  echo "# go test -run '^\$' -bench BrokerAdmit -benchmem -count $GOCOUNT ./tenancy/quota"
  go test -run '^$' -bench BrokerAdmit -benchmem -count "$GOCOUNT" ./tenancy/quota | grep '^Benchmark'
fi

declare -A url broker

# start_mesh NAME BINARY: strata up with bench/quota-topology.yaml in
# $work/NAME; sets url[NAME] and broker[NAME] (the broker's pid).
start_mesh() {
  local name=$1 bin=$2 dir="$work/$1" prof=()
  [ -n "$PROFILE_DIR" ] && mkdir -p "$PROFILE_DIR" && prof=("STRATA_CPUPROFILE=$PROFILE_DIR/$name-{node}.pprof")
  env $SERVER_ENV "${prof[@]}" "$bin" up -f bench/quota-topology.yaml --data-dir "$dir" --fresh >"$work/logs/$name-up.log" 2>&1 &
  pids+=($!)
  local up=$!
  # mesh.json is written once every node is ready.
  for _ in $(seq 1200); do
    grep -qs '"nats://' "$dir/mesh.json" && break
    kill -0 "$up" 2>/dev/null || break
    sleep 0.1
  done
  if ! grep -qs '"nats://' "$dir/mesh.json"; then
    echo "quota.sh: $name: strata up did not write a NATS URL to mesh.json:" >&2
    cat "$work/logs/$name-up.log" >&2
    exit 1
  fi
  url[$name]=$(jq -r '.regions[0].nats[0]' "$dir/mesh.json")
  broker[$name]=$(jq -r '.regions[0].nodes[] | select(.role == "broker") | .pid' "$dir/mesh.json")
  echo "# mesh $name ($bin): ${url[$name]}, broker pid ${broker[$name]}" >&2
}

# Targets: a mesh and a tenant, "<mesh>-<tenant>" with two meshes, the
# tenant alone with one.
targets=()
if [ -n "$STRATA_B" ]; then
  meshes=(a b)
  start_mesh a "$STRATA"
  start_mesh b "$STRATA_B"
  targets=(a-open a-metered b-open b-metered)
else
  meshes=(a)
  start_mesh a "$STRATA"
  targets=(open metered)
fi
meshof() { if [[ $1 == *-* ]]; then echo "${1%-*}"; else echo a; fi; }
tck=$(getconf CLK_TCK)

# cpu MESH: its broker's CPU time so far, in clock ticks (utime + stime;
# the fields after the command name, which has no space here).
cpu() { awk '{print $14 + $15}' "/proc/${broker[$1]}/stat"; }

results="$work/results"   # "target mode round msgs/s cpu-s-per-100k": one line per run
failures="$work/failures" # one line per failed command
: >"$results"
: >"$failures"

# measure T MODE ROUND N BASE CMD...: runs CMD (a nats bench command, its
# output in BASE.out, its --csv in BASE.csv) with a timeout, in the
# background (so that a signal is handled at once and cleanup stops it),
# and records its msgs/s and the broker's CPU per 100k of its N messages.
measure() {
  local t=$1 mode=$2 round=$3 n=$4 base=$5 rc=0 why c0 c1 m
  shift 5
  m=$(meshof "$t")
  c0=$(cpu "$m")
  timeout "$CMD_TIMEOUT" "$@" --no-progress --csv "$base.csv" >"$base.out" 2>&1 &
  current=$!
  wait "$current" || rc=$?
  current=
  c1=$(cpu "$m")
  if [ "$rc" = 0 ] && [ -s "$base.csv" ]; then
    # columns: #RunID,ClientID,MsgCount,MsgBytes,MsgsPerSec,...
    awk -F, -v p="$t $mode $round" -v d=$((c1 - c0)) -v tck="$tck" -v n="$n" \
      'NR == 2 {printf "%s %d %.4f\n", p, $5, d / tck / n * 100000}' "$base.csv" | tee -a "$results"
    return 0
  fi
  why=$(grep -m1 -o 'nats: error: .*' "$base.out" || tail -1 "$base.out")
  [ "$rc" = 124 ] && why="timed out after ${CMD_TIMEOUT}s"
  echo "$t $mode round $round: $why" | tee -a "$failures" | sed 's/^/# FAILED /' >&2
  return 1
}

one() {
  local t=$1 mode=$2 round=$3 base="$work/logs/$1-$2-$3" tenant=${1##*-} u
  u=${url[$(meshof "$1")]}
  case $mode in
  pub)
    measure "$t" pub "$round" "$MSGS" "$base" \
      "$NATS" -s "$u" bench pub "$tenant.x" --msgs "$MSGS" --size "$SIZE"
    ;;
  js)
    local subj="$tenant.ns.q$round" stream="$tenant:ns:q$round" rc=0
    # The first publish with a reply auto-creates the topic. metered's
    # topics quota refuses some creations far below its limit (10429 at
    # use 0: the coordinator's count caps swing between the use and the
    # share), so a refusal is tried again, up to 50 times 0.1 s apart, and
    # counted.
    local try
    for try in $(seq 50); do
      if ! timeout "$CMD_TIMEOUT" "$NATS" -s "$u" req "$subj" x >"$base-create.out" 2>&1; then
        echo "$t js round $round: creating $stream: $(tail -1 "$base-create.out")" | tee -a "$failures" | sed 's/^/# FAILED /' >&2
        return 1
      fi
      grep -q '"err_code":10429' "$base-create.out" || break
      echo "$t round $round: $(grep -o '{"error".*' "$base-create.out")" >>"$work/create-refusals"
      sleep 0.1
    done
    measure "$t" js "$round" "$JSMSGS" "$base" \
      "$NATS" -s "$u" bench js pub async "$subj" --stream "$stream" --msgs "$JSMSGS" --size "$SIZE" --batch "$BATCH" || rc=1
    [ "$KEEP" = 1 ] || "$NATS" -s "$u" stream rm -f "$stream" >/dev/null 2>&1 || true
    return "$rc"
    ;;
  esac
}

started=$(date +%s)
echo "# target mode round msgs/s broker-cpu-s-per-100k-msgs"
for round in $(seq "$ROUNDS"); do
  for mode in $MODES; do
    # each round starts one target further on
    for i in $(seq 0 $((${#targets[@]} - 1))); do
      one "${targets[(i + round - 1) % ${#targets[@]}]}" "$mode" "$round" || true
    done
  done
done
elapsed=$(($(date +%s) - started))

# median COLUMN TARGET MODE: the median over rounds (empty if none).
median() {
  awk -v c="$1" -v t="$2" -v m="$3" '$1 == t && $2 == m {print $c}' "$results" |
    sort -g | awk '{a[NR] = $1} END {if (NR) print a[int((NR + 1) / 2)]}'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a != "" && b > 0) printf "%.3f", a / b; else print "-"}'; }
# rounds COLUMN MODE A B: A ÷ B (targets) of each round, "min–max".
rounds() {
  awk -v c="$1" -v m="$2" -v a="$3" -v b="$4" '$2 == m {v[$1, $3] = $c; r[$3] = 1}
    END {for (i in r) if (v[b, i] > 0 && v[a, i] != "") print v[a, i] / v[b, i]}' "$results" |
    sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {if (NR) printf "%.3f–%.3f", lo, hi; else print "-"}'
}
# row LABEL COLUMN MODE A B: a table row of targets A and B.
row() {
  local a b
  a=$(median "$2" "$4" "$3")
  b=$(median "$2" "$5" "$3")
  echo "| $1 | $b | $a | $(ratio "$a" "$b") | $(rounds "$2" "$3" "$4" "$5") |"
}

echo
echo "# runs took ${elapsed}s. Cells: medians of $ROUNDS round(s); broker CPU: seconds per 100k messages"
[ -n "$STRATA_B" ] && echo "# mesh a: $STRATA, mesh b: $STRATA_B"
for m in "${meshes[@]}"; do
  p=
  [ -n "$STRATA_B" ] && p="$m-"
  echo
  [ -n "$STRATA_B" ] && echo "# mesh $m"
  echo "| measurement | open | metered | metered ÷ open (medians) | metered ÷ open (each round) |"
  echo "|---|---:|---:|---:|---:|"
  for mode in $MODES; do
    label="core pub"
    [ "$mode" = js ] && label="JetStream async pub"
    row "$label, msgs/s" 4 "$mode" "${p}metered" "${p}open"
    row "$label, broker CPU" 5 "$mode" "${p}metered" "${p}open"
  done
done
if [ -n "$STRATA_B" ]; then
  echo
  echo "# mesh b ÷ mesh a, the same tenant"
  echo "| measurement | a | b | b ÷ a (medians) | b ÷ a (each round) |"
  echo "|---|---:|---:|---:|---:|"
  for mode in $MODES; do
    label="core pub"
    [ "$mode" = js ] && label="JetStream async pub"
    for t in open metered; do
      row "$label, $t, msgs/s" 4 "$mode" "b-$t" "a-$t"
      row "$label, $t, broker CPU" 5 "$mode" "b-$t" "a-$t"
    done
  done
fi
if [ -s "$work/create-refusals" ]; then
  echo
  echo "# topic creations refused by the topics quota (and tried again): $(wc -l <"$work/create-refusals"); the first:"
  head -1 "$work/create-refusals" | sed 's/^/#   /'
fi
if [ -s "$failures" ]; then
  echo
  echo "# failed commands:"
  sed 's/^/#   /' "$failures"
fi
