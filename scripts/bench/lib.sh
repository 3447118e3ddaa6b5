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
# ratio is VALUE ÷ PEER, with four significant digits.
figure() {
	awk -v n="$1" -v v="$2" -v u="$3" -v p="${4:--}" -v g="${5:--}" -v vs="${6:--}" 'BEGIN {
		r = "-"
		if (p != "-" && p + 0 != 0) r = sprintf("%.4g", v / p)
		printf "figure: name=%s value=%s unit=%s peer=%s ratio=%s goal=%s vs=%s\n", n, v, u, p, r, g, vs
	}'
}

# short: whether this is the short form (BENCH_SHORT=1): seconds, not
# minutes, through the whole path, for make bench-smoke.
short() { [ "${BENCH_SHORT:-}" = 1 ]; }
