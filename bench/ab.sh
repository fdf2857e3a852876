#!/usr/bin/env bash
# Warren against an earlier Warren: the same warren-perf scenarios run
# alternately against a broker built from REV and one built from the work
# tree, each on a fresh data directory, and the consume rates, p99 latency
# and peak RSS printed side by side with the median ratio.
#
#   bench/ab.sh [-r ROUNDS] [-d DURATION] REV [SCENARIO...]
#
# Scenarios default to transient, persistent and fanout. Both brokers listen
# on 127.0.0.1:5790 in turn; nothing else is contacted.
set -euo pipefail
rounds=3 duration=10s
while getopts "r:d:" opt; do
  case $opt in
    r) rounds=$OPTARG ;;
    d) duration=$OPTARG ;;
    *) echo "usage: $0 [-r ROUNDS] [-d DURATION] REV [SCENARIO...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
rev=${1:?usage: $0 [-r ROUNDS] [-d DURATION] REV [SCENARIO...]}
shift
scenarios=("$@")
[ ${#scenarios[@]} -eq 0 ] && scenarios=(transient persistent fanout)
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
cleanup() {
  [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null || true
  git -C "$root" worktree remove --force "$work/old-src" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
git -C "$root" worktree add -q --detach "$work/old-src" "$rev"
(cd "$work/old-src" && go build -o "$work/warren-old" ./cmd/warren)
(cd "$root" && go build -o "$work/warren-new" ./cmd/warren && go build -o "$work/warren-perf" ./cmd/warren-perf)
: >"$work/runs.txt"
for _ in $(seq "$rounds"); do
  for s in "${scenarios[@]}"; do
    for b in old new; do
      data=$(mktemp -d "$work/data.XXXX")
      "$work/warren-$b" --amqp-listen 127.0.0.1:5790 --mgmt-listen 127.0.0.1:15790 \
        --metrics-listen 127.0.0.1:15791 --data-dir "$data" --log-level warn >/dev/null 2>&1 &
      pid=$!
      for _ in $(seq 100); do (echo >/dev/tcp/127.0.0.1/5790) 2>/dev/null && break; sleep 0.1; done
      out=$("$work/warren-perf" scenario "$s" --url amqp://guest:guest@127.0.0.1:5790/ \
        --duration "$duration" --broker-pid "$pid" --json --quiet 2>/dev/null || echo '{}')
      echo "$s $b $out" >>"$work/runs.txt"
      kill -TERM "$pid"; wait "$pid" 2>/dev/null || true; pid=
      rm -rf "$data"
    done
  done
done
python3 - "$work/runs.txt" "${scenarios[@]}" <<'PY'
import collections, json, statistics, sys
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    s, b, js = line.split(" ", 2)
    try:
        rows[(s, b)].append(json.loads(js)["phases"][0])
    except Exception:
        pass
fmt = lambda xs, f: " ".join(f.format(x) for x in xs)
print(f"{'scenario':12} {'old':34} {'new':34} new/old (medians)")
for s in sys.argv[2:]:
    o, n = rows[(s, "old")], rows[(s, "new")]
    if not o or not n:
        print(f"{s:12} (no result)"); continue
    ro, rn = [p["consume_rate"] for p in o], [p["consume_rate"] for p in n]
    print(f"{s:12} {fmt(ro, '{:,.0f}'):34} {fmt(rn, '{:,.0f}'):34} {statistics.median(rn) / statistics.median(ro):.2f}")
    print(f"{'  p99 ms':12} {fmt([p['latency']['p99_us'] / 1000 for p in o], '{:.2f}'):34} {fmt([p['latency']['p99_us'] / 1000 for p in n], '{:.2f}'):34}")
    print(f"{'  RSS MiB':12} {fmt([p.get('broker_rss_kib', 0) / 1024 for p in o], '{:.1f}'):34} {fmt([p.get('broker_rss_kib', 0) / 1024 for p in n], '{:.1f}'):34}")
PY
