#!/bin/sh
# Installs the Debian packages named on the command line that are missing.
# Runs apt-get only when something is missing, and only as root; otherwise
# it names what to install and fails.
set -eu
missing=""
for pkg in "$@"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed'; then
    missing="$missing $pkg"
  fi
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing Debian packages:$missing" >&2
  echo "install-deps: run as root, or: sudo apt-get install$missing" >&2
  exit 1
fi
echo "install-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
