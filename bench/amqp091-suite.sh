#!/usr/bin/env bash
# amqp091-go's own integration suite against Warren.
#
#   bench/amqp091-suite.sh [-r] [-p PORT] [-u URL -m MGMT_PORT [-P PRODUCT]] [-- GO_TEST_FLAG...]
#
# Copies the amqp091-go module of go.mod's version out of the module cache,
# applies bench/amqp091-suite.patch (test-harness fixes only; its header says
# which and why), builds Warren, starts it with a fresh data directory on
# 127.0.0.1:PORT (default 5703; management API on PORT+10000) and runs
# `go test -tags integration -v` in the copy as the suite's Makefile does
# (-r adds -race, as `make tests` has it). GO_TEST_FLAGs after -- are passed
# on, e.g. -- -run 'TestIntegration.*Close'. With -u the suite runs against
# a broker that is already running instead (RabbitMQ, for comparison): -m is
# its management port, -P its server-properties product (default RabbitMQ),
# and RABBITMQ_RABBITMQCTL_PATH, if set, enables the suite's memory-alarm
# test. Against Warren that test is skipped: it sets the watermark with
# rabbitmqctl at run time, which Warren has no command for; the server test
# TestBlockedPublisherClosesWhenAlarmClears does the same in-process.
# Exit status: go test's.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

race=() port=5703 url="" mgmt_port="" product=RabbitMQ
while getopts "rp:u:m:P:" opt; do
  case $opt in
    r) race=(-race) ;;
    p) port=$OPTARG ;;
    u) url=$OPTARG ;;
    m) mgmt_port=$OPTARG ;;
    P) product=$OPTARG ;;
    *) sed -n '2,19p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
if [ -n "$url" ] && [ -z "$mgmt_port" ]; then
  echo "-u needs -m (the broker's management port; the recovery tests drop connections through it)" >&2
  exit 2
fi

work=$(mktemp -d)
cleanup() {
  if [ -n "${warren_pid:-}" ]; then
    kill "$warren_pid" 2>/dev/null || true
    wait "$warren_pid" 2>/dev/null || true
  fi
  chmod -R u+w "$work" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

module_dir=$(go mod download -json github.com/rabbitmq/amqp091-go | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$module_dir" ] || { echo "amqp091-go not in the module cache: $module_dir" >&2; exit 1; }
cp -r "$module_dir" "$work/amqp091-go"
chmod -R u+w "$work/amqp091-go"
git -C "$work/amqp091-go" apply "$repo/bench/amqp091-suite.patch"

if [ -z "$url" ]; then
  mgmt_port=$((port + 10000)) product=Warren url="amqp://guest:guest@127.0.0.1:$port/"
  unset RABBITMQ_RABBITMQCTL_PATH
  go build -o "$work/warren" ./cmd/warren
  "$work/warren" --amqp-listen "127.0.0.1:$port" --mgmt-listen "127.0.0.1:$mgmt_port" --metrics-listen "" \
    --data-dir "$work/warren-data" --log-level warn 2>>"$work/warren.log" &
  warren_pid=$!
  for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    kill -0 "$warren_pid" 2>/dev/null || { cat "$work/warren.log" >&2; exit 1; }
    sleep 0.1
  done
fi

echo "amqp091-go ${module_dir##*@} against $url (product $product, management port $mgmt_port)" >&2
status=0
(cd "$work/amqp091-go" && AMQP_URL=$url AMQP_MGMT_PORT=$mgmt_port AMQP_PRODUCT=$product \
  go test -tags integration -v -count=1 -timeout 20m "${race[@]}" "$@" ./) || status=$?
if [ -n "${warren_pid:-}" ] && [ -s "$work/warren.log" ]; then
  echo "--- warren log (warnings and errors)" >&2
  cat "$work/warren.log" >&2
fi
exit "$status"
