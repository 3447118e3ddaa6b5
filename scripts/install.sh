#!/bin/sh
# Installs tobe-body on a board that already runs a Debian-based system
# (Raspberry Pi OS, NVIDIA's Jetson Linux, Debian, Ubuntu): the binary
# for the machine's architecture, the systemd unit, the udev rules, the
# system user tobe-body with the devices' groups (gpio, video, audio,
# input), the default config and the schemas (scripts/stage.sh lists the
# files), and the runtime libraries the binary links (PortAudio, ALSA);
# then it starts the body and prints the SSH forced-command line for the
# agent's key.
#
# From a release tarball (make dist):    sudo ./install.sh
# From a checkout, after make build:     sudo scripts/install.sh [--binary bin/tobe-body]
#
#   --no-start     install and enable, but do not start the body now
#   --uninstall    stop the body and remove what was installed; the data
#                  (/var/lib/tobe-body), the config (/etc/tobe-body) and
#                  the user stay
#   --purge        with --uninstall: remove those too
set -eu

here=$(cd "$(dirname "$0")" && pwd)
binary="" start=yes uninstall="" purge=""
while [ $# -gt 0 ]; do
	case $1 in
	--binary) binary=${2:?--binary needs a file}; shift ;;
	--no-start) start="" ;;
	--uninstall) uninstall=yes ;;
	--purge) purge=yes ;;
	-h | --help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "install: unknown argument \"$1\" (see --help)" >&2; exit 2 ;;
	esac
	shift
done
[ -z "$purge" ] || [ -n "$uninstall" ] || { echo "install: --purge goes with --uninstall" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "install: run it as root (sudo $0)" >&2; exit 1; }

say() { echo "install: $*"; }

# The tree to install: a tarball's own (usr/ beside this script), or one
# staged from the checkout this script is in.
tree=$here
if [ ! -f "$here/usr/bin/tobe-body" ]; then
	[ -x "$here/stage.sh" ] || { echo "install: no usr/bin/tobe-body beside $0, and no checkout to stage one from" >&2; exit 1; }
	binary=${binary:-$here/../bin/tobe-body}
	[ -f "$binary" ] || { echo "install: no binary at $binary: run make build first, or give --binary FILE" >&2; exit 1; }
	tree=$(mktemp -d)
	trap 'rm -rf "$tree"' EXIT
	"$here/stage.sh" "$tree" "$binary"
elif [ -n "$binary" ]; then
	echo "install: --binary is for a checkout; this tarball brings its own" >&2
	exit 2
fi
files=$(cd "$tree" && find usr -type f | sort)

if [ -n "$uninstall" ]; then
	if command -v systemctl >/dev/null 2>&1; then
		systemctl disable --now tobe-body.service 2>/dev/null || true
	fi
	for f in $files; do
		rm -f "/$f"
	done
	rmdir /usr/share/tobe-body/boards /usr/share/tobe-body /usr/share/doc/tobe-body 2>/dev/null || true
	if command -v systemctl >/dev/null 2>&1; then systemctl daemon-reload; fi
	if command -v udevadm >/dev/null 2>&1; then udevadm control --reload || true; fi
	if [ -n "$purge" ]; then
		rm -rf /var/lib/tobe-body /etc/tobe-body
		if id tobe-body >/dev/null 2>&1; then userdel tobe-body; fi
		say "removed tobe-body, its data, its config and its user"
	else
		say "removed tobe-body; kept its data (/var/lib/tobe-body), its config (/etc/tobe-body) and its user (--purge removes them)"
	fi
	exit 0
fi

# The binary must be this machine's: its ELF machine against the
# system's architecture (dpkg's, which is the userland's: a 32-bit
# Raspberry Pi OS runs on a 64-bit kernel).
machine=$(od -An -t u2 -j 18 -N 2 "$tree/usr/bin/tobe-body" | tr -d ' ')
case $machine in
62) bin_arch=amd64 ;;
183) bin_arch=arm64 ;;
40) bin_arch=armhf ;;
*) echo "install: usr/bin/tobe-body is no binary this script knows (ELF machine $machine)" >&2; exit 1 ;;
esac
if command -v dpkg >/dev/null 2>&1; then
	sys_arch=$(dpkg --print-architecture)
else
	case $(uname -m) in
	x86_64) sys_arch=amd64 ;;
	aarch64 | arm64) sys_arch=arm64 ;;
	armv7* | armv8l) sys_arch=armhf ;;
	*) sys_arch=$(uname -m) ;;
	esac
fi
[ "$bin_arch" = "$sys_arch" ] || { echo "install: this binary is for $bin_arch and this system is $sys_arch: take the $sys_arch tarball" >&2; exit 1; }

# The libraries it links (the audio driver is PortAudio over ALSA).
if grep -q 'libportaudio\.so' "$tree/usr/bin/tobe-body"; then
	if command -v apt-get >/dev/null 2>&1; then
		say "installing PortAudio and ALSA's libraries"
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libportaudio2 libasound2 >/dev/null
	else
		say "no apt-get: install PortAudio (libportaudio.so.2) and ALSA yourself"
	fi
fi

# The user and the devices' groups; gpio is Raspberry Pi OS's name for
# the GPIO chips' group (the udev rules give them to it).
for g in gpio video audio input; do
	getent group "$g" >/dev/null || groupadd --system "$g"
done
getent group tobe-body >/dev/null || groupadd --system tobe-body
if id tobe-body >/dev/null 2>&1; then
	usermod --append --groups gpio,video,audio,input tobe-body
else
	useradd --system --gid tobe-body --groups gpio,video,audio,input --home-dir /var/lib/tobe-body --no-create-home --shell /usr/sbin/nologin tobe-body
fi

for f in $files; do
	case $f in
	usr/bin/*) mode=0755 ;;
	*) mode=0644 ;;
	esac
	install -D -m "$mode" "$tree/$f" "/$f"
done
install -d -m 0755 /etc/tobe-body
if [ ! -e /etc/tobe-body/config.json ]; then
	printf '{\n  "version": 1\n}\n' >/etc/tobe-body/config.json
	say "wrote /etc/tobe-body/config.json: your settings go there (tobe-body config check checks them)"
fi
/usr/bin/tobe-body version >/dev/null || { echo "install: the installed binary does not run" >&2; exit 1; }

if command -v udevadm >/dev/null 2>&1; then
	udevadm control --reload || true
	udevadm trigger --subsystem-match=gpio --subsystem-match=video4linux --subsystem-match=sound --subsystem-match=input || true
fi
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
	systemctl daemon-reload
	if [ -n "$start" ]; then
		systemctl enable --now tobe-body.service
		say "tobe-body is $(systemctl is-active tobe-body.service)"
	else
		systemctl enable tobe-body.service
	fi
else
	say "systemd is not running here: start /usr/bin/tobe-body run yourself"
fi

say "installed $(/usr/bin/tobe-body version | head -n 1)"
cat <<'MSG'
install: for the agent, add its key to the authorized_keys of the user it
logs in as, with the forced command (README, "the agent"):
  restrict,command="tobe-body stdio --principal tobe-agent" ssh-ed25519 AAAA... agent@home-server
and name that principal in /etc/tobe-body/config.json (agent.principals).
MSG
