# Sourced by the benchmarks under scripts/bench: the one way a bench
# prints a figure for the table (scripts/bench/run.sh, make bench), and
# the short form every bench has (BENCH_SHORT=1, make bench-smoke).
#
# A figure is one line, besides the bench's own words:
#
#   figure: name=NAME value=V unit=U peer=P ratio=R goal=G vs=WHO
#
# NAME is dotted words (agent.call.socket.p99); V a number; U its unit
# (one word: ms, MiB, events/s, x); P the peer's value in the same unit,
# or - where the figure has no peer; R is V ÷ P (-, without a peer);
# G the goal: value<=N, value>=N, ratio<=N, ratio>=N, or - for a figure
# shown without one; WHO names the peer in one word (bbolt-update,
# opencv-python, empty-ledger), or -. Package figure in Go reads and
# prints the same lines.

# figure NAME VALUE UNIT [PEER [GOAL [VS]]]: prints a figure line. The
# ratio is VALUE ÷ PEER, with four significant digits. A VALUE or PEER
# that is not a number fails (the bench lost its figure: it says so).
figure() {
	isnum "$2" || { echo "figure $1: the value \"$2\" is not a number" >&2; return 1; }
	[ "${4:--}" = - ] || isnum "$4" || { echo "figure $1: the peer \"$4\" is not a number" >&2; return 1; }
	awk -v n="$1" -v v="$2" -v u="$3" -v p="${4:--}" -v g="${5:--}" -v vs="${6:--}" 'BEGIN {
		r = "-"
		if (p != "-" && p + 0 != 0) r = sprintf("%.4g", v / p)
		printf "figure: name=%s value=%s unit=%s peer=%s ratio=%s goal=%s vs=%s\n", n, v, u, p, r, g, vs
	}'
}

# isnum S: whether S is a decimal number (1, -2.5, .5, 1.5e3).
isnum() {
	awk -v v="$1" 'BEGIN { exit !(v ~ /^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$/) }'
}

# short: whether this is the short form (BENCH_SHORT=1): seconds, not
# minutes, through the whole path, for make bench-smoke.
short() { [ "${BENCH_SHORT:-}" = 1 ]; }

# figures: a figure for each line of standard input, whose words are
# figure's arguments (NAME VALUE UNIT [PEER [GOAL [VS]]]): for the figures
# an awk program computes.
figures() {
	while read -r n v u p g vs; do
		figure "$n" "$v" "$u" "${p:--}" "${g:--}" "${vs:--}"
	done
}

# startcase NAME DIR: the daemon's start to READY=1 and an offline
# `ledger events --limit 5` on the data directory DIR, each warmed once
# and then run $runs times, by startupbench ($bench) and the body ($bin);
# the medians go to $out/NAME.start and $out/NAME.exec. A daemon that
# built projections at open was not given a file its fill wrote with the
# daemon's options: that fails the bench.
startcase() {
	name=$1 dir=$2
	log="$out/$name.log"
	"$bench" start -runs 1 -log "$log" -- "$bin" run --board sim --data "$dir" >/dev/null
	echo "$name: run to READY=1"
	"$bench" start -runs "$runs" -log "$log" -- "$bin" run --board sim --data "$dir" | tee "$out/$name.start"
	"$bench" exec -runs 1 -- "$bin" ledger events --limit 5 --data "$dir" >/dev/null
	echo "$name: ledger events --limit 5 (offline)"
	"$bench" exec -runs "$runs" -- "$bin" ledger events --limit 5 --data "$dir" | tee "$out/$name.exec"
	if grep -q "projections built" "$log"; then
		echo "$name: the daemon built projections at open: the fill's options are not the daemon's" >&2
		exit 1
	fi
}
