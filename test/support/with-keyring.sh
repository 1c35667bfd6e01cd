#!/usr/bin/env bash
# Runs CMD... inside a private D-Bus session with an unlocked gnome-keyring, so
# tests that need the OS keychain talk to a real Secret Service. The keyring
# files live in a temporary folder that is removed afterwards; the user's own
# keyrings are never touched.
#   usage: test/support/with-keyring.sh CMD [ARGS...]
set -euo pipefail
if [ "$#" -eq 0 ]; then
  echo "usage: $0 CMD [ARGS...]" >&2
  exit 2
fi
for tool in dbus-run-session gnome-keyring-daemon; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "with-keyring: '$tool' is missing (Debian/Ubuntu: apt-get install dbus gnome-keyring)" >&2
    exit 127
  fi
done

if [ "${FACTORY_IN_KEYRING_SESSION:-}" != "1" ]; then
  export FACTORY_IN_KEYRING_SESSION=1
  exec dbus-run-session -- bash "$0" "$@"
fi

# From here on we are inside the private session bus.
keyring_home="$(mktemp -d)"
cleanup() {
  if [ -n "${keyring_pid:-}" ]; then kill "$keyring_pid" 2>/dev/null || true; fi
  rm -rf "$keyring_home"
}
trap cleanup EXIT
# --foreground keeps the daemon our child (killed by pid on exit); the password
# on stdin creates and unlocks a throwaway login keyring.
printf '%s' "factory-test-keyring" | XDG_DATA_HOME="$keyring_home" \
  gnome-keyring-daemon --foreground --unlock --components=secrets >/dev/null 2>&1 &
keyring_pid=$!
# Wait until the Secret Service name is owned on the bus (max ~5 s).
for _ in $(seq 1 50); do
  if dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
       org.freedesktop.DBus.NameHasOwner string:org.freedesktop.secrets 2>/dev/null | grep -q 'boolean true'; then
    break
  fi
  sleep 0.1
done
set +e
"$@"
status=$?
exit $status
