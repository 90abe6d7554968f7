#!/bin/sh
# Installs Debian's package PACKAGE unless BINARY exists, for the tests that
# run a real peer beside chingest (Prometheus, InfluxDB 1.6). Their own
# tests start them on free ports: the package's service is neither started
# by the install (a policy-rc.d that forbids it is in place meanwhile,
# unless one already is) nor enabled at boot (InfluxDB's would take 8086,
# chingest's port).
#
# Usage: tests/apt-install.sh BINARY PACKAGE
set -eu
binary=$1 package=$2
[ -x "$binary" ] && exit 0
sudo=; [ "$(id -u)" -eq 0 ] || sudo=sudo
echo "setup: installing $package (Debian's package, for $binary)" >&2
policy=/usr/sbin/policy-rc.d own=
if [ ! -e $policy ]; then
	printf '#!/bin/sh\nexit 101\n' | $sudo tee $policy >/dev/null
	$sudo chmod 755 $policy
	own=1
fi
status=0
apt_get="$(dirname "$0")/../engine/apt-get.sh"
"$apt_get" update -qq &&
	"$apt_get" install -y -qq --no-install-recommends "$package" >/dev/null ||
	status=$?
[ -z "$own" ] || $sudo rm -f $policy
[ $status -eq 0 ] || exit $status
if [ -d /run/systemd/system ]; then $sudo systemctl disable --now "$package.service" >/dev/null 2>&1 || true; fi
if command -v update-rc.d >/dev/null; then $sudo update-rc.d "$package" disable >/dev/null 2>&1 || true; fi
test -x "$binary"
