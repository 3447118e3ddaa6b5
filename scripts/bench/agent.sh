#!/bin/sh
# The agent boundary's figures (issue 14), against the real daemon binary
# on the sim board, in one run: the round trip of an observe call
# (body_status) over AGENT_CALLS (1000) calls, and the push latency from
# an event's commit to its observation read by the client over
# AGENT_PUSHES (200) observations; each over the agent socket, through
# `tobe-body stdio`, and (as root) through a real sshd on loopback whose
# forced command is the bridge, side by side. Goals (ours): socket p99 <= 2 ms, push
# p99 <= 20 ms on this machine. Figures of a shared machine: read them as
# such.
#
#   scripts/bench/agent.sh
set -eu
cd "$(dirname "$0")/../.."
make -s build
vias="socket stdio"
# Through a real sshd on loopback too, where it can run (as root).
[ "$(id -u)" -eq 0 ] && [ -x /usr/sbin/sshd ] && vias="$vias ssh"
# The peer (the SDK alone, in one process) is timed in the first run.
peer=-peer
for via in $vias; do
	go run ./scripts/bench/agentbench -bin "$(pwd)/bin/tobe-body" -via "$via" $peer -calls "${AGENT_CALLS:-1000}" -pushes "${AGENT_PUSHES:-200}"
	peer=
done
