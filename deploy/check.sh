#!/usr/bin/env bash
# Validates the deploy files without a container engine or a cluster:
#
#   deploy/check.sh [BUILD_DIR]
#
# - docker-compose.yml, docker-compose.cluster.yml: `docker-compose config -q`
#   (Debian's docker-compose 1.29 needs no engine for that);
# - Dockerfile: its stages, COPY sources and the settings the docs promise
#   (a structural lint: no engine here to build it);
# - k8s/*.yaml: parseable YAML, every document has apiVersion, kind and
#   metadata.name, every volume a container mounts is defined;
# - systemd/tdstored.service: `systemd-analyze verify` (no output allowed) and
#   `systemd-analyze security --offline` exposure <= 2.5, when systemd-analyze
#   is installed (skipped with the reason printed otherwise);
# - with BUILD_DIR holding server/tdstored and client/tdstore (built): starts
#   tdstored with deploy/tdstored.conf, then with the k8s ConfigMap's config
#   (paths redirected to a temporary directory), and runs against them
#   example-client.sh, the Dockerfile's HEALTHCHECK command and the sidecar's
#   probes. Skipped, saying so, without a build.
# Exits 0 when everything checked passed; prints "FAIL: ..." and exits 1 at
# the first failure.
set -euo pipefail

deploy=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$deploy")
build=${1:-$root/build}
work=$(mktemp -d /tmp/tdstore-deploy-check.XXXXXX)
daemon_pid=""
py=/usr/bin/python3  # Debian's, which has python3-yaml (not a pyenv shim's)

cleanup() {
  stop_daemon
  rm -rf "$work"
}
stop_daemon() {
  if [ -n "$daemon_pid" ]; then
    kill -TERM "$daemon_pid" 2>/dev/null || true
    wait "$daemon_pid" 2>/dev/null || true
    daemon_pid=""
  fi
}
trap cleanup EXIT
fail() { echo "deploy check: FAIL: $*" >&2; exit 1; }
ok() { echo "deploy check: ok    $*"; }
skip() { echo "deploy check: SKIP  $*"; }
start=$SECONDS

# --- compose files -------------------------------------------------------------
command -v docker-compose >/dev/null || fail "docker-compose missing (deploy/install-deps.sh installs it)"
for f in docker-compose.yml docker-compose.cluster.yml; do
  docker-compose -f "$deploy/$f" config -q 2>"$work/compose.err" || {
    cat "$work/compose.err" >&2; fail "$f: docker-compose config"; }
  ok "$f (docker-compose config -q)"
done

# --- Dockerfile and k8s YAML (structure) -----------------------------------------
"$py" -c 'import yaml' 2>/dev/null || fail "python3-yaml missing (deploy/install-deps.sh installs it)"
"$py" - "$root" <<'PY' || fail "Dockerfile or k8s YAML (see above)"
import glob, json, os, re, sys

import yaml

root = sys.argv[1]
errors = []

# Dockerfile: join continuation lines, then check what the docs promise.
text = open(os.path.join(root, "deploy/Dockerfile")).read()
lines = [l for l in re.sub(r"\\\n", " ", text).splitlines() if l.strip() and not l.lstrip().startswith("#")]
stages, current, per_stage = [], None, {}
for line in lines:
    word, _, rest = line.strip().partition(" ")
    word = word.upper()
    if word == "FROM":
        m = re.match(r"(\S+)(?:\s+AS\s+(\S+))?", rest.strip(), re.I)
        base, current = m.group(1), (m.group(2) or f"stage{len(stages)}")
        if base not in stages and not base.startswith("${") and ":" not in base:
            errors.append(f"Dockerfile: FROM {base}: no such stage")
        stages.append(current)
        per_stage[current] = []
    elif current is not None:
        per_stage[current].append((word, rest.strip()))
        if word == "COPY":
            args = rest.split()
            src = [a for a in args[:-1] if not a.startswith("--")]
            frm = [a.split("=", 1)[1] for a in args if a.startswith("--from=")]
            if frm and frm[0] not in stages:
                errors.append(f"Dockerfile: COPY --from={frm[0]}: no such earlier stage")
            if not frm:
                for s in src:
                    if s != "." and not os.path.exists(os.path.join(root, s)):
                        errors.append(f"Dockerfile: COPY {s}: not in the build context")
for name in ("build", "tdstored", "tdstore"):
    if name not in per_stage:
        errors.append(f"Dockerfile: no stage '{name}'")
if stages and stages[-1] != "tdstore":
    errors.append("Dockerfile: the default (last) stage must be 'tdstore'")
for name in ("tdstored", "tdstore"):
    instr = per_stage.get(name, [])
    users = [r for w, r in instr if w == "USER"]
    if name == "tdstored" and (not users or users[-1].split(":")[0] in ("root", "0")):
        errors.append(f"Dockerfile: stage {name} must end as a non-root USER")
    if name == "tdstore" and users and users[-1].split(":")[0] in ("root", "0"):
        errors.append(f"Dockerfile: stage {name} ends as root")
    if not any(w == "HEALTHCHECK" for w, _ in instr):
        errors.append(f"Dockerfile: stage {name} has no HEALTHCHECK")
    if any(w == "RUN" and re.search(r"\b(build-essential|g\+\+|gcc|cmake|-dev)\b", r) for w, r in instr):
        errors.append(f"Dockerfile: stage {name} installs build tools")
td = per_stage.get("tdstored", [])
if ("EXPOSE", "50051 9464") not in td:
    errors.append("Dockerfile: tdstored must EXPOSE 50051 9464")
if not any(w == "ENTRYPOINT" and json.loads(r) == ["tdstored"] for w, r in td):
    errors.append('Dockerfile: tdstored must have ENTRYPOINT ["tdstored"]')
for pattern in ("build*/", ".git/"):
    if pattern not in open(os.path.join(root, ".dockerignore")).read().split():
        errors.append(f".dockerignore: does not exclude {pattern}")

# k8s: every document names itself; mounts refer to defined volumes.
for path in sorted(glob.glob(os.path.join(root, "deploy/k8s/*.yaml"))):
    name = os.path.relpath(path, root)
    docs = [d for d in yaml.safe_load_all(open(path)) if d is not None]
    if not docs:
        errors.append(f"{name}: no documents")
    for i, doc in enumerate(docs):
        for key in ("apiVersion", "kind"):
            if not doc.get(key):
                errors.append(f"{name} document {i + 1}: no {key}")
        if not (doc.get("metadata") or {}).get("name"):
            errors.append(f"{name} document {i + 1}: no metadata.name")
        pod = ((doc.get("spec") or {}).get("template") or {}).get("spec")
        if pod:
            volumes = {v["name"] for v in pod.get("volumes", [])}
            for c in pod.get("containers", []) + pod.get("initContainers", []):
                for m in c.get("volumeMounts", []):
                    if m["name"] not in volumes:
                        errors.append(f"{name}: container {c['name']} mounts undefined volume {m['name']}")
for e in errors:
    print("  " + e, file=sys.stderr)
sys.exit(1 if errors else 0)
PY
ok "Dockerfile (stages, COPY sources, non-root, EXPOSE, ENTRYPOINT, HEALTHCHECK; not built)"
ok "k8s/*.yaml (YAML; apiVersion, kind, metadata.name; volumes)"

# --- systemd unit -----------------------------------------------------------------
unit=$deploy/systemd/tdstored.service
if ! command -v systemd-analyze >/dev/null; then
  skip "systemd/tdstored.service: systemd-analyze is not installed"
else
  # verify insists that ExecStart's binary exists: point it at one that does.
  tdstored_bin=/bin/true
  [ -x "$build/server/tdstored" ] && tdstored_bin=$(cd "$build/server" && pwd)/tdstored
  mkdir -p "$work/unit"
  sed "s|/usr/local/bin/tdstored|$tdstored_bin|" "$unit" >"$work/unit/tdstored.service"
  if ! systemd-analyze verify "$work/unit/tdstored.service" >"$work/verify.out" 2>&1; then
    cat "$work/verify.out" >&2; fail "systemd-analyze verify tdstored.service"
  fi
  [ -s "$work/verify.out" ] && { cat "$work/verify.out" >&2; fail "systemd-analyze verify warned"; }
  ok "systemd/tdstored.service (systemd-analyze verify)"
  if systemd-analyze security --offline=true --threshold=25 "$work/unit/tdstored.service" \
       >"$work/security.out" 2>&1; then
    ok "systemd/tdstored.service ($(grep -o 'Overall exposure level.*' "$work/security.out"))"
  else
    grep -q 'Overall exposure' "$work/security.out" || {
      cat "$work/security.out" >&2; fail "systemd-analyze security"; }
    fail "systemd/tdstored.service: $(grep -o 'Overall exposure level.*' "$work/security.out") (> 2.5)"
  fi
fi

# --- the config files and scripts against a real daemon ----------------------------
tdstored=$build/server/tdstored
cli_dir=$build/client
if [ ! -x "$tdstored" ] || [ ! -x "$cli_dir/tdstore" ]; then
  skip "running tdstored with the deploy configs: no built $tdstored and $cli_dir/tdstore"
  echo "deploy check: passed in $((SECONDS - start)) s"
  exit 0
fi
export PATH="$cli_dir:$PATH"

# start_daemon CONFIG FLAGS...: tdstored --config CONFIG FLAGS..., waits for
# its ready file. Paths the configs name (/run/tdstore, /var/lib/tdstore) are
# overridden by flags, which beat the file.
start_daemon() {
  local config=$1
  shift
  rm -f "$work/ready"
  "$tdstored" --config "$config" --ready-file "$work/ready" --metrics-listen= "$@" \
    >"$work/tdstored.log" 2>&1 &
  daemon_pid=$!
  for _ in $(seq 300); do
    [ -s "$work/ready" ] && return 0
    kill -0 "$daemon_pid" 2>/dev/null || { cat "$work/tdstored.log" >&2; daemon_pid=""; return 1; }
    sleep 0.1
  done
  return 1
}

# 1. deploy/tdstored.conf (the systemd example): TCP + unix socket.
start_daemon "$deploy/tdstored.conf" --listen 127.0.0.1:0 \
  --unix-socket "$work/tdstored.sock" --data-dir "$work/data" ||
  fail "tdstored did not start with deploy/tdstored.conf"
tcp_addr=$(grep -v '^unix:' "$work/ready" | head -n1)
ok "tdstored.conf accepted (tdstored serving on $tcp_addr and $work/tdstored.sock)"
TDSTORE_ADDR=$tcp_addr sh "$deploy/example-client.sh" >"$work/client.out" 2>&1 || {
  cat "$work/client.out" >&2; fail "example-client.sh"; }
ok "example-client.sh against it over TCP"
# (Each CLI call loads libtorch, ~1.5 s: the socket gets one call only.)
TDSTORE_ADDR=unix://$work/tdstored.sock tdstore server >/dev/null || fail "tdstore server over the unix socket"
ok "tdstore server against it over the unix socket"
health=$(sed -n 's/^ *CMD \(tdstore server.*\)$/\1/p' "$deploy/Dockerfile")
[ -n "$health" ] || fail "no 'CMD tdstore server ...' HEALTHCHECK in the Dockerfile"
TDSTORE_ADDR=$tcp_addr sh -c "$health" || fail "the Dockerfile's HEALTHCHECK ($health) failed"
ok "the Dockerfile's HEALTHCHECK command passes against it"
stop_daemon

# 2. The k8s ConfigMap's tdstored.conf (unix socket only), and the sidecar's
#    probe commands run against it.
"$py" -c '
import shlex, sys, yaml
probes = []
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d and d.get("kind") == "ConfigMap" and "tdstored.conf" in d.get("data", {}):
        open(sys.argv[2], "w").write(d["data"]["tdstored.conf"])
    pod = ((d or {}).get("spec") or {}).get("template", {}).get("spec", {})
    for c in pod.get("initContainers", []) + pod.get("containers", []):
        if c["name"] == "tdstored":
            for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
                if kind in c:
                    probes.append(shlex.join(c[kind]["exec"]["command"]))
open(sys.argv[3], "w").write("".join(p + "\n" for p in probes))
' "$deploy/k8s/sidecar.yaml" "$work/k8s.conf" "$work/probes"
[ -s "$work/k8s.conf" ] || fail "k8s/sidecar.yaml: no ConfigMap with tdstored.conf"
[ -s "$work/probes" ] || fail "k8s/sidecar.yaml: no exec probes on the tdstored container"
start_daemon "$work/k8s.conf" --unix-socket "$work/k8s.sock" ||
  fail "tdstored did not start with the k8s ConfigMap's tdstored.conf"
grep -qv '^unix:' "$work/ready" && fail "the k8s config opened a TCP listener: $(cat "$work/ready")"
ok "k8s ConfigMap's tdstored.conf accepted: unix socket only"
while read -r probe; do
  TDSTORE_ADDR=unix://$work/k8s.sock sh -c "$probe" >/dev/null || fail "the sidecar's probe: $probe"
  ok "the sidecar's probe passes: $probe"
done <"$work/probes"
stop_daemon

echo "deploy check: passed in $((SECONDS - start)) s"
