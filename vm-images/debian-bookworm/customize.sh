#!/bin/sh
# mmdebstrap customize hook: turns the freshly installed tree into a sandbox
# root and writes the build outputs. It runs in mmdebstrap's namespace, so files
# appear root-owned here in every mmdebstrap mode, and mkfs.ext4 -d records that.
#   $1 root tree   $2 recipe dir   $3 output dir   $4 staged agent CLIs dir
#   $5 disk size in MiB
set -eu
root=$1 recipe=$2 out=$3 clis=$4 disk_mb=$5
step() { echo "factory-step: $*"; }

step configure
# Guest init and services (see guest/factory-init).
install -m 755 "$recipe/guest/factory-init" "$root/sbin/factory-init"
install -D -m 755 "$recipe/guest/factory-services" "$root/usr/local/sbin/factory-services"
install -m 644 "$recipe/guest/sshd_config" "$root/etc/ssh/sshd_config"
rm -f "$root"/etc/ssh/ssh_host_*_key "$root"/etc/ssh/ssh_host_*_key.pub
echo factory-sandbox > "$root/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 factory-sandbox\n::1 localhost\n' > "$root/etc/hosts"
printf 'nameserver 10.0.2.3\n' > "$root/etc/resolv.conf"
: > "$root/etc/fstab"

# The unprivileged user agents run as (Claude Code refuses to skip its
# permission prompts as root). "*" rather than "!" so sshd (UsePAM no) lets the
# per-sandbox key in.
chroot "$root" useradd --uid 1000 --user-group --create-home --home-dir /home/agent --shell /bin/bash agent
chroot "$root" usermod -p '*' agent
install -d -m 755 -o 1000 -g 1000 "$root/work"

# Agent CLIs staged by the host build: one folder per CLI holding "binary" and
# "install-as" (the absolute path inside the guest).
for d in "$clis"/*/; do
  [ -f "$d/binary" ] || continue
  install -D -m 755 "$d/binary" "$root$(cat "$d/install-as")"
done

step packages
chroot "$root" dpkg-query -W -f '${Package}\t${Version}\n' > "$out/packages.tsv"

step kernel
kernel=$(ls "$root"/boot/vmlinuz-* | sort -V | tail -n 1)
initrd=$(ls "$root"/boot/initrd.img-* | sort -V | tail -n 1)
cp "$kernel" "$out/vmlinuz"
cp "$initrd" "$out/initrd.img"
basename "$kernel" | sed 's/^vmlinuz-//' > "$out/kernel-release"

rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/var/log/*.log

step disk
rm -f "$out/disk.raw"
truncate -s "${disk_mb}M" "$out/disk.raw"
# mmdebstrap has /proc, /sys and /dev mounted in the tree while hooks run:
# mkfs.ext4 -d gets a hard-linked copy that stays on this filesystem (cp -x).
stage="$out/.work/stage"
rm -rf "$stage"
mkdir -p "$stage"
cp -a -x -l "$root/." "$stage/"
mkfs.ext4 -q -F -L factory-root -m 0 -E lazy_itable_init=0,lazy_journal_init=0 -d "$stage" "$out/disk.raw"
rm -rf "$stage"
