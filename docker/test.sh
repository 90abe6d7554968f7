#!/usr/bin/env bash
# Tests docker/Dockerfile's runtime image without Docker Hub and without running
# a container (container runtimes are refused on the CI machines):
#
#   1. installs podman and debootstrap when missing (apt-get);
#   2. debootstraps a minbase Debian bookworm from the mirror apt uses here
#      (cached as a tarball in docker/.cache/, gitignored) and imports it as
#      the base image;
#   3. builds the runtime image from host-built artifacts (ARTIFACTS=prebuilt:
#      target/release/chingest if present, else target/debug/chingest, and
#      engine/lib/libchdb.so) with `podman build --isolation chroot`;
#   4. checks the image's configuration (non-root user, volume, ports,
#      healthcheck, 0.0.0.0), mounts the image and starts its entrypoint with
#      chroot, as the image's user and with its environment and working
#      directory, in a private mount namespace holding what a runtime would
#      give it (a temporary directory as the volume, /proc, /dev, /sys, a
#      tmpfs /tmp), on free loopback ports;
#   5. runs the image's healthcheck, writes a point over HTTP and reads it back
#      with /sql, opens the web UI's page, stops the server with SIGTERM and
#      expects a clean exit;
#   6. unmounts and removes the images (podman runs on a store of its own in
#      a temporary directory, so nothing is left in the host's, not even the
#      build's intermediate images) and the temporary files, also when a step
#      fails.
#
# Needs root (mount namespaces, chroot, rootful podman). Run by .ci/run after
# `make test`, which builds target/debug/chingest and fetches the engine.
set -euo pipefail

cd "$(dirname "$0")/.."
repo="$(pwd)"
started=$SECONDS

SUITE=bookworm
CACHE_DIR="$repo/docker/.cache"
BASE_TARBALL="$CACHE_DIR/debian-$SUITE-minbase.tar"

log() { printf 'docker/test.sh: %s\n' "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }

if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || die "needs root (mounts, chroot, rootful podman)"
  exec sudo --preserve-env=PATH "$0" "$@"
fi

# --- 1. tools -------------------------------------------------------------------
missing=()
command -v podman >/dev/null || missing+=(podman)
command -v debootstrap >/dev/null || missing+=(debootstrap)
command -v curl >/dev/null || missing+=(curl)
command -v python3 >/dev/null || missing+=(python3)
if [ "${#missing[@]}" -gt 0 ]; then
  log "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

# --- artifacts ------------------------------------------------------------------
if [ -x target/release/chingest ]; then
  binary="$repo/target/release/chingest"
elif [ -x target/debug/chingest ]; then
  binary="$repo/target/debug/chingest"
else
  die "no target/release/chingest or target/debug/chingest: run make test (or cargo build -p chingest-server) first"
fi
binary="$(readlink -f "$binary")"
engine="$(readlink -f engine/lib/libchdb.so)" || die "no engine/lib/libchdb.so: run make setup first"
[ -s "$engine" ] || die "no engine/lib/libchdb.so: run make setup first"
log "artifacts: $binary, $engine"

# --- cleanup, whatever happens from here on ---------------------------------------
image="localhost/chingest:test"
base_image="localhost/debian-minbase:$SUITE"
work="$(mktemp -d -t chingest-docker-test.XXXXXX)"
# The store holds the artifacts about four times over (the build context,
# the layer, the committed image, the exported one); a full disk fails
# deep inside podman with "read/write on closed pipe", so say it first.
need_kb=$(( $(du -k "$binary" "$engine" | awk '{s += $1} END {print s}') * 5 ))
free_kb=$(df -Pk "$work" | awk 'NR == 2 {print $4}')
[ "$free_kb" -ge "$need_kb" ] || { rmdir "$work"; die "$(( free_kb / 1024 )) MiB free under $work, the image build needs about $(( need_kb / 1024 )) MiB"; }
server_pid=""
mounted=""

# A podman store of the test's own: its images, layers, locks and mounts.
pod() { podman --root "$work/storage" --runroot "$work/run" "$@"; }

cleanup() {
  local status=$?
  set +e
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -KILL "$server_pid"
    wait "$server_pid" 2>/dev/null
  fi
  if [ "$status" -ne 0 ] && [ -s "$work/server.log" ]; then
    log "server output (last 40 lines):"
    tail -n 40 "$work/server.log" >&2
  fi
  [ -n "$mounted" ] && pod image unmount "$image" >/dev/null
  if [ -d "$work/storage" ]; then
    pod image unmount --all >/dev/null 2>&1
    pod rmi --all --force >/dev/null
  fi
  # Never delete through a mount left behind.
  if grep -q " $work/" /proc/self/mounts; then
    log "mounts left under $work; not removing it"
  else
    rm -rf "$work"
  fi
  if [ "$status" -eq 0 ]; then
    log "passed in $((SECONDS - started)) s"
  else
    log "failed after $((SECONDS - started)) s"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- 2. base image: debootstrapped minbase, cached ------------------------------------
# The URI apt uses for the suite itself (not -updates or -security): deb822
# sources first, then one-line ones, else Debian's redirector.
debian_mirror() {
  local uri=""
  shopt -s nullglob
  local sources=(/etc/apt/sources.list.d/*.sources)
  local lists=(/etc/apt/sources.list /etc/apt/sources.list.d/*.list)
  shopt -u nullglob
  if [ "${#sources[@]}" -gt 0 ]; then
    uri="$(awk -v suite="$SUITE" '
      BEGIN { RS = "" }
      {
        types = ""; suites = ""; uris = ""
        n = split($0, lines, "\n")
        for (i = 1; i <= n; i++) {
          if (lines[i] ~ /^Types:/)  types  = " " substr(lines[i], 7) " "
          if (lines[i] ~ /^Suites:/) suites = " " substr(lines[i], 8) " "
          if (lines[i] ~ /^URIs:/)   uris   = substr(lines[i], 6)
        }
        gsub(/\t/, " ", types); gsub(/\t/, " ", suites)
        if (types ~ / deb / && suites ~ (" " suite " ")) {
          split(uris, u, " "); print u[1]; exit
        }
      }' "${sources[@]}")"
  fi
  if [ -z "$uri" ] && [ "${#lists[@]}" -gt 0 ]; then
    uri="$(sed -E 's/\[[^]]*\]//' "${lists[@]}" 2>/dev/null \
      | awk -v suite="$SUITE" '$1 == "deb" && $3 == suite { print $2; exit }')"
  fi
  printf '%s\n' "${uri:-http://deb.debian.org/debian}"
}

if [ ! -s "$BASE_TARBALL" ]; then
  mirror="$(debian_mirror)"
  log "debootstrap --variant=minbase $SUITE from $mirror (cached in ${BASE_TARBALL#"$repo/"})"
  mkdir -p "$CACHE_DIR"
  rootfs="$work/rootfs"
  debootstrap --variant=minbase "$SUITE" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
    || { tail -n 20 "$work/debootstrap.log" >&2; die "debootstrap"; }
  # What debian:*-slim leaves out too: package lists and downloaded packages.
  # The host's resolver and name do not belong in an image.
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin \
    "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/log/*.log
  : >"$rootfs/etc/resolv.conf"
  : >"$rootfs/etc/hostname"
  tar --numeric-owner --xattrs -C "$rootfs" -cf "$BASE_TARBALL.partial" .
  mv "$BASE_TARBALL.partial" "$BASE_TARBALL"
  rm -rf "$rootfs"
  log "base rootfs ready after $((SECONDS - started)) s"
fi
pod import --quiet "$BASE_TARBALL" "$base_image" >/dev/null

# --- 3. the runtime image from the host's artifacts -----------------------------------
# The context holds exactly the two files (hard links when possible: the
# engine alone is over 500 MB).
ctx="$work/context"
mkdir "$ctx"
ln "$binary" "$ctx/chingest" 2>/dev/null || cp "$binary" "$ctx/chingest"
ln "$engine" "$ctx/libchdb.so" 2>/dev/null || cp "$engine" "$ctx/libchdb.so"

log "podman build (ARTIFACTS=prebuilt, BASE_IMAGE=$base_image)"
build_started=$SECONDS
# --format docker keeps HEALTHCHECK (OCI image configs have no such field);
# --pull=never: nothing may come from a registry.
pod build --isolation chroot --format docker --pull=never \
  --build-arg BASE_IMAGE="$base_image" --build-arg ARTIFACTS=prebuilt \
  -f docker/Dockerfile -t "$image" "$ctx" >"$work/build.log" 2>&1 \
  || { tail -n 30 "$work/build.log" >&2; die "podman build"; }
log "built $image in $((SECONDS - build_started)) s ($(pod image inspect --format '{{.Size}}' "$image") bytes)"
rm -rf "$ctx"

# --- 4. the image's configuration -------------------------------------------------------
# Shell assignments from the image's config (values quoted for eval).
img_user="" img_workdir=""
img_env=() img_entrypoint=() img_cmd=() img_volumes=() img_ports=() img_health=()
pod image inspect --format '{{json .Config}}' "$image" >"$work/config.json"
pod image inspect --format '{{json .HealthCheck}}' "$image" >"$work/healthcheck.json"
eval "$(python3 - "$work/config.json" "$work/healthcheck.json" <<'EOF'
import json, shlex, sys
config = json.load(open(sys.argv[1]))
health = json.load(open(sys.argv[2])) or config.get("Healthcheck") or {}
def scalar(name, value):
    print(f"{name}={shlex.quote(value or '')}")
def array(name, values):
    print(f"{name}=(" + " ".join(shlex.quote(v) for v in (values or [])) + ")")
scalar("img_user", config.get("User"))
scalar("img_workdir", config.get("WorkingDir"))
array("img_env", config.get("Env"))
array("img_entrypoint", config.get("Entrypoint"))
array("img_cmd", config.get("Cmd"))
array("img_volumes", sorted(config.get("Volumes") or {}))
array("img_ports", sorted(config.get("ExposedPorts") or {}))
array("img_health", health.get("Test"))
EOF
)"

img_env_value() {
  local entry
  for entry in "${img_env[@]}"; do
    [ "${entry%%=*}" = "$1" ] && { printf '%s\n' "${entry#*=}"; return 0; }
  done
  return 1
}
data_dir="$(img_env_value CHINGEST_DATA_DIR)" || die "image sets no CHINGEST_DATA_DIR"
[ "$(img_env_value CHINGEST_HTTP_ADDR)" = "0.0.0.0:8086" ] || die "image does not listen on 0.0.0.0:8086"
[ "$(img_env_value CHINGEST_GRPC_ADDR)" = "0.0.0.0:8087" ] || die "image does not listen on 0.0.0.0:8087"
[ "$(img_env_value CHINGEST_CLICKHOUSE_HTTP_ADDR)" = "0.0.0.0:8123" ] || die "image does not serve ClickHouse's HTTP interface on 0.0.0.0:8123"
[ "${img_ports[*]}" = "8086/tcp 8087/tcp 8123/tcp" ] || die "exposed ports are '${img_ports[*]}'"
[ "${img_volumes[*]}" = "$data_dir" ] || die "volumes are '${img_volumes[*]}', data dir $data_dir"
[ "${#img_health[@]}" -gt 1 ] || die "image has no healthcheck"
[ "${#img_entrypoint[@]}" -gt 0 ] || die "image has no entrypoint"

mnt="$(pod image mount "$image")"
mounted=yes

# The image's user, resolved in the image's own passwd and group files.
user_part="${img_user%%:*}"
group_part=""
[ "$user_part" != "$img_user" ] && group_part="${img_user#*:}"
if [[ "$user_part" =~ ^[0-9]+$ ]]; then
  uid="$user_part"
else
  uid="$(awk -F: -v u="$user_part" '$1 == u { print $3 }' "$mnt/etc/passwd")"
fi
if [ -z "$uid" ] || [ "$uid" -eq 0 ]; then die "the image runs as root (User='$img_user')"; fi
if [ -z "$group_part" ]; then
  gid="$(awk -F: -v u="$uid" '$3 == u { print $4 }' "$mnt/etc/passwd")"
elif [[ "$group_part" =~ ^[0-9]+$ ]]; then
  gid="$group_part"
else
  gid="$(awk -F: -v g="$group_part" '$1 == g { print $3 }' "$mnt/etc/group")"
fi
[ -n "$gid" ] || die "cannot resolve the group of User='$img_user'"
[ -d "$mnt$data_dir" ] || die "$data_dir is missing from the image"
log "image user $uid:$gid, data dir $data_dir, workdir ${img_workdir:-/}"

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
http_port="$(free_port)"
grpc_port="$(free_port)"
while [ "$grpc_port" = "$http_port" ]; do grpc_port="$(free_port)"; done
clickhouse_port="$(free_port)"
while [ "$clickhouse_port" = "$http_port" ] || [ "$clickhouse_port" = "$grpc_port" ]; do
  clickhouse_port="$(free_port)"
done

# The image's environment, on loopback ports of the host's network.
run_env=()
for entry in "${img_env[@]}"; do
  case "${entry%%=*}" in
    CHINGEST_HTTP_ADDR | CHINGEST_GRPC_ADDR | CHINGEST_CLICKHOUSE_HTTP_ADDR) ;;
    *) run_env+=("$entry") ;;
  esac
done
run_env+=("CHINGEST_HTTP_ADDR=127.0.0.1:$http_port" "CHINGEST_GRPC_ADDR=127.0.0.1:$grpc_port"
  "CHINGEST_CLICKHOUSE_HTTP_ADDR=127.0.0.1:$clickhouse_port")

# The volume: a fresh directory owned by the image's user.
volume="$work/volume"
mkdir "$volume"
chown "$uid:$gid" "$volume"
chmod 0750 "$volume"

# --- 5. start the image's entrypoint ------------------------------------------------------
log "starting ${img_entrypoint[*]} ${img_cmd[*]} in the image, http 127.0.0.1:$http_port"
# shellcheck disable=SC2016 # the script expands its own arguments
unshare --mount --propagation private -- bash -euc '
  mnt=$1 volume=$2 data_dir=$3 user=$4 workdir=$5
  shift 5
  mount --bind "$volume" "$mnt$data_dir"
  mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$mnt/tmp"
  mount -t proc -o nosuid,nodev,noexec proc "$mnt/proc"
  mount --rbind /dev "$mnt/dev"
  mount --rbind -o ro /sys "$mnt/sys"
  exec chroot --userspec="$user" "$mnt" /usr/bin/env -i -C "$workdir" "$@"
' _ "$mnt" "$volume" "$data_dir" "$uid:$gid" "${img_workdir:-/}" \
  "${run_env[@]}" "${img_entrypoint[@]}" "${img_cmd[@]}" >"$work/server.log" 2>&1 &
server_pid=$!

base_url="http://127.0.0.1:$http_port"
deadline=$((SECONDS + 90))
until [ "$(curl -s -o /dev/null -w '%{http_code}' "$base_url/ready" || true)" = 200 ]; do
  kill -0 "$server_pid" 2>/dev/null || { wait "$server_pid" || true; die "the server exited before it was ready"; }
  [ "$SECONDS" -lt "$deadline" ] || die "the server was not ready within 90 s"
  sleep 0.5
done
log "server ready after $((SECONDS - started)) s"

# The image's healthcheck, as a runtime would run it: in the image, as its
# user, with its environment.
case "${img_health[0]}" in
  CMD) health_argv=("${img_health[@]:1}") ;;
  CMD-SHELL) health_argv=(/bin/sh -c "${img_health[1]}") ;;
  *) die "unexpected healthcheck ${img_health[*]}" ;;
esac
healthcheck() {
  chroot --userspec="$uid:$gid" "$mnt" /usr/bin/env -i "${run_env[@]}" "${health_argv[@]}"
}
healthcheck || die "the image's healthcheck failed against a ready server"
log "healthcheck passed"

# A point in, over line protocol, visible once answered; then read back.
status="$(curl -sS -o "$work/write.out" -w '%{http_code}' -XPOST \
  "$base_url/write?db=dockertest&precision=s&durability=visible" \
  --data-binary 'probe,source=image value=42.5,count=7i 1700000000')"
[ "$status" = 204 ] || die "write answered $status: $(cat "$work/write.out")"

got="$(curl -sS --fail-with-body "$base_url/sql?format=TSV" --data-binary \
  "SELECT toUnixTimestamp(time), source, value, count FROM dockertest.probe")" \
  || die "/sql failed: $got"
want="$(printf '1700000000\timage\t42.5\t7')"
[ "$got" = "$want" ] || die "/sql returned '$got', expected '$want'"
log "wrote and read back: $got"

# The same through ClickHouse's HTTP interface.
got="$(curl -sS --fail-with-body "http://127.0.0.1:$clickhouse_port/?database=dockertest" --data-binary \
  "SELECT toUnixTimestamp(time), source, value, count FROM probe")" \
  || die "the ClickHouse interface failed: $got"
[ "$got" = "$want" ] || die "the ClickHouse interface returned '$got', expected '$want'"
log "read back through the ClickHouse interface"

# The web UI, from the binary itself.
got="$(curl -sS -L --fail-with-body "$base_url/")" || die "the web UI failed: $got"
case "$got" in *'/ui/assets/js/app.js'*) ;; *) die "/ led to no UI page: $got" ;; esac
log "the web UI answers"

# The engine wrote into the volume as the image's user.
[ -n "$(find "$volume" -mindepth 1 -maxdepth 1 -print -quit)" ] || die "nothing written into the volume"
foreign="$(find "$volume" ! -uid "$uid" -print -quit)"
[ -z "$foreign" ] || die "$foreign in the volume is not owned by uid $uid"

# --- stop: SIGTERM, a clean exit, and a healthcheck that now fails ------------------------
kill -TERM "$server_pid"
stop_deadline=$((SECONDS + 60))
while kill -0 "$server_pid" 2>/dev/null; do
  [ "$SECONDS" -lt "$stop_deadline" ] || die "the server did not stop within 60 s of SIGTERM"
  sleep 0.2
done
exit_status=0
wait "$server_pid" || exit_status=$?
server_pid=""
[ "$exit_status" -eq 0 ] || die "the server exited with status $exit_status after SIGTERM"
log "server stopped cleanly"
! healthcheck 2>/dev/null || die "the image's healthcheck passed with no server"
