#!/usr/bin/env bash
# Replicated-queue benchmark: a 3-node RabbitMQ 3.10 cluster against 3 Warren
# nodes clustered on loopback, same load generator (warren-perf), this machine.
#
#   bench/cluster-compare.sh [-d DURATION] [-r ROUNDS] [-b BROKERS] [-k] [-M] [-W WARREN_TREE] [SCENARIO...]
#
# SCENARIO is TYPE-PUBLISHERS (quorum-1, quorum-4, mirror-1, mirror-4),
# failover-TYPE or failover-TYPE-reconnect; default: all eight.
# Every throughput scenario publishes persistent 1 KiB messages with
# confirms (window 256) from 1 or 4 publishers to one durable queue, with
# one consumer per publisher (prefetch 1000, one ack per delivery), all
# connected to node 1, where the queue is declared and so leads. "quorum"
# declares x-queue-type quorum; "mirror" is a classic queue under the
# policy ha-mode: exactly, ha-params: 2 (ha-sync-mode automatic). Each run's
# line gives throughput (consumed/s), p99 latency, and messages per
# broker CPU-second: consumed messages over the utime+stime of all three
# broker processes (/proc/PID/stat) during the whole warren-perf run.
# A failover run declares the queue through node 1 (which then leads it),
# publishes at 1,000 msg/s from 1 publisher with 1 consumer, kills node 1
# with SIGKILL after 10 s, and reports the time from the kill to the first
# confirm of a message published after it and to the first delivery of
# such a message. failover-TYPE has its clients on node 2, which survives
# (they reconnect to node 3 if node 2 drops them, as Warren does with the
# consumer of a failed-over quorum queue); failover-TYPE-reconnect has them
# on node 1, so they reconnect to nodes 2 and 3 right after the kill. The
# killed node is restarted (and rejoins) before the next run.
# Warren's mirror scenarios run only with -M: without mirrored queues
# (branch mirror) they would measure a classic queue.
#
# BROKERS is "rabbitmq,warren" (default) or one of them. WARREN_TREE is the
# source tree cmd/warren is built from (default: this one). -k keeps the
# RabbitMQ cluster running at the end (it is reused by the next run); by
# default everything started is stopped. Results: one JSON line per run on
# stdout (and in $OUT, default /tmp/cluster-compare.jsonl); progress on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$(pwd)

duration=20s rounds=3 brokers=rabbitmq,warren keep=0 wtree=$src mirror=0
while getopts "d:r:b:kMW:" opt; do
  case $opt in
    d) duration=$OPTARG ;;
    r) rounds=$OPTARG ;;
    b) brokers=$OPTARG ;;
    k) keep=1 ;;
    M) mirror=1 ;;
    W) wtree=$OPTARG ;;
    *) sed -n '2,35p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(quorum-1 quorum-4 mirror-1 mirror-4 failover-quorum failover-mirror
  failover-quorum-reconnect failover-mirror-reconnect)
out=${OUT:-/tmp/cluster-compare.jsonl}
log() { echo "cluster-compare: $*" >&2; }

ulimit -n "$(ulimit -Hn)"
work=/tmp/cluster-compare
mkdir -p "$work"
chmod 755 "$work"

go build -o "$work/warren-perf" ./cmd/warren-perf
(cd "$wtree" && go build -o "$work/warren" ./cmd/warren)
perf="$work/warren-perf"

# ---- RabbitMQ: nodes qb1..qb3@localhost, AMQP 5761..5763 -------------------
rport() { echo $((5760 + $1)); }
rnode() { echo "qb$1@localhost"; }
rctl() { (cd /tmp && rabbitmqctl -n "$(rnode "$1")" "${@:2}"); }
renv() {
  local i=$1 d=$work/rabbit-$1
  echo RABBITMQ_NODENAME="$(rnode "$i")" RABBITMQ_NODE_PORT="$(rport "$i")" \
    RABBITMQ_DIST_PORT=$(($(rport "$i") + 20000)) RABBITMQ_MNESIA_BASE="$d/mnesia" \
    RABBITMQ_LOG_BASE="$d/log" RABBITMQ_ENABLED_PLUGINS_FILE="$d/plugins" ERL_CRASH_DUMP=/dev/null
}
# The node name is in beam's environment, not its command line: find the
# process by its AMQP port.
rpid() { ss -ltnpH "sport = :$(rport "$1")" | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2 || true; }
rstart() { # start node $1 (detached) and wait until it runs
  local i=$1 d=$work/rabbit-$1
  mkdir -p "$d/mnesia" "$d/log"
  [ -f "$d/plugins" ] || echo "[]." >"$d/plugins"
  chown -R rabbitmq: "$d"
  # setpriv, not su: su's PAM session would lower the file limit.
  (cd /tmp && env HOME=/var/lib/rabbitmq setpriv --reuid=rabbitmq --regid=rabbitmq --init-groups -- \
    env $(renv "$i") rabbitmq-server -detached >/dev/null 2>&1)
  for _ in $(seq 1 240); do
    rctl "$i" await_startup >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  log "RabbitMQ node $i did not start"
  return 1
}
rabbit_up() { # start (or reuse) the three nodes and join them into one cluster
  for i in 1 2 3; do
    [ -n "$(rpid "$i")" ] || rstart "$i"
  done
  for i in 2 3; do
    if ! rctl 1 cluster_status --formatter json 2>/dev/null | grep -q "$(rnode "$i")"; then
      rctl "$i" stop_app >/dev/null
      rctl "$i" join_cluster "$(rnode 1)" >/dev/null
      rctl "$i" start_app >/dev/null
    fi
  done
  rctl 1 set_policy --apply-to queues qb-mirror '^qb-mirror' \
    '{"ha-mode":"exactly","ha-params":2,"ha-sync-mode":"automatic"}' >/dev/null
}
rabbit_down() {
  for i in 3 2 1; do [ -z "$(rpid "$i")" ] || rctl "$i" stop >/dev/null 2>&1 || true; done
}

# ---- Warren: nodes warren@qb1..3, AMQP 5771..5773 --------------------------
wport() { echo $((5770 + $1)); }
wpids=()
wstart() {
  local i=$1
  "$work/warren" --node-name "warren@qb$i" --data-dir "$work/warren-$i" \
    --amqp-listen "127.0.0.1:$(wport "$i")" --mgmt-listen "127.0.0.1:$((15770 + i))" --metrics-listen '' \
    --cluster-listen "127.0.0.1:$((26770 + i))" --cluster-seeds 127.0.0.1:26771,127.0.0.1:26772,127.0.0.1:26773 \
    --cluster-bootstrap-expect 3 --cluster-secret 'cluster-compare secret, loopback only' \
    --log-level warn 2>>"$work/warren-$i.log" &
  wpids[i]=$!
}
wait_amqp() { # wait until port $1 accepts AMQP connections
  for _ in $(seq 1 240); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.25
  done
  return 1
}
warren_up() {
  rm -rf "$work"/warren-[123]
  for i in 1 2 3; do wstart "$i"; done
  for i in 1 2 3; do wait_amqp "$(wport "$i")"; done
  # The cluster is ready once a definition change goes through Raft.
  for _ in $(seq 1 120); do
    curl -sf -u guest:guest -X PUT -H 'content-type: application/json' \
      -d '{"pattern":"^qb-mirror","apply-to":"queues","definition":{"ha-mode":"exactly","ha-params":2,"ha-sync-mode":"automatic"}}' \
      http://127.0.0.1:15771/api/policies/%2F/qb-mirror >/dev/null && return 0
    sleep 0.5
  done
  log "Warren cluster did not form"
  return 1
}
warren_down() {
  for i in 1 2 3; do
    [ -n "${wpids[i]:-}" ] && kill "${wpids[i]}" 2>/dev/null && wait "${wpids[i]}" 2>/dev/null || true
    wpids[i]=""
  done
}

cleanup() {
  warren_down
  [ "$keep" = 1 ] || rabbit_down
}
trap cleanup EXIT

url() { # broker node -> AMQP URI
  if [ "$1" = rabbitmq ]; then echo "amqp://guest:guest@127.0.0.1:$(rport "$2")/"; else echo "amqp://guest:guest@127.0.0.1:$(wport "$2")/"; fi
}
pid_of() { if [ "$1" = rabbitmq ]; then rpid "$2"; else echo "${wpids[$2]}"; fi; }
cpu_ticks() { # utime+stime of the broker processes of $1, in clock ticks
  local sum=0 p
  for i in 1 2 3; do
    p=$(pid_of "$1" "$i")
    [ -n "$p" ] && [ -r "/proc/$p/stat" ] || continue
    # Fields after the command name (which may hold spaces): utime is the 12th, stime the 13th.
    read -r -a f <<<"$(sed 's/^.*) //' "/proc/$p/stat")"
    sum=$((sum + f[11] + f[12]))
  done
  echo "$sum"
}
qargs() { # queue arguments and name of a queue type
  if [ "$1" = quorum ]; then echo "--queue-arg x-queue-type=quorum --queue-pattern qb-quorum"; else echo "--queue-pattern qb-mirror"; fi
}

throughput_run() { # broker type publishers
  local b=$1 type=$2 n=$3 t0 t1 res
  t0=$(cpu_ticks "$b")
  # shellcheck disable=SC2046
  res=$("$perf" --url "$(url "$b" 1)" $(qargs "$type") --durable --persistent -s 1024 -c 256 \
    -x "$n" -y "$n" -q 1000 --warmup 5s -z "$duration" --purge --delete-queues --quiet --json 2>>"$work/perf.err") || {
    log "$b $type-$n failed: $(tail -3 "$work/perf.err")"
    return 0
  }
  t1=$(cpu_ticks "$b")
  python3 - "$b" "$type-$n" "$((t1 - t0))" "$(getconf CLK_TCK)" "$(cut -d' ' -f1-3 /proc/loadavg)" <<PY | tee -a "$out"
import json, sys
b, s, ticks, hz, load = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
r = json.loads('''$res''')
cpu = ticks / hz
print(json.dumps({"broker": b, "scenario": s, "consume_rate": round(r["consume_rate"]), "confirm_rate": round(r["confirm_rate"]),
  "p99_ms": round(r["latency"]["p99_us"] / 1000, 2), "consumed_total": r["consumed"], "cpu_s": round(cpu, 2),
  "msgs_per_cpu_s": round(r["consumed"] / cpu) if cpu else None, "loadavg": load}))
PY
}

failover_run() { # broker type mode(survivor|reconnect)
  local b=$1 type=$2 mode=$3 res name=failover-$2 clients
  if [ "$mode" = reconnect ]; then
    name=$name-reconnect clients=(--url "$(url "$b" 1)" --failover-urls "$(url "$b" 2),$(url "$b" 3)")
  else
    clients=(--url "$(url "$b" 2)" --failover-urls "$(url "$b" 3)")
  fi
  if [ "$b" = warren ]; then
    # A Warren node answers a declare once it applied it; the others apply
    # it from the Raft log a little later. Declare first, and start the
    # clients of node 2 once node 2 has the queue.
    # shellcheck disable=SC2046
    "$perf" --url "$(url "$b" 1)" $(qargs "$type") --durable -x 0 -y 1 -z 1ms --quiet >/dev/null 2>>"$work/perf.err"
    for _ in $(seq 1 100); do
      curl -sf -u guest:guest "http://127.0.0.1:15772/api/queues/%2F/qb-$type" >/dev/null && break
      sleep 0.1
    done
  fi
  # shellcheck disable=SC2046
  res=$("$perf" --setup-url "$(url "$b" 1)" "${clients[@]}" $(qargs "$type") \
    --durable --persistent -s 1024 -c 256 -x 1 -y 1 -q 1000 -r 1000 -z 30s \
    --kill-pid "$(pid_of "$b" 1)" --kill-after 10s --quiet --json 2>>"$work/perf.err") || {
    log "$b $name failed: $(tail -3 "$work/perf.err")"
    res=""
  }
  [ -z "$res" ] || python3 - "$b" "$name" "$(cut -d' ' -f1-3 /proc/loadavg)" <<PY | tee -a "$out"
import json, sys
r = json.loads('''$res''')
f = r.get("failover", {})
print(json.dumps({"broker": sys.argv[1], "scenario": sys.argv[2], "confirm_after_kill_ms": f.get("confirm_after_kill_ms"),
  "delivery_after_kill_ms": f.get("delivery_after_kill_ms"), "reconnects": f.get("reconnects"), "in_doubt": f.get("in_doubt"),
  "confirmed": r["confirmed"], "nacked": r["nacked"], "consumed": r["consumed"],
  "loadavg": sys.argv[3]}))
PY
  # Node 1 comes back for the next run; the queue is deleted through node 2.
  # A run that failed before its kill left node 1 running.
  # (Its port tells: a killed Warren stays a zombie until waited for.)
  local port
  if [ "$b" = rabbitmq ]; then port=$(rport 1); else port=$(wport 1); fi
  if ss -ltnH "sport = :$port" | grep -q .; then
    :
  elif [ "$b" = rabbitmq ]; then
    for _ in $(seq 1 100); do [ -z "$(rpid 1)" ] && break; sleep 0.1; done
    rstart 1
  else
    wait "${wpids[1]}" 2>/dev/null || true
    wstart 1
    wait_amqp "$(wport 1)"
  fi
  # shellcheck disable=SC2046
  "$perf" --url "$(url "$b" 2)" $(qargs "$type") --predeclared -x 0 -y 1 --delete-queues -z 1s --quiet \
    >/dev/null 2>>"$work/perf.err" || log "$b: deleting the failover queue failed"
}

IFS=, read -r -a blist <<<"$brokers"
for b in "${blist[@]}"; do
  log "starting $b"
  if [ "$b" = rabbitmq ]; then rabbit_up; else warren_up; fi
  log "uptime: $(uptime)"
  for _ in $(seq 1 "$rounds"); do
    for s in "${scenarios[@]}"; do
      case $s in
        mirror-* | failover-mirror*)
          if [ "$b" = warren ] && [ "$mirror" = 0 ]; then log "warren $s skipped (no -M)"; continue; fi ;;&
        failover-*-reconnect) t=${s#failover-}; failover_run "$b" "${t%-reconnect}" reconnect ;;
        failover-*) failover_run "$b" "${s#failover-}" survivor ;;
        *) throughput_run "$b" "${s%-*}" "${s##*-}" ;;
      esac
    done
  done
  if [ "$b" = warren ]; then warren_down; fi
done
