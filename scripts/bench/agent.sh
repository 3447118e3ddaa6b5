#!/bin/sh
# The agent boundary's figures (issue 14), against the real daemon binary
# on the sim board, in one run: the round trip of an observe call
# (body_status) over AGENT_CALLS (1000) calls, and the push latency from
# an event's commit to its observation read by the client over
# AGENT_PUSHES (200) observations; each over the agent socket, through
# `tobe-body stdio`, and (as root) through a real sshd on loopback whose
# forced command is the bridge, side by side; each run times the SDK alone
# (its server and client in one process) as the calls' peer. The gate is
# configured to push every notice (agentbench says how). Goals (ours):
# socket p99 <= 2 ms, push p99 <= 20 ms on this machine. Figures of a
# shared machine: read them as such.
#
#   scripts/bench/agent.sh
#   BENCH_SHORT=1 scripts/bench/agent.sh   # 50 calls and 20 pushes each
set -eu
cd "$(dirname "$0")/../.."
. scripts/bench/lib.sh
calls=1000 pushes=200
short && calls=50 pushes=20
make -s build
vias="socket stdio"
# Through a real sshd on loopback too, where it can run (as root).
[ "$(id -u)" -eq 0 ] && [ -x /usr/sbin/sshd ] && vias="$vias ssh"
go build -o bin/agentbench ./scripts/bench/agentbench
for via in $vias; do
	bin/agentbench -bin "$(pwd)/bin/tobe-body" -via "$via" -calls "${AGENT_CALLS:-$calls}" -pushes "${AGENT_PUSHES:-$pushes}"
done
