#!/usr/bin/env bash
# ctest bench_raw_sample_floor: raw-sample-floor produces its three numbers
# against a redis-server of its own (unix socket, temp dir) and leaves no
# key behind. Never checks how fast.
set -euo pipefail
bin="$1"
dir="$(mktemp -d)"
sock="$dir/redis.sock"
redis-server --port 0 --unixsocket "$sock" --save "" --appendonly no --dir "$dir" \
  > "$dir/redis.log" 2>&1 &
redis_pid=$!
trap 'kill "$redis_pid" 2>/dev/null || true; wait "$redis_pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
# Ready when it answers PING on the socket (bounded: 10 s).
for _ in $(seq 1 200); do
  if redis-cli -s "$sock" ping 2>/dev/null | grep -q PONG; then break; fi
  kill -0 "$redis_pid" 2>/dev/null || { cat "$dir/redis.log"; exit 1; }
  sleep 0.05
done
out="$("$bin" --redis "unix://$sock" --calls 20 --warmup 2)"
echo "$out"
python3 - "$out" <<'PY'
import json, sys
got = json.loads(sys.argv[1])
assert got["ranges_ms"] > 0 and got["fields_ms"] > 0, got
assert 0 < got["getranges_per_sample"] <= 256, got
PY
keys="$(redis-cli -s "$sock" dbsize)"
[ "$keys" = "0" ] || { echo "raw-sample-floor left $keys keys"; exit 1; }
# Bad input: a clear error, exit status 2, nothing written.
if "$bin" --redis "unix://$sock" --rows 0 2> "$dir/err"; then
  echo "--rows 0 was accepted"; exit 1
fi
grep -q "must be positive" "$dir/err"
[ "$(redis-cli -s "$sock" dbsize)" = "0" ]
echo OK
