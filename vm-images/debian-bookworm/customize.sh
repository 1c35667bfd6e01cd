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
install -d -m 755 "$root/etc/factory-init"
install -m 644 "$recipe/guest/fstab" "$root/etc/factory-init/fstab"
install -m 644 "$recipe/guest/network" "$root/etc/factory-init/network"
# The image has no host key of its own: each boot gets one from the host.
rm -f "$root"/etc/ssh/ssh_host_*_key "$root"/etc/ssh/ssh_host_*_key.pub
install -m 600 /dev/null "$root/etc/ssh/ssh_host_ed25519_key"
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
# A login shell (the app's shell tab) runs two programs from Debian's scripts before
# its prompt, each slow the first time after a snapshot restore because the emulator
# translates its code anew: `id -u` in /etc/profile, where bash's own EUID answers, and
# `mesg n` in root's .profile, which guards a terminal no other user can write to.
sed -i 's/"$(id -u)"/"${EUID:-$(id -u)}"/' "$root/etc/profile"
sed -i '/^mesg n/d' "$root/root/.profile"
# Debian packages a sandbox installs (setup, or the agent): dpkg's fsync after each
# unpacked file becomes a flush of the host's disk, and a sandbox's disk is thrown
# away with it (a setup cut short keeps no layer); apt fetches no translations of
# package descriptions, which nobody reads there and which apt would index on update,
# and takes the gzip package lists: under emulation `apt-get update` took 10.2 s
# with them against 12.8-14.9 s with xz (12.1 MB to download for bookworm main, not 8.8, and far less to unpack).
echo force-unsafe-io > "$root/etc/dpkg/dpkg.cfg.d/factory-unsafe-io"
printf '%s\n' 'Acquire::Languages "none";' 'Acquire::CompressionTypes::Order:: "gz";' > "$root/etc/apt/apt.conf.d/80factory-apt"
# factory-init only writes contents at boot; owners and modes are set here.
install -d -m 700 "$root/root/.ssh"
install -m 600 /dev/null "$root/root/.ssh/authorized_keys"
install -d -m 700 -o 1000 -g 1000 "$root/home/agent/.ssh"
install -m 600 -o 1000 -g 1000 /dev/null "$root/home/agent/.ssh/authorized_keys"

# Agent CLIs staged by the host build: one folder per CLI holding "binary" and
# "install-as" (the absolute path inside the guest), and the same pair under
# companions/N/ for each file of the package the CLI needs beside it.
for d in "$clis"/*/ "$clis"/*/companions/*/; do
  [ -f "$d/binary" ] || continue
  install -D -m 755 "$d/binary" "$root$(cat "$d/install-as")"
done

step packages
chroot "$root" dpkg-query -W -f '${Package}\t${Version}\n' > "$out/packages.tsv"

step kernel
kernel=$(ls "$root"/boot/vmlinuz-* | sort -V | tail -n 1)
kver=$(basename "$kernel" | sed 's/^vmlinuz-//')
cp "$kernel" "$out/vmlinuz"
echo "$kver" > "$out/kernel-release"

# Our own initrd (see guest/initrd-init): busybox, the virtio disk modules in
# dependency order, nothing else. Built inside the tree, where cpio is.
tiny="$root/tmp/factory-initrd"
rm -rf "$tiny"
mkdir -p "$tiny/bin" "$tiny/lib/modules"
cp "$root/bin/busybox" "$tiny/bin/busybox"
install -m 755 "$recipe/guest/initrd-init" "$tiny/init"
chroot "$root" modprobe --set-version "$kver" --show-depends -a virtio_pci virtio_blk \
  | awk '$1 == "insmod" && !seen[$2]++ { print $2 }' > "$tiny/modules.paths"
[ -s "$tiny/modules.paths" ] || { echo "no virtio modules found for $kver" >&2; exit 1; }
while read -r ko; do
  cp "$root$ko" "$tiny/lib/modules/"
  basename "$ko" >> "$tiny/modules.order"
done < "$tiny/modules.paths"
rm "$tiny/modules.paths"
chroot "$root" sh -c 'cd /tmp/factory-initrd && find . | cpio -o -H newc -R 0:0 --quiet' > "$out/initrd.img"
rm -rf "$tiny"

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
