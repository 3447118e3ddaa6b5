#!/bin/sh
# The recorded speech and noise the voice detector is judged by
# (sense/sound's corpus test and scripts/bench/sound.sh), taken from
# Debian's archive with apt-get download (the packages are unpacked here,
# never installed) and converted once by sox to 16 kHz mono 16-bit WAV:
#
#   speech/  pocketsphinx-testdata (BSD-2-Clause; its LibriVox readings
#            are in the public domain): five spoken card names
#            ("eight of spades four of clubs seven of hearts"), five
#            sentences read from Sense and Sensibility, "go forward",
#            numbers, "something": several speakers, natural pauses.
#            kajongg (GPL-2+): four voices, two men and two women, each
#            saying a game's calls and tiles ("dangerous game", "original
#            call", "no choice", "one bamboo").
#   noise/   btanks-data (GPL-2 with its exception): recorded ambiences of
#            a city, the country and a forest, a minute or more each.
#
# The files are data the tests read, not part of the body; each
# package's copyright file is kept beside them (licenses/). Prints the
# corpus directory; does nothing when it is there already.
#
#   scripts/voice-corpus.sh           into $VOICE_CORPUS, or
#                                     ~/.cache/tobe-body/voice-corpus
set -eu
dir=${VOICE_CORPUS:-${XDG_CACHE_HOME:-$HOME/.cache}/tobe-body/voice-corpus}
recipe=1
if [ -f "$dir/.ready" ] && [ "$(cat "$dir/.ready")" = "$recipe" ]; then
	echo "$dir"
	exit 0
fi
command -v sox >/dev/null 2>&1 || { echo "voice-corpus: sox is missing (scripts/deps.sh installs it)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
debs="pocketsphinx-testdata kajongg btanks-data"
# shellcheck disable=SC2086 # the package names are words
if ! (cd "$tmp" && apt-get download -q $debs >/dev/null 2>&1); then
	# The package lists may be older than the archive: once more after
	# an update.
	$SUDO apt-get update -qq >/dev/null 2>&1 || true
	(cd "$tmp" && apt-get download -q $debs >/dev/null) || {
		echo "voice-corpus: apt-get download $debs failed" >&2
		exit 1
	}
fi
for deb in "$tmp"/*.deb; do dpkg-deb -x "$deb" "$tmp/x"; done
rm -rf "$dir.new"
mkdir -p "$dir.new/speech" "$dir.new/noise" "$dir.new/licenses"
# to16k IN OUT [the input's format, for a headerless one]
to16k() {
	in=$1 out=$2
	shift 2
	sox -V1 "$@" "$in" -r 16000 -c 1 -b 16 -e signed-integer "$out"
}
ps=$tmp/x/usr/share/pocketsphinx/test/data
for f in "$ps"/cards/*.wav; do to16k "$f" "$dir.new/speech/cards-$(basename "$f")"; done
for f in "$ps"/librivox/*.wav; do
	n=$(basename "$f" .wav)
	to16k "$f" "$dir.new/speech/librivox-${n##*-}.wav"
done
for n in goforward numbers something; do
	to16k "$ps/$n.raw" "$dir.new/speech/$n.wav" -t raw -r 16000 -c 1 -b 16 -e signed-integer
done
kv=$tmp/x/usr/share/kajongg/voices
for v in male1 male2 female1 female2; do
	for n in dangerousgame originalcall nochoice violatesoriginalcall b1 c5 s9 we dr; do
		to16k "$kv/$v/$n.ogg" "$dir.new/speech/kajongg-$v-$n.wav"
	done
done
for n in city country forest; do
	to16k "$tmp/x/usr/share/games/btanks/data/sounds/ambient/$n.ogg" "$dir.new/noise/$n.wav"
done
cp "$tmp/x/usr/share/doc/pocketsphinx-testdata/copyright" "$dir.new/licenses/pocketsphinx-testdata"
cp "$tmp/x/usr/share/doc/kajongg/copyright" "$dir.new/licenses/kajongg"
cp "$kv/male1/COPYRIGHT" "$dir.new/licenses/kajongg-voices"
cp "$tmp/x/usr/share/doc/btanks-data/copyright" "$dir.new/licenses/btanks-data"
echo "$recipe" >"$dir.new/.ready"
rm -rf "$dir"
mkdir -p "$(dirname "$dir")"
mv "$dir.new" "$dir"
echo "$dir"
