#!/bin/sh
# mmdebstrap customize hook of the cached base (image/build.py): everything of the image that does
# not depend on logbox's own files. $1 is the root directory. Runs as root on the build host.
set -eu
root=$1

echo logbox >"$root/etc/hostname"
cat >"$root/etc/hosts" <<'HOSTS'
127.0.0.1	localhost
127.0.1.1	logbox
::1		localhost ip6-localhost ip6-loopback
HOSTS

# Root file system by label (grub.cfg says root=LABEL=logbox-root too).
cat >"$root/etc/fstab" <<'FSTAB'
# <file system>     <mount point> <type> <options>          <dump> <pass>
LABEL=logbox-root   /             ext4   errors=remount-ro  0      1
FSTAB

# DHCP on every wired interface, through systemd-networkd and systemd-resolved.
mkdir -p "$root/etc/systemd/network"
cat >"$root/etc/systemd/network/80-logbox-dhcp.network" <<'NET'
[Match]
Name=en* eth*

[Network]
DHCP=yes
NET

# sshd is off by default (first boot enables it when given a key); its host keys are made on the
# box, never shipped: remove the build's and make them before sshd starts.
rm -f "$root"/etc/ssh/ssh_host_*
mkdir -p "$root/etc/systemd/system/ssh.service.d"
cat >"$root/etc/systemd/system/ssh.service.d/logbox-hostkeys.conf" <<'SSH'
[Service]
ExecStartPre=/usr/bin/ssh-keygen -A
SSH

chroot "$root" systemctl enable systemd-networkd.service systemd-resolved.service \
	nftables.service serial-getty@ttyS0.service
chroot "$root" systemctl disable ssh.service
chroot "$root" systemctl mask ssh.socket
# Debian's own nginx service (port 80, as root) never runs: logbox-nginx.service is logbox's
chroot "$root" systemctl mask nginx.service

# No password anywhere: root is locked (the console shows a login prompt nobody can pass).
chroot "$root" passwd -l root

# Nothing of the build host: machine id made at first boot, no caches.
: >"$root/etc/machine-id"
rm -f "$root/var/lib/dbus/machine-id"
rm -rf "$root"/var/cache/apt/*.bin "$root"/var/log/*.log "$root"/var/log/apt/* "$root"/tmp/*
