#!/usr/bin/env bash
# Side-by-side benchmark of Warren and RabbitMQ on this machine.
#
#   bench/compare.sh [-d DURATION] [-r ROUNDS] [-m BACKLOG_MESSAGES] [-j] [SCENARIO...]
#
# Builds warren and warren-perf, starts Warren (and RabbitMQ when
# rabbitmq-server is installed) on ports of their own, runs each warren-perf
# scenario against both brokers alternately ROUNDS times, and prints a table
# of the median consume rate (publish rate for the backlog fill), p99
# latency and broker RSS with the Warren/RabbitMQ ratio (-j: JSON). Scenarios default to transient,
# persistent, persistent-4x4, latency, fanout and backlog.
set -euo pipefail
cd "$(dirname "$0")/.."

duration=20s rounds=3 backlog=200000 json=0
while getopts "d:r:m:j" opt; do
  case $opt in
    d) duration=$OPTARG ;;
    r) rounds=$OPTARG ;;
    m) backlog=$OPTARG ;;
    j) json=1 ;;
    *) sed -n '2,12p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(transient persistent persistent-4x4 latency fanout backlog)

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

warren_port=5700 rabbit_port=5701
"$work/warren" --amqp-listen 127.0.0.1:$warren_port --mgmt-listen "" --metrics-listen "" \
  --data-dir "$work/warren-data" --log-level warn 2>"$work/warren.log" &
warren_pid=$!

brokers=(warren)
if command -v rabbitmq-server >/dev/null 2>&1; then
  mkdir -p "$work/rabbit/mnesia" "$work/rabbit/log"
  # A node of its own: own ports, data and (no) plugins, whatever else runs here.
  export RABBITMQ_NODENAME=warrenbench@localhost RABBITMQ_NODE_PORT=$rabbit_port \
    RABBITMQ_DIST_PORT=25701 RABBITMQ_MNESIA_BASE="$work/rabbit/mnesia" RABBITMQ_LOG_BASE="$work/rabbit/log" \
    RABBITMQ_ENABLED_PLUGINS_FILE="$work/rabbit/plugins" ERL_CRASH_DUMP=/dev/null
  echo "[]." > "$work/rabbit/plugins"
  # Debian's rabbitmq-server drops to the rabbitmq user when started as root.
  if [ "$(id -u)" = 0 ] && id rabbitmq >/dev/null 2>&1; then
    chmod 755 "$work" && chown -R rabbitmq: "$work/rabbit"
  fi
  (cd /tmp && rabbitmq-server -detached >/dev/null 2>&1) && rabbit_started=1
  # await_startup fails at once until the node has registered; retry a while.
  for _ in $(seq 1 60); do
    if (cd /tmp && rabbitmqctl -n warrenbench@localhost await_startup >/dev/null 2>&1); then
      brokers+=(rabbitmq)
      break
    fi
    sleep 1
  done
  [ ${#brokers[@]} -eq 2 ] || echo "RabbitMQ did not start; Warren only" >&2
fi

url() { [ "$1" = warren ] && echo "amqp://guest:guest@127.0.0.1:$warren_port/" || echo "amqp://guest:guest@127.0.0.1:$rabbit_port/"; }
rss_kb() {
  if [ "$1" = warren ]; then ps -o rss= -p "$warren_pid"; else ps -o rss= -C beam.smp | sort -n | tail -1; fi
}

for _ in $(seq 1 "$rounds"); do
  for s in "${scenarios[@]}"; do
    for b in "${brokers[@]}"; do
      extra=(--duration "$duration")
      [ "$s" = backlog ] && extra=(--messages "$backlog")
      out="$work/$b-$s-$RANDOM.json"
      "$work/warren-perf" scenario "$s" --url "$(url "$b")" "${extra[@]}" --json --quiet >"$out" 2>/dev/null || echo '{}' >"$out"
      echo "$b $s $(rss_kb "$b")" >>"$work/rss.txt"
      echo "$b $s $out" >>"$work/runs.txt"
    done
  done
done

python3 - "$work" "$json" <<'PY'
import json, statistics, sys, os
work, as_json = sys.argv[1], sys.argv[2] == "1"
runs = {}
for line in open(os.path.join(work, "runs.txt")):
    b, s, path = line.split()
    try:
        phases = json.load(open(path)).get("phases", [])
    except Exception:
        phases = []
    for p in phases:
        key = (b, p.get("name", s))
        runs.setdefault(key, []).append(p)
rss = {}
for line in open(os.path.join(work, "rss.txt")):
    parts = line.split()
    if len(parts) == 3:
        rss.setdefault((parts[0], parts[1]), []).append(int(parts[2]))
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
            "rss_mib": med([r / 1024 for r in rss.get((b, "backlog" if name in ("fill", "drain") else name), [])]),
            "runs": len(ps),
        }
    w, r = row["warren"], row["rabbitmq"]
    # Throughput is what consumers got (a broker that buffers publishes
    # without delivering them is not faster); the fill phase has no consumer.
    rate = lambda x: x["consume_rate"] or x["publish_rate"]
    row["ratio"] = round(rate(w) / rate(r), 2) if rate(r) else None
    rows.append(row)
if as_json:
    print(json.dumps(rows, indent=1))
else:
    print(f"{'scenario':16} {'warren msg/s':>13} {'rabbitmq msg/s':>15} {'ratio':>6} {'w p99 ms':>9} {'r p99 ms':>9} {'w RSS MiB':>10} {'r RSS MiB':>10}")
    for row in rows:
        w, r = row["warren"], row["rabbitmq"]
        rate = lambda x: x["consume_rate"] or x["publish_rate"]
        print(f"{row['scenario']:16} {rate(w):13.0f} {rate(r):15.0f} {str(row['ratio']):>6} {w['p99_ms']:9.2f} {r['p99_ms']:9.2f} {w['rss_mib']:10.1f} {r['rss_mib']:10.1f}")
PY
