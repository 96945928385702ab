#!/usr/bin/env bash
# Auth and TLS cost (issue 24): the same `nats bench` commands (natscli
# v0.5.0) and the same connect benchmark (bench/connbench) against a
# Strata region with and without `strata up --secure`, and against
# nats-server v2.15.3 with and without TLS + JWT auth, in one run, the
# targets alternating within each round (each round starts one target
# further on) so that all see the same machine noise. All four run for
# the whole run.
#
# Targets (TARGETS, default all four):
#   strata-open    `strata up -f bench/auth-topology.yaml`: 1 broker, 4
#                  bookies (ledgers E3/Qw2/Qa2, fsync before ack), no TLS,
#                  no auth
#   strata-secure  the same with --secure: TLS on every listener, NATS JWT
#                  auth; clients log in as the demo tenant's user
#                  (<data-dir>/creds/demo-demo.creds, --tlsca <data-dir>/secure/ca.pem)
#   nats-open      one nats-server, JetStream file storage, no TLS, no auth
#   nats-secure    the same in operator mode with TLS: bench/natsauth writes
#                  the operator, accounts, user .creds and the certificates
#                  (internal/tlsconf.EnsureDev)
# and, only when named in TARGETS, auth without TLS (to tell the two apart):
#   strata-auth    strata-open's topology plus auth.nats (operator and system
#                  account seeds from bench/natsauth), no tls section; clients
#                  log in as the demo tenant's user
#   nats-auth      nats-server in operator mode without TLS
#
# For each round, mode and target (MODES, default all four):
#   pub     nats bench pub bench.core.T.R --msgs MSGS --size 128 (nobody subscribed)
#   pubsub  nats bench sub bench.ps.T.R --msgs MSGS --size 128 in the background,
#           1 s later the same bench pub: the publisher's and the subscriber's rate
#   js      nats bench js pub async bench.js.T.R --stream ab_T_R --create
#           --msgs JSMSGS --size 128 --batch 500, then nats stream rm
#   conn    connbench -n CONNS -parallel PAR: CONNS connects (connect, flush,
#           close) one after another, then CONNS from PAR goroutines
# the bench commands with --no-progress --csv.
#
#   bench/auth.sh                                       # everything, 5 rounds
#   ROUNDS=1 MSGS=200000 JSMSGS=20000 CONNS=200 bench/auth.sh   # a quick try
#   TARGETS="strata-open strata-secure" MODES=pub PROFILE_DIR=/tmp/prof bench/auth.sh
#   TARGETS="strata-open strata-auth strata-secure nats-open nats-auth nats-secure" bench/auth.sh
#
# Env: ROUNDS (5; the table shows medians), MSGS (2000000), JSMSGS
# (100000), CONNS (1000), PAR (8), MODES, TARGETS, KEEP=1 (keep the data
# and logs, print where), STRATA (a strata binary instead of `make
# build`), CMD_TIMEOUT (seconds per command, 300), TMPDIR (where the data
# directories go), SERVER_ENV (VAR=value words for the servers only),
# PROFILE_DIR (absolute: the Strata nodes write CPU profiles of their
# whole life there, <target>-<region>.<id>.pprof, when the run ends).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
MSGS=${MSGS:-2000000}
JSMSGS=${JSMSGS:-100000}
CONNS=${CONNS:-1000}
PAR=${PAR:-8}
SIZE=128B
BATCH=500
MODES=${MODES:-"pub pubsub js conn"}
TARGETS=${TARGETS:-"strata-open strata-secure nats-open nats-secure"}
KEEP=${KEEP:-0}
CMD_TIMEOUT=${CMD_TIMEOUT:-300}
SERVER_ENV=${SERVER_ENV:-}
PROFILE_DIR=${PROFILE_DIR:-}

for t in $TARGETS; do
  case $t in strata-open | strata-auth | strata-secure | nats-open | nats-auth | nats-secure) ;; *)
    echo "auth.sh: unknown target $t (strata-open strata-auth strata-secure nats-open nats-auth nats-secure)" >&2
    exit 2
    ;;
  esac
done
for m in $MODES; do
  case $m in pub | pubsub | js | conn) ;; *)
    echo "auth.sh: unknown mode $m (pub pubsub js conn)" >&2
    exit 2
    ;;
  esac
done
has() { [[ " $TARGETS " == *" $1 "* ]]; }

make -s peers
if [[ " $TARGETS " == *" strata-"* ]] && [ -z "${STRATA:-}" ]; then
  make -s build
  STRATA=bin/strata
fi
NATS=bin/nats

work=$(mktemp -d "${TMPDIR:-/tmp}/strata-authbench.XXXXXX")
mkdir -p "$work/logs" "$work/bin"
go build -o "$work/bin/connbench" ./bench/connbench
go build -o "$work/bin/natsauth" ./bench/natsauth
STOP_TICKS=${STOP_TICKS:-200} # strata up stops its nodes gracefully (they write their profiles)
. bench/lib.sh
trap cleanup EXIT
trap 'exit 130' INT TERM

declare -A url creds tlsca

# start_nats NAME SECURITY: one nats-server with JetStream file storage
# under $work/NAME; SECURITY open, auth (operator mode) or secure
# (operator mode and TLS).
start_nats() {
  local name=$1 security=$2 dir="$work/$1"
  mkdir -p "$dir/js"
  free_port
  local p=$port
  free_port
  local mon=$port
  {
    echo "server_name: $name"
    echo "listen: 127.0.0.1:$p"
    echo "http: 127.0.0.1:$mon"
    echo "jetstream { store_dir: \"$dir/js\" }"
    [ "$security" = auth ] && echo "include auth-only.conf"
    [ "$security" = secure ] && echo "include auth.conf"
  } >"$dir/server.conf"
  if [ "$security" != open ]; then
    "$work/bin/natsauth" -dir "$dir"
    creds[$name]="$dir/bench.creds"
  fi
  [ "$security" = secure ] && tlsca[$name]="$dir/tls/ca.pem"
  env $SERVER_ENV bin/nats-server -c "$dir/server.conf" >"$work/logs/$name.log" 2>&1 &
  pids+=($!)
  if ! wait_for "$name /healthz" 60 healthz "$mon"; then
    tail -20 "$work/logs/$name.log" >&2
    exit 1
  fi
  url[$name]="nats://127.0.0.1:$p"
}

# start_strata NAME SECURITY: strata up with bench/auth-topology.yaml in
# $work/NAME; SECURITY open, auth (the topology plus auth.nats with seeds
# from bench/natsauth) or secure (--secure); with auth it waits for the
# demo user's creds.
start_strata() {
  local name=$1 security=$2 dir="$work/$1" topo=bench/auth-topology.yaml flags=() prof=()
  [ "$security" = secure ] && flags+=(--secure)
  if [ "$security" = auth ]; then
    "$work/bin/natsauth" -dir "$work/$name-keys"
    topo="$work/$name-topology.yaml"
    {
      cat bench/auth-topology.yaml
      echo "auth:"
      echo "  enabled: true"
      echo "  nats:"
      echo "    operator_seed_file: \"$work/$name-keys/operator.nk\""
      echo "    system_account_seed_file: \"$work/$name-keys/system.nk\""
    } >"$topo"
  fi
  [ -n "$PROFILE_DIR" ] && mkdir -p "$PROFILE_DIR" && prof=("STRATA_CPUPROFILE=$PROFILE_DIR/$name-{node}.pprof")
  env $SERVER_ENV "${prof[@]}" "$STRATA" up -f "$topo" --data-dir "$dir" --fresh "${flags[@]}" >"$work/logs/$name-up.log" 2>&1 &
  pids+=($!)
  local up=$! ready="$dir/mesh.json"
  [ "$security" != open ] && ready="$dir/creds/demo-demo.creds"
  # mesh.json is written once every node is ready, the demo creds after it.
  for _ in $(seq 1200); do
    { [ -s "$ready" ] && grep -qs '"nats://' "$dir/mesh.json"; } && break
    kill -0 "$up" 2>/dev/null || break
    sleep 0.1
  done
  if ! { [ -s "$ready" ] && grep -qs '"nats://' "$dir/mesh.json"; }; then
    echo "auth.sh: $name: strata up did not get ready:" >&2
    cat "$work/logs/$name-up.log" >&2
    exit 1
  fi
  url[$name]=$(grep -o '"nats://[^"]*"' "$dir/mesh.json" | head -1 | tr -d '"')
  [ "$security" != open ] && creds[$name]="$dir/creds/demo-demo.creds"
  [ "$security" = secure ] && tlsca[$name]="$dir/secure/ca.pem"
  return 0
}

for t in $TARGETS; do
  case $t in
  strata-*) start_strata "$t" "${t#strata-}" ;;
  nats-*) start_nats "$t" "${t#nats-}" ;;
  esac
  echo "# $t: ${url[$t]}${creds[$t]:+ --creds ${creds[$t]}}${tlsca[$t]:+ --tlsca ${tlsca[$t]}}" >&2
done

# natsargs TARGET: sets args to the nats client's server and login flags.
natsargs() {
  args=(-s "${url[$1]}")
  [ -n "${creds[$1]:-}" ] && args+=(--creds "${creds[$1]}")
  [ -n "${tlsca[$1]:-}" ] && args+=(--tlsca "${tlsca[$1]}")
  return 0
}

results="$work/results"   # "target mode round value": one line per figure
failures="$work/failures" # one line per failed command
: >"$results"
: >"$failures"

# bg BASE CMD...: starts CMD in the background with its output in
# BASE.out and a timeout, sets current to it (so that a signal to this
# script is handled at once and cleanup stops it).
bg() {
  local base=$1
  shift
  timeout "$CMD_TIMEOUT" "$@" >"$base.out" 2>&1 &
  current=$!
}

# finish T MODE ROUND BASE: waits for the current command; on success
# returns 0, on failure records why and returns 1.
finish() {
  local t=$1 mode=$2 round=$3 base=$4 rc=0 why
  wait "$current" || rc=$?
  current=
  [ "$rc" = 0 ] && return 0
  why=$(grep -m1 -o 'nats: error: .*\|connbench: .*' "$base.out" || tail -1 "$base.out")
  [ "$rc" = 124 ] && why="timed out after ${CMD_TIMEOUT}s"
  echo "$t $mode round $round: $why" | tee -a "$failures" | sed 's/^/# FAILED /' >&2
  return 1
}

# record T LABEL ROUND CSV: appends the msgs/s of a --csv file (column 5
# of its first data line).
record() {
  awk -F, -v p="$1 $2 $3" 'NR == 2 {printf "%s %d\n", p, $5}' "$4" | tee -a "$results"
}

one() {
  local t=$1 mode=$2 round=$3 base="$work/logs/$1-$2-$3" args sp
  natsargs "$t"
  case $mode in
  pub)
    bg "$base" "$NATS" "${args[@]}" bench pub "bench.core.$t.$round" --msgs "$MSGS" --size "$SIZE" --no-progress --csv "$base.csv"
    finish "$t" pub "$round" "$base" && record "$t" pub "$round" "$base.csv"
    ;;
  pubsub)
    timeout "$CMD_TIMEOUT" "$NATS" "${args[@]}" bench sub "bench.ps.$t.$round" --msgs "$MSGS" --size "$SIZE" --no-progress --csv "$base-sub.csv" >"$base-sub.out" 2>&1 &
    sp=$!
    sleep 1 # the subscriber has flushed its SUB
    bg "$base" "$NATS" "${args[@]}" bench pub "bench.ps.$t.$round" --msgs "$MSGS" --size "$SIZE" --no-progress --csv "$base.csv"
    if finish "$t" pubsub "$round" "$base"; then
      current=$sp
      if finish "$t" pubsub-sub "$round" "$base-sub"; then
        record "$t" pubsub-pub "$round" "$base.csv"
        record "$t" pubsub-sub "$round" "$base-sub.csv"
      fi
    else
      kill "$sp" 2>/dev/null || true
      wait "$sp" 2>/dev/null || true
    fi
    ;;
  js)
    local stream="ab_${t}_$round"
    bg "$base" "$NATS" "${args[@]}" bench js pub async "bench.js.$t.$round" --stream "$stream" --create --replicas 1 \
      --msgs "$JSMSGS" --size "$SIZE" --batch "$BATCH" --no-progress --csv "$base.csv"
    finish "$t" js "$round" "$base" && record "$t" js "$round" "$base.csv"
    [ "$KEEP" = 1 ] || "$NATS" "${args[@]}" stream rm -f "$stream" >/dev/null 2>&1 || true
    ;;
  conn)
    local cargs=(-s "${url[$t]}" -n "$CONNS" -parallel "$PAR")
    [ -n "${creds[$t]:-}" ] && cargs+=(-creds "${creds[$t]}")
    [ -n "${tlsca[$t]:-}" ] && cargs+=(-tlsca "${tlsca[$t]}")
    bg "$base" "$work/bin/connbench" "${cargs[@]}"
    if finish "$t" conn "$round" "$base"; then
      # connbench MODE n=… parallel=… secs=… connects_per_sec=R …
      awk -v p="$t" -v r="$round" '$1 == "connbench" {
        split($6, kv, "="); printf "%s conn-%s %s %.0f\n", p, $2, r, kv[2]
      }' "$base.out" | tee -a "$results"
    fi
    ;;
  esac
}

targets=($TARGETS)
started=$(date +%s)
echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD) $(nproc) cores $(go env GOVERSION); msgs=$MSGS jsmsgs=$JSMSGS conns=$CONNS par=$PAR size=$SIZE rounds=$ROUNDS"
echo "# target mode round msgs/s (conn-*: connects/s)"
for round in $(seq "$ROUNDS"); do
  for mode in $MODES; do
    # each round starts one target further on
    for i in $(seq 0 $((${#targets[@]} - 1))); do
      one "${targets[(i + round - 1) % ${#targets[@]}]}" "$mode" "$round" || true
    done
  done
done
elapsed=$(($(date +%s) - started))

# median TARGET LABEL: the median over rounds (empty if none).
median() {
  awk -v t="$1" -v m="$2" '$1 == t && $2 == m {print $4}' "$results" |
    sort -n | awk '{a[NR] = $1} END {if (NR) print a[int((NR + 1) / 2)]}'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a != "" && b > 0) printf "%.2f", a / b; else print "-"}'; }

labels=()
for mode in $MODES; do
  case $mode in
  pubsub) labels+=(pubsub-pub pubsub-sub) ;;
  conn) labels+=(conn-seq conn-par) ;;
  *) labels+=("$mode") ;;
  esac
done
echo
echo "# runs took ${elapsed}s. Cells: medians of $ROUNDS round(s), msgs/s (conn-*: connects/s);"
echo "# cost columns: secure (or auth) ÷ open of the medians"
header="| measurement |"
rule="|---|"
for t in $TARGETS; do
  header+=" $t |"
  rule+="---:|"
done
costs=() # "server kind": a cost column for each pair present
for srv in strata nats; do
  for kind in auth secure; do
    if has "$srv-open" && has "$srv-$kind"; then
      costs+=("$srv $kind")
      name=$srv
      [ "$srv" = nats ] && name=nats-server
      header+=" $name $kind ÷ open |"
      rule+="---:|"
    fi
  done
done
echo "$header"
echo "$rule"
for l in "${labels[@]}"; do
  line="| $l |"
  for t in $TARGETS; do line+=" $(median "$t" "$l") |"; done
  for c in "${costs[@]}"; do
    read -r srv kind <<<"$c"
    line+=" $(ratio "$(median "$srv-$kind" "$l")" "$(median "$srv-open" "$l")") |"
  done
  echo "$line"
done
if [ -s "$failures" ]; then
  echo
  echo "# failed commands:"
  sed 's/^/#   /' "$failures"
fi
