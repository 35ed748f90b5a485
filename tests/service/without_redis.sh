#!/bin/sh
# The unit tests need no Redis: the service's tests and the store contract
# run on the in-memory store (TDSTORE_TEST_BACKEND=memory), and everything
# else labelled `unit` touches no server. Run here in a mount namespace
# where every redis-server binary is an empty file, so a test that still
# reached for one would fail rather than pass on this machine's copy.
#   tests/service/without_redis.sh BUILD_DIR
set -eu
build=$1
exec unshare -m --propagation private sh -eu -c '
  for f in /usr/bin/redis-server /usr/bin/redis-check-rdb /usr/local/bin/redis-server; do
    if [ -e "$f" ]; then mount --bind /dev/null "$(readlink -f "$f")"; fi
  done
  if redis-server --version >/dev/null 2>&1; then
    echo "redis-server still runs here: the check would prove nothing" >&2
    exit 1
  fi
  cd "$1"
  export TDSTORE_TEST_BACKEND=memory
  for t in tests/service/service_test tests/store/store_contract_test \
           tests/server/server_config_test tests/unit/common_test \
           tests/unit/cli_parsers_test; do
    echo "== $t (no redis-server)"
    "$t" --gtest_brief=1
  done
' sh "$build"
