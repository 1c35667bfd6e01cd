#!/usr/bin/env bash
# Installs the system packages the app (or the test suite) needs. Uses apt-get
# when it can (root on Debian/Ubuntu, as in CI); otherwise prints the exact
# command to run and exits non-zero. Usage: ensure-system.sh [start|test]
set -euo pipefail
purpose="${1:-start}"

# command -> Debian package
declare -A need=(
  [qemu-system-x86_64]=qemu-system-x86
  [qemu-img]=qemu-utils
  [mmdebstrap]=mmdebstrap
  [mkfs.ext4]=e2fsprogs
  [socat]=socat
  [git]=git
  [prlimit]=util-linux
)
extra_pkgs=(debian-archive-keyring ca-certificates)
if [[ "$purpose" == "test" ]]; then
  need+=(
    [gnome-keyring-daemon]=gnome-keyring
    [secret-tool]=libsecret-tools
    [dbus-run-session]=dbus
    [chromium]=chromium
    [ssh]=openssh-client
    [curl]=curl
    # A stand-in remote sandbox host: libvirt (QEMU domains) reached over SSH.
    [virsh]=libvirt-clients
    [libvirtd]=libvirt-daemon-system
    [sshd]=openssh-server
  )
fi

missing=()
for cmd in "${!need[@]}"; do
  if ! command -v "$cmd" >/dev/null 2>&1 && ! [[ -x "/usr/sbin/$cmd" || -x "/sbin/$cmd" ]]; then
    missing+=("${need[$cmd]}")
  fi
done
# The Secret Service needs a D-Bus session daemon, which `dbus` alone may not pull in.
if [[ "$purpose" == "test" ]] && ! command -v dbus-daemon >/dev/null 2>&1; then missing+=(dbus-daemon); fi
[[ -e /usr/share/keyrings/debian-archive-keyring.gpg ]] || missing+=(debian-archive-keyring)
# GNU time measures git's peak memory in the tests (`command -v time` finds the shell keyword).
if [[ "$purpose" == "test" && ! -x /usr/bin/time ]]; then missing+=(time); fi

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "system packages: all present for '$purpose'"
  exit 0
fi
mapfile -t pkgs < <(printf '%s\n' "${missing[@]}" "${extra_pkgs[@]}" | sort -u)

if [[ "$(uname -s)" == "Darwin" ]]; then
  echo "Missing tools for '$purpose'. Install them with:" >&2
  echo "  brew install qemu socat git e2fsprogs" >&2
  exit 1
fi

if command -v apt-get >/dev/null 2>&1 && [[ "$(id -u)" == "0" ]]; then
  echo "installing system packages: ${pkgs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends "${pkgs[@]}"
  exit 0
fi

echo "Missing system packages for '$purpose': ${pkgs[*]}" >&2
echo "Install them with:" >&2
echo "  sudo apt-get update && sudo apt-get install -y --no-install-recommends ${pkgs[*]}" >&2
exit 1
