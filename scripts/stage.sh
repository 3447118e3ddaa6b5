#!/bin/sh
# Lays out what a body installs, under DESTDIR, from this repository and
# a built binary: the one list of shipped files, used by scripts/install.sh
# (DESTDIR /), make dist (a tarball's tree) and the Buildroot package
# (its target directory).
#
#   scripts/stage.sh DESTDIR BINARY
#
#   usr/bin/tobe-body                              the binary
#   usr/lib/systemd/system/tobe-body.service       the unit
#   usr/lib/udev/rules.d/60-tobe-body.rules        the devices to the body's groups
#   usr/share/tobe-body/config.default.json        the image's layer of the config
#   usr/share/tobe-body/config.schema.json         the config's schema
#   usr/share/tobe-body/profile.schema.json        the board profiles' schema
#   usr/share/tobe-body/boards/NAME.json           the built-in board profiles, to copy from
#   usr/share/doc/tobe-body/README.md              the README
#   usr/share/doc/tobe-body/authorized_keys.example the agent's forced-command key line
#   usr/share/doc/tobe-body/LICENSE                the body's license
#   usr/share/doc/tobe-body/third-party-licenses.txt  the licenses and notices of the
#                                                  Go modules linked in (make licenses)
set -eu
[ $# -eq 2 ] || { echo "usage: scripts/stage.sh DESTDIR BINARY" >&2; exit 2; }
dest=$1 bin=$2
src=$(cd "$(dirname "$0")/.." && pwd)
[ -f "$bin" ] || { echo "stage: no binary at $bin" >&2; exit 1; }
install -D -m 0755 "$bin" "$dest/usr/bin/tobe-body"
install -D -m 0644 "$src/systemd/tobe-body.service" "$dest/usr/lib/systemd/system/tobe-body.service"
install -D -m 0644 "$src/systemd/60-tobe-body.rules" "$dest/usr/lib/udev/rules.d/60-tobe-body.rules"
install -D -m 0644 "$src/body/config/config.default.json" "$dest/usr/share/tobe-body/config.default.json"
install -D -m 0644 "$src/body/config/config.schema.json" "$dest/usr/share/tobe-body/config.schema.json"
install -D -m 0644 "$src/board/profile.schema.json" "$dest/usr/share/tobe-body/profile.schema.json"
for p in "$src"/board/profiles/*.json; do
	install -D -m 0644 "$p" "$dest/usr/share/tobe-body/boards/$(basename "$p")"
done
install -D -m 0644 "$src/README.md" "$dest/usr/share/doc/tobe-body/README.md"
install -D -m 0644 "$src/systemd/authorized_keys.example" "$dest/usr/share/doc/tobe-body/authorized_keys.example"
install -D -m 0644 "$src/LICENSE" "$dest/usr/share/doc/tobe-body/LICENSE"
install -D -m 0644 "$src/scripts/licenses/third-party.txt" "$dest/usr/share/doc/tobe-body/third-party-licenses.txt"
