#!/bin/sh
# The outbox's budget (RELIABILITY.md A2): a body's actions (two audit
# records each, with telemetry between) appended to a fresh ledger with
# no uplink configured, and with an uplink whose broker is down for the
# whole run, and with an outbox whose budget nothing reaches, side by side
# (scripts/bench/outboxbench): the outbox's rows and size against its
# budget, what was given up, and the rate of appends with the outbox
# over its budget against the rate under budget (A2: at least 0.8x) and
# against the rate with no outbox (no goal).
#
#   scripts/bench/outbox.sh                 # 250,000 actions a minute apart: 174 days of running
#   OUTBOX_ACTIONS=50000 scripts/bench/outbox.sh
#   BENCH_SHORT=1 scripts/bench/outbox.sh   # 5,000 actions 5 minutes apart (17 days), a budget of 8,000 rows
set -eu
cd "$(dirname "$0")/../.."
. scripts/bench/lib.sh
set -- -actions 250000 -every 1m
short && set -- -actions 5000 -every 5m -max-rows 8000
[ -n "${OUTBOX_ACTIONS:-}" ] && set -- "$@" -actions "$OUTBOX_ACTIONS"
bin=$(mktemp)
trap 'rm -f "$bin"' EXIT
go build -o "$bin" ./scripts/bench/outboxbench
"$bin" "$@"
