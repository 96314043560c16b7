#!/bin/sh
# Install logbox into a root file system: `make install DESTDIR=ROOT` (ROOT empty = this system).
# The layout is appliance/APPLIANCE.md "Layout"; the C programs come from build/bin (the release
# build of `make build`). Nothing here starts, enables or chowns anything: the units are
# enabled through logbox.target (WantedBy=multi-user.target) by the image build, the users come
# from sysusers.d and the directories from tmpfiles.d at boot.
set -eu

DESTDIR=${1:-}
TOP=$(cd "$(dirname "$0")/.." && pwd)
LIB=$DESTDIR/usr/lib/logbox
UNITS=$DESTDIR/usr/lib/systemd/system

die() { echo "install.sh: $*" >&2; exit 1; }

for p in logbox logbox-indexd logbox-searchd; do
	[ -x "$TOP/build/bin/$p" ] || die "build/bin/$p is missing: run make build first"
done

# copy_tree SRC DST: a Python package directory without caches
copy_tree() {
	mkdir -p "$2"
	(cd "$1" && find . -name __pycache__ -prune -o -type f ! -name '*.pyc' -print) |
	while IFS= read -r f; do
		install -D -m 0644 "$1/$f" "$2/$f"
	done
}

# the C programs
for p in logbox logbox-indexd logbox-searchd; do
	install -D -m 0755 "$TOP/build/bin/$p" "$LIB/bin/$p"
done
mkdir -p "$DESTDIR/usr/bin"
ln -sf ../lib/logbox/bin/logbox "$DESTDIR/usr/bin/logbox"

# the Python packages (PYTHONPATH of the web units), byte-compiled here: the units run on a
# read-only /usr and could not write their caches
rm -rf "$LIB/python"
copy_tree "$TOP/rpc/logbox_core" "$LIB/python/logbox_core"
copy_tree "$TOP/rpc/logbox_rpc" "$LIB/python/logbox_rpc"
copy_tree "$TOP/rpc/logbox_client" "$LIB/python/logbox_client"
copy_tree "$TOP/rpc/logbox_eps" "$LIB/python/logbox_eps"
copy_tree "$TOP/webui/logbox_webui" "$LIB/python/logbox_webui"
# (Debian's python3, the appliance's interpreter: the caches carry its version in their names)
if [ -x /usr/bin/python3 ]; then
	/usr/bin/python3 -m compileall -q -d /usr/lib/logbox/python "$LIB/python" >/dev/null ||
		die "python3 -m compileall failed on $LIB/python"
fi

# the client commands (the same as `pip install ./rpc` gives a second machine)
for c in logbox-eps:logbox_eps logbox-remote:logbox_client; do
	cat >"$DESTDIR/usr/bin/${c%%:*}.tmp" <<-EOF
	#!/bin/sh
	# ${c%%:*}: rpc/${c#*:}/cli.py (installed by appliance/install.sh)
	export PYTHONPATH=/usr/lib/logbox/python
	exec /usr/bin/python3 -c 'import sys; from ${c#*:}.cli import main; sys.exit(main())' "\$@"
	EOF
	chmod 0755 "$DESTDIR/usr/bin/${c%%:*}.tmp"
	mv "$DESTDIR/usr/bin/${c%%:*}.tmp" "$DESTDIR/usr/bin/${c%%:*}"
done

# the accounts store's admin CLI on the box (a lost password: reset-password), run as the
# API's user so that the store's files keep their owner
cat >"$DESTDIR/usr/bin/logbox-accounts.tmp" <<-'EOF'
	#!/bin/sh
	# logbox-accounts: rpc/logbox_core/accounts.py's CLI on /var/lib/logbox-accounts, as logbox-rpc
	# (installed by appliance/install.sh; appliance/APPLIANCE.md "A lost admin password")
	if [ "$(id -u)" != 0 ]; then
	    echo "logbox-accounts: run it as root" >&2
	    exit 1
	fi
	exec runuser -u logbox-rpc -- env PYTHONPATH=/usr/lib/logbox/python \
	    LOGBOX_ACCOUNTS=/var/lib/logbox-accounts /usr/bin/python3 -m logbox_core.accounts "$@"
	EOF
chmod 0755 "$DESTDIR/usr/bin/logbox-accounts.tmp"
mv "$DESTDIR/usr/bin/logbox-accounts.tmp" "$DESTDIR/usr/bin/logbox-accounts"

# the scheduled reports' CLI on the box (run-due now, list), as the reports' user
cat >"$DESTDIR/usr/bin/logbox-reports.tmp" <<-'EOF'
	#!/bin/sh
	# logbox-reports: rpc/logbox_core/reports.py's CLI, as logbox-reports (installed by
	# appliance/install.sh; appliance/APPLIANCE.md "Scheduled reports")
	if [ "$(id -u)" != 0 ]; then
	    echo "logbox-reports: run it as root" >&2
	    exit 1
	fi
	exec runuser -u logbox-reports -- env \
	    PYTHONPATH=/usr/lib/logbox/python LOGBOX_ACCOUNTS=/var/lib/logbox-accounts \
	    LOGBOX_SEARCHD_SOCKET=/run/logbox/searchd.sock \
	    LOGBOX_DELIVERY_SETTINGS=/etc/logbox/settings/notify.json \
	    /usr/bin/python3 -m logbox_core.reports "$@"
	EOF
chmod 0755 "$DESTDIR/usr/bin/logbox-reports.tmp"
mv "$DESTDIR/usr/bin/logbox-reports.tmp" "$DESTDIR/usr/bin/logbox-reports"

# the archive's CLI on the box (indexer/ARCHIVE.md): `logbox archive run|once|verify|list|status`
# as logbox-archive; `restore` as root (it writes the day into the store, owned by its owner)
cat >"$DESTDIR/usr/bin/logbox-archive.tmp" <<-'EOF'
	#!/bin/sh
	# logbox-archive: rpc/logbox_core/archive.py's CLI (installed by appliance/install.sh;
	# indexer/ARCHIVE.md). `logbox archive VERB ...` runs it too.
	if [ "$(id -u)" != 0 ]; then
	    echo "logbox-archive: run it as root" >&2
	    exit 1
	fi
	as="runuser -u logbox-archive --"
	[ "${1:-}" = restore ] && as=""
	exec $as env PYTHONPATH=/usr/lib/logbox/python LOGBOX_DATA=/var/lib/logbox \
	    LOGBOX_BIN=/usr/lib/logbox/bin/logbox \
	    LOGBOX_ARCHIVE_SETTINGS=/etc/logbox/settings/archive.json \
	    LOGBOX_ARCHIVE_STATE=/var/lib/logbox-archive /usr/bin/python3 -m logbox_core.archive "$@"
	EOF
chmod 0755 "$DESTDIR/usr/bin/logbox-archive.tmp"
mv "$DESTDIR/usr/bin/logbox-archive.tmp" "$DESTDIR/usr/bin/logbox-archive"

# what GET /api/v1/system says of the build (logbox_core/system.py)
commit=$(git -C "$TOP" rev-parse HEAD 2>/dev/null || true)
printf '{"commit": %s}\n' "$( [ -n "$commit" ] && printf '"%s"' "$commit" || echo null)" \
	>"$LIB/build.json"
chmod 0644 "$LIB/build.json"

# the collector's configuration renderer and the gunicorn configurations
install -D -m 0644 "$TOP/collector/render.py" "$LIB/collector/render.py"
install -D -m 0644 "$TOP/collector/appliance.toml" "$LIB/collector/appliance.toml"
install -D -m 0644 "$TOP/rpc/gunicorn.conf.py" "$LIB/gunicorn/rpc.conf.py"
install -D -m 0644 "$TOP/webui/gunicorn.conf.py" "$LIB/gunicorn/webui.conf.py"
# nginx in front of both (logbox-nginx.service): its configuration, rendered for the appliance
mkdir -p "$LIB/nginx"
python3 "$TOP/appliance/nginxconf.py" --appliance >"$LIB/nginx/nginx.conf.tmp" ||
	die "appliance/nginxconf.py --appliance failed"
chmod 0644 "$LIB/nginx/nginx.conf.tmp"
mv "$LIB/nginx/nginx.conf.tmp" "$LIB/nginx/nginx.conf"

# boot-time programs
for p in logbox-firstboot logbox-storage logbox-ready; do
	install -D -m 0755 "$TOP/appliance/libexec/$p" "$LIB/libexec/$p"
done

# units, users, directories, the firewall
for u in "$TOP"/appliance/systemd/*.service "$TOP"/appliance/systemd/*.timer \
	"$TOP"/appliance/systemd/*.target; do
	install -D -m 0644 "$u" "$UNITS/$(basename "$u")"
done
for d in "$TOP"/appliance/systemd/*.d; do
	[ -d "$d" ] || continue
	for f in "$d"/*.conf; do
		install -D -m 0644 "$f" "$UNITS/$(basename "$d")/$(basename "$f")"
	done
done
mkdir -p "$UNITS/multi-user.target.wants"
ln -sf ../logbox.target "$UNITS/multi-user.target.wants/logbox.target"
install -D -m 0644 "$TOP/appliance/sysusers.d/logbox.conf" "$DESTDIR/usr/lib/sysusers.d/logbox.conf"
install -D -m 0644 "$TOP/appliance/tmpfiles.d/logbox.conf" "$DESTDIR/usr/lib/tmpfiles.d/logbox.conf"
install -D -m 0644 "$TOP/appliance/modules-load.d/logbox.conf" \
	"$DESTDIR/usr/lib/modules-load.d/logbox.conf"
install -D -m 0644 "$TOP/appliance/nftables.conf" "$DESTDIR/etc/nftables.conf"
install -D -m 0644 "$TOP/appliance/README.md" "$LIB/README.md"
install -D -m 0644 "$TOP/appliance/sshd_config.d/logbox.conf" "$DESTDIR/etc/ssh/sshd_config.d/logbox.conf"
echo "install.sh: logbox installed into ${DESTDIR:-/}"
