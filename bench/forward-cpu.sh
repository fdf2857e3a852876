#!/bin/bash
# Confirm rate and broker CPU per message of 4 confirming publishers
# (persistent, 16 bytes, <= 256 unconfirmed each) into the predeclared
# durable queue "fwd" through the node at 127.0.0.1:PORT, for 15 s.
# PIDS are the brokers' processes (every node of the cluster), whose
# user+system CPU is summed from /proc. Needs warren-perf on PATH or in
# $PERF. Usage: bench/forward-cpu.sh PORT LABEL PID...
PORT=$1; LABEL=$2; shift 2; PIDS="$*"
PERF=${PERF:-warren-perf}
ticks() { local t=0 p f; for p in $PIDS; do read -r -a f < "/proc/$p/stat"; t=$((t + f[13] + f[14])); done; echo "$t"; }
HZ=$(getconf CLK_TCK)
t0=$(ticks)
out=$("$PERF" --url "amqp://guest:guest@127.0.0.1:$PORT/" -x 4 -y 0 -c 256 --persistent --durable --predeclared --purge \
  --queue-pattern fwd --warmup 0s -z 15s --quiet --json 2>/dev/null) || { echo "warren-perf failed" >&2; exit 1; }
t1=$(ticks)
echo "$out" | python3 -c "
import json,sys; d=json.load(sys.stdin); n=d['confirmed']; cpu=($t1-$t0)/$HZ
print('%-28s confirmed/s %8.0f  nacked %d  broker CPU %.1f s = %.1f us/msg' % ('$LABEL', d['confirm_rate'], d['nacked'], cpu, cpu*1e6/max(n,1)))"
