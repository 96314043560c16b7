#!/bin/sh
# Installs what logbox needs on a Debian 12 machine: the Debian packages listed in
# appliance/debian-packages.txt, then a Python virtual environment in ./.venv with the pinned
# test packages of tests/requirements.txt. Idempotent: when everything is present it only checks.
# Downloads nothing but packages from Debian's and PyPI's registries.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

want=$(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' appliance/debian-packages.txt)
missing=""
for p in $want; do
	s=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[ "$s" = "installed" ] || missing="$missing $p"
done
if [ -n "$missing" ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "deps: missing Debian packages:$missing" >&2
		echo "deps: run 'make deps' as root (or apt-get install them) and try again" >&2
		exit 1
	fi
	echo "deps: installing Debian packages:$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

# The venv uses Debian's python3 (the interpreter the appliance runs) and sees its packages.
venv=.venv
stamp=$venv/.requirements.stamp
if [ ! -x $venv/bin/python ]; then
	echo "deps: creating $venv"
	/usr/bin/python3 -m venv --system-site-packages $venv
fi
if [ ! -f $stamp ] || ! cmp -s tests/requirements.txt $stamp; then
	echo "deps: installing Python test packages into $venv"
	$venv/bin/python -m pip install -q --disable-pip-version-check -r tests/requirements.txt
	cp tests/requirements.txt $stamp
fi
