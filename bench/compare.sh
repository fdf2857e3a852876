#!/usr/bin/env bash
# Side-by-side benchmark of Warren and RabbitMQ on this machine.
#
#   bench/compare.sh [-d DURATION] [-r ROUNDS] [-m BACKLOG_MESSAGES] [-R RESTART_MESSAGES] [-c CLIENT] [-j] [SCENARIO...]
#
# Builds warren and warren-perf, starts Warren (and RabbitMQ when
# rabbitmq-server is installed) on ports of their own, runs each warren-perf
# scenario against both brokers alternately ROUNDS times, and prints a table
# of the median consume rate (publish rate for the backlog fill), p99
# latency and peak broker RSS with the Warren/RabbitMQ ratio (-j: JSON).
# Scenarios default to transient, persistent, persistent-4x4, latency,
# fanout, backlog, idle and restart. "restart" is the script's own: it fills
# RESTART_MESSAGES persistent 1 KiB messages over 10 durable queues, then
# restarts each broker after a clean stop and after kill -9 and times the
# first delivery (warren-perf probe, started with the broker). CLIENT is
# warren-perf's --client: fast (default, its own lean client) or amqp091.
set -euo pipefail
cd "$(dirname "$0")/.."

duration=20s rounds=3 backlog=200000 restart_msgs=1000000 client=fast json=0
while getopts "d:r:m:R:c:j" opt; do
  case $opt in
    d) duration=$OPTARG ;;
    r) rounds=$OPTARG ;;
    m) backlog=$OPTARG ;;
    R) restart_msgs=$OPTARG ;;
    c) client=$OPTARG ;;
    j) json=1 ;;
    *) sed -n '2,17p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(transient persistent persistent-4x4 latency fanout backlog idle restart)

# Both brokers may hold 1,000 connections and 10,000 queues' files.
ulimit -n "$(ulimit -Hn)"

work=$(mktemp -d)
cleanup() {
  [ -n "${warren_pid:-}" ] && kill "$warren_pid" 2>/dev/null && wait "$warren_pid" 2>/dev/null || true
  if [ -n "${rabbit_started:-}" ]; then
    (cd /tmp && rabbitmqctl -n warrenbench@localhost stop >/dev/null 2>&1) || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/warren" ./cmd/warren
go build -o "$work/warren-perf" ./cmd/warren-perf
perf="$work/warren-perf"

warren_port=5700 rabbit_port=5701
start_warren() {
  "$work/warren" --amqp-listen 127.0.0.1:$warren_port --mgmt-listen "" --metrics-listen "" \
    --data-dir "$work/warren-data" --log-level warn 2>>"$work/warren.log" &
  warren_pid=$!
}
stop_warren() { # clean (SIGTERM) or kill (SIGKILL)
  [ "$1" = clean ] && kill -TERM "$warren_pid" || kill -KILL "$warren_pid"
  wait "$warren_pid" 2>/dev/null || true
}
start_warren

brokers=(warren)
rabbit() { (cd /tmp && "$@"); }
start_rabbit() {
  # Debian's rabbitmq-server switches to the rabbitmq user through su, whose
  # PAM session drops the file limit to 1,024 (fewer than 1,000 connections
  # need); setpriv switches without PAM and keeps this shell's limit.
  if [ "$(id -u)" = 0 ] && id rabbitmq >/dev/null 2>&1 && command -v setpriv >/dev/null; then
    rabbit env HOME=/var/lib/rabbitmq setpriv --reuid=rabbitmq --regid=rabbitmq --init-groups \
      rabbitmq-server -detached >/dev/null 2>&1
  else
    rabbit rabbitmq-server -detached >/dev/null 2>&1
  fi
}
await_rabbit() { # await_startup fails at once until the node has registered; retry a while
  for _ in $(seq 1 120); do
    rabbit rabbitmqctl -n warrenbench@localhost await_startup >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  return 1
}
rabbit_pid() { pgrep -u rabbitmq -f "beam.smp.*" | head -1; }
if command -v rabbitmq-server >/dev/null 2>&1; then
  mkdir -p "$work/rabbit/mnesia" "$work/rabbit/log"
  # A node of its own: own ports, data and (no) plugins, whatever else runs here.
  export RABBITMQ_NODENAME=warrenbench@localhost RABBITMQ_NODE_PORT=$rabbit_port \
    RABBITMQ_DIST_PORT=25701 RABBITMQ_MNESIA_BASE="$work/rabbit/mnesia" RABBITMQ_LOG_BASE="$work/rabbit/log" \
    RABBITMQ_ENABLED_PLUGINS_FILE="$work/rabbit/plugins" ERL_CRASH_DUMP=/dev/null
  echo "[]." > "$work/rabbit/plugins"
  if [ "$(id -u)" = 0 ] && id rabbitmq >/dev/null 2>&1; then
    chmod 755 "$work" && chown -R rabbitmq: "$work/rabbit"
  fi
  start_rabbit && rabbit_started=1
  if await_rabbit; then brokers+=(rabbitmq); else echo "RabbitMQ did not start; Warren only" >&2; fi
fi

url() { [ "$1" = warren ] && echo "amqp://guest:guest@127.0.0.1:$warren_port/" || echo "amqp://guest:guest@127.0.0.1:$rabbit_port/"; }
pid_of() { [ "$1" = warren ] && echo "$warren_pid" || rabbit_pid; }

# restart_round B: fill B with restart_msgs messages, then time the first
# delivery after a clean stop and after kill -9; one JSON line per mode.
restart_round() {
  local b=$1 per=$((restart_msgs / 10)) mode out
  "$perf" --url "$(url "$b")" --client "$client" -x 10 -y 0 --queues 10 --queue-pattern "warren-perf-restart-%d" -s 1024 -c 256 \
    --persistent --durable --purge -C "$per" --quiet --json >"$work/$b-restart-fill.json" 2>/dev/null || true
  for mode in clean kill; do
    out="$work/$b-restart-$mode-$RANDOM.json"
    if [ "$b" = warren ]; then
      stop_warren "$mode"
      start_warren
    else
      if [ "$mode" = clean ]; then
        rabbit rabbitmqctl -n warrenbench@localhost stop >/dev/null 2>&1 || true
        while [ -n "$(rabbit_pid)" ]; do sleep 0.1; done
      else
        kill -KILL "$(rabbit_pid)" 2>/dev/null || true
        while [ -n "$(rabbit_pid)" ]; do sleep 0.1; done
      fi
      start_rabbit
    fi
    "$perf" probe --url "$(url "$b")" --queue warren-perf-restart-1 --timeout 300s --json >"$out" 2>/dev/null || echo '{}' >"$out"
    echo "$b restart-$mode $out" >>"$work/probes.txt"
    [ "$b" = rabbitmq ] && await_rabbit
  done
  "$perf" --url "$(url "$b")" -x 0 -y 1 --queues 10 --queue-pattern "warren-perf-restart-%d" --predeclared \
    --purge --delete-queues -z 1s --quiet >/dev/null 2>&1 || true
}

for _ in $(seq 1 "$rounds"); do
  for s in "${scenarios[@]}"; do
    for b in "${brokers[@]}"; do
      if [ "$s" = restart ]; then
        restart_round "$b"
        continue
      fi
      extra=(--duration "$duration")
      [ "$s" = backlog ] && extra=(--messages "$backlog")
      [ "$s" = idle ] && extra=(--duration 5s)
      out="$work/$b-$s-$RANDOM.json"
      "$perf" scenario "$s" --url "$(url "$b")" --client "$client" --broker-pid "$(pid_of "$b")" "${extra[@]}" --json --quiet \
        >"$out" 2>/dev/null || echo '{}' >"$out"
      echo "$b $s $out" >>"$work/runs.txt"
    done
  done
done
touch "$work/runs.txt" "$work/probes.txt"

python3 - "$work" "$json" <<'PY'
import json, statistics, sys, os
work, as_json = sys.argv[1], sys.argv[2] == "1"
def load(path):
    try:
        return json.load(open(path))
    except Exception:
        return {}
runs = {}
for line in open(os.path.join(work, "runs.txt")):
    b, s, path = line.split()
    for p in load(path).get("phases", []):
        runs.setdefault((b, p.get("name", s)), []).append(p)
probes = {}
for line in open(os.path.join(work, "probes.txt")):
    b, s, path = line.split()
    sec = load(path).get("seconds")
    if sec is not None:
        probes.setdefault((b, s), []).append(sec)
def med(xs): return statistics.median(xs) if xs else 0
rows = []
for name in sorted({k[1] for k in runs}):
    row = {"scenario": name}
    for b in ("warren", "rabbitmq"):
        ps = runs.get((b, name), [])
        row[b] = {
            "publish_rate": med([p.get("publish_rate", 0) for p in ps]),
            "consume_rate": med([p.get("consume_rate", 0) for p in ps]),
            "p99_ms": med([p.get("latency", {}).get("p99_us", 0) / 1000 for p in ps]),
            "rss_mib": med([p.get("broker_rss_kib", 0) / 1024 for p in ps]),
            "declare_s": med([p.get("declare_seconds", 0) for p in ps]),
            "runs": len(ps),
        }
    w, r = row["warren"], row["rabbitmq"]
    if name == "idle":
        # Memory is the figure here: RabbitMQ's RSS over Warren's.
        row["ratio"] = round(r["rss_mib"] / w["rss_mib"], 2) if w["rss_mib"] else None
    else:
        # Throughput is what consumers got (a broker that buffers publishes
        # without delivering them is not faster); the fill phase has no consumer.
        rate = lambda x: x["consume_rate"] or x["publish_rate"]
        row["ratio"] = round(rate(w) / rate(r), 2) if rate(r) else None
    rows.append(row)
for name in sorted({k[1] for k in probes}):
    row = {"scenario": name}
    for b in ("warren", "rabbitmq"):
        row[b] = {"first_delivery_s": med(probes.get((b, name), [])), "runs": len(probes.get((b, name), []))}
    w, r = row["warren"]["first_delivery_s"], row["rabbitmq"]["first_delivery_s"]
    row["ratio"] = round(r / w, 2) if w else None  # how many times faster Warren is
    rows.append(row)
if as_json:
    print(json.dumps(rows, indent=1))
    sys.exit(0)
print(f"{'scenario':16} {'warren msg/s':>13} {'rabbitmq msg/s':>15} {'ratio':>6} {'w p99 ms':>9} {'r p99 ms':>9} {'w RSS MiB':>10} {'r RSS MiB':>10}")
for row in rows:
    w, r = row["warren"], row["rabbitmq"]
    if "first_delivery_s" in w:
        print(f"{row['scenario']:16} first delivery after {w['first_delivery_s']:.3f} s vs {r['first_delivery_s']:.3f} s"
              f" (RabbitMQ/Warren {row['ratio']})")
    elif row["scenario"] == "idle":
        print(f"{'idle':16} declare {w['declare_s']:.1f} s vs {r['declare_s']:.1f} s;"
              f" RSS {w['rss_mib']:.1f} MiB vs {r['rss_mib']:.1f} MiB (RabbitMQ/Warren {row['ratio']})")
    else:
        rate = lambda x: x["consume_rate"] or x["publish_rate"]
        print(f"{row['scenario']:16} {rate(w):13.0f} {rate(r):15.0f} {str(row['ratio']):>6} {w['p99_ms']:9.2f} {r['p99_ms']:9.2f} {w['rss_mib']:10.1f} {r['rss_mib']:10.1f}")
PY
