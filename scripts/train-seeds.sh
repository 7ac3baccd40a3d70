#!/usr/bin/env bash
# train-seeds.sh runs `trajring train` with the default flags for each of
# SEEDS (default 1 2 3 4 5), JOBS at a time (default 1), and prints one
# row per seed: the mean return over 100 greedy episodes of the best
# network (best.gob) and the env steps it was found at, the last
# network's (q.gob), the env steps of the first evaluation reaching 475,
# and the wall time; then how many seeds reached 475 with each network.
# Each run's output and files stay in OUT/seed-N (default: a temporary
# directory, printed). Extra arguments are passed to every run. BIN names
# a trajring binary to run instead of building ./cmd/trajring.
set -euo pipefail
SEEDS=${SEEDS:-1 2 3 4 5}
JOBS=${JOBS:-1}
GO=${GO:-go}
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/trajring-train-seeds.XXXXXX")}
mkdir -p "$OUT"
if [ -n "${BIN:-}" ]; then
	cp "$BIN" "$OUT/trajring"
else
	CGO_ENABLED=0 $GO build -o "$OUT/trajring" ./cmd/trajring
fi
echo "train-seeds: $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -m), $(nproc) CPUs, outputs in $OUT" >&2

one() {
	s=$1
	shift
	start=$(date +%s)
	if "$OUT/trajring" train -seed "$s" -out "$OUT/seed-$s" -progress 0 "$@" >"$OUT/seed-$s.log" 2>&1; then
		echo $(($(date +%s) - start)) >"$OUT/seed-$s.wall"
	else
		echo "train-seeds: seed $s failed:" >&2
		cat "$OUT/seed-$s.log" >&2
		return 1
	fi
}

running=0
for s in $SEEDS; do
	one "$s" "$@" &
	running=$((running + 1))
	if [ "$running" -ge "$JOBS" ]; then
		wait -n || true # a failed seed is reported by one()
		running=$((running - 1))
	fi
done
wait

printf '%-6s %-10s %-10s %-10s %-12s %s\n' seed best found_at last first_475 wall_s
nb=0
nl=0
n=0
for s in $SEEDS; do
	log="$OUT/seed-$s.log"
	best=$(sed -n 's/^mean return over [0-9]* greedy episodes: \([0-9.]*\) (best, found at \([0-9]*\) env steps)$/\1 \2/p' "$log")
	last=$(sed -n 's/^last network (q.gob, [0-9]* env steps): mean return over [0-9]* greedy episodes: \([0-9.]*\)$/\1/p' "$log")
	first=$(sed -n 's/^first greedy evaluation >= 475 at \([0-9]*\) env steps$/\1/p' "$log")
	set -- $best
	printf '%-6s %-10s %-10s %-10s %-12s %s\n' "$s" "${1:--}" "${2:--}" "${last:--}" "${first:--}" "$(cat "$OUT/seed-$s.wall" 2>/dev/null || echo failed)"
	n=$((n + 1))
	awk -v v="${1:-0}" 'BEGIN { exit !(v >= 475) }' && nb=$((nb + 1))
	awk -v v="${last:-0}" 'BEGIN { exit !(v >= 475) }' && nl=$((nl + 1))
done
echo "best >= 475: $nb/$n seeds; last >= 475: $nl/$n seeds"
