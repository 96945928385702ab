# Shared shell functions of the bench/ scripts that start servers (source it
# after `cd` to the repository root; the caller sets work and KEEP, then
# `trap cleanup EXIT` and `trap 'exit 130' INT TERM`).
#
#   pids       background servers to stop at exit (append to it)
#   current    the client command running now, stopped first
#   STOP_TICKS how many 0.1 s waits a server gets to stop before SIGKILL
#              (default 100; `strata up` nodes writing profiles want more)

pids=()
current=
STOP_TICKS=${STOP_TICKS:-100}

# cleanup stops what the script started and removes $work unless KEEP=1.
cleanup() {
  local p
  if [ -n "$current" ]; then kill -TERM "$current" 2>/dev/null || true; fi
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq "$STOP_TICKS"); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  if [ "$KEEP" = 1 ]; then
    echo "# kept data and logs in $work" >&2
  else
    rm -rf "$work"
  fi
}

# free_port: sets port to one nothing listens on now and this script has
# not handed out (the gap until the server binds it is small). Ports are
# below the kernel's ephemeral range (ip_local_port_range, from 32768 by
# default), which outgoing connections draw from: a port picked there can
# be taken before the server binds it.
used_ports=" "
free_port() {
  while :; do
    port=$((20000 + RANDOM % 12000))
    [[ "$used_ports" == *" $port "* ]] && continue
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && continue
    used_ports+="$port "
    return
  done
}

# wait_for DESCRIPTION SECONDS COMMAND...: poll until COMMAND succeeds.
wait_for() {
  local what=$1 secs=$2
  shift 2
  for _ in $(seq $((secs * 10))); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "${0##*/}: timed out after ${secs}s waiting for $what" >&2
  return 1
}

# healthz PORT: GET /healthz on 127.0.0.1:PORT answers 200 (no curl needed).
healthz() (
  exec 3<>"/dev/tcp/127.0.0.1/$1"
  printf 'GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
  head -1 <&3 | grep -q ' 200 '
)
