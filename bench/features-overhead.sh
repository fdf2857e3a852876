#!/usr/bin/env bash
# What the queue features (TTL, dead-lettering, limits, priorities, dedup,
# CC/BCC, reply-to, delivery limits, ...) cost the plain publish/deliver path
# when they are compiled in but unused.
#
#   bench/features-overhead.sh [RUNS]
#
# Builds BenchmarkPublishRouteDeliver three times: at ac18064 (just before
# the queue features were added), at HEAD, and at HEAD with the features'
# per-message checks taken out (bench/strip-queue-features.patch). Runs them
# alternately RUNS times (default 30) for 300 ms each and prints benchstat
# comparisons and min/median per build. Timings drift on a shared machine;
# alternating runs and the minimum are what to read.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-30}
work=$(mktemp -d)
cleanup() {
  git worktree remove --force "$work/base" 2>/dev/null || true
  git worktree remove --force "$work/strip" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
git worktree add -f "$work/base" ac18064 >/dev/null 2>&1
git worktree add -f "$work/strip" HEAD >/dev/null 2>&1
git -C "$work/strip" apply "$PWD/bench/strip-queue-features.patch"
(cd "$work/base" && go test -c -o "$work/base.test" ./server)
(cd "$work/strip" && go test -c -o "$work/strip.test" ./server)
go test -c -o "$work/head.test" ./server
for _ in $(seq 1 "$runs"); do
  for b in base head strip; do
    "$work/$b.test" -test.run XXX -test.bench PublishRouteDeliver -test.benchtime 300ms | grep Benchmark >>"$work/$b.txt"
  done
done
bs="go run golang.org/x/perf/cmd/benchstat@latest"
echo "== before the features (ac18064) vs HEAD"; $bs "$work/base.txt" "$work/head.txt" | sed -n 1,4p
echo "== HEAD without the features' per-message checks vs HEAD"; $bs "$work/strip.txt" "$work/head.txt" | sed -n 1,4p
for b in base head strip; do
  awk '{print $3}' "$work/$b.txt" | sort -n | awk -v b="$b" '{a[NR]=$1} END {printf "%-6s min %.1f ns  median %.1f ns\n", b, a[1], a[int((NR+1)/2)]}'
done
