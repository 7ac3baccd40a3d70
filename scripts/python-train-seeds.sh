#!/usr/bin/env bash
# python-train-seeds.sh trains python/examples/dqn_cartpole.py (PyTorch on
# trajring) for 5 seeds, one at a time (SEEDS="..." picks others), prints
# each seed's last lines and wall time, and fails unless every best network
# reaches a mean greedy return of at least 475 over 100 episodes and every
# run ends within 10 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-/usr/bin/python3}
SEEDS=${SEEDS:-"1 2 3 4 5"}
fail=0
for seed in $SEEDS; do
	t0=$(date +%s)
	out=$(PYTHONPATH=python timeout 600 "$PYTHON" python/examples/dqn_cartpole.py --seed "$seed") || {
		echo "seed $seed: FAIL (exit $?, over 10 minutes or an error)"; fail=1; continue; }
	wall=$(($(date +%s) - t0))
	line=$(echo "$out" | grep '^mean return over 100 greedy episodes:')
	speed=$(echo "$out" | grep '^env steps/s')
	best=$(echo "$line" | awk '{ print $7 }')
	echo "seed $seed: $line; $speed"
	awk -v b="$best" 'BEGIN { exit !(b + 0 >= 475) }' || { echo "seed $seed: FAIL (best $best < 475)"; fail=1; }
done
[ "$fail" = 0 ] && echo "python-train-seeds: PASS" || { echo "python-train-seeds: FAIL"; exit 1; }
