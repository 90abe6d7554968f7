#!/bin/sh
# apt-get ARGS…, as root (sudo when not root), non-interactive, waiting for
# another package tool that holds apt's or dpkg's lock (an install in another
# terminal, unattended upgrades) instead of failing at once: apt's own
# DPkg::Lock::Timeout, and a retry while apt says the lock is taken (apt-get
# update's lists lock). Gives up after about ten minutes, or at once on any
# other failure, with apt's own message and what was being installed.
set -u
sudo=; [ "$(id -u)" -eq 0 ] || sudo=sudo
tries=120
while :; do
	out=$($sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 "$@" 2>&1) && exit 0
	case "$out" in
	*"Could not get lock"* | *"Unable to lock"* | *"Unable to acquire the dpkg frontend lock"*)
		tries=$((tries - 1))
		if [ "$tries" -gt 0 ]; then
			[ "$tries" -eq 119 ] && echo "setup: waiting for another package install to finish (apt's lock is taken)" >&2
			sleep 5
			continue
		fi ;;
	esac
	printf '%s\n' "$out" >&2
	echo "setup: apt-get $* failed (above); nothing was built" >&2
	exit 1
done
