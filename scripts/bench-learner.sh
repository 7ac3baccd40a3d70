#!/usr/bin/env bash
# bench-learner.sh compares the DQN learner's gradient step with PyTorch's
# in one run: for each core count in CORES (default "1 2") it alternates
# ROUNDS (default 7) rounds of agents/dqn's BenchmarkTrainStep (GOMAXPROCS
# set to the core count, STEPS steps a round) and of
# scripts/learner_step.py doing the same step (torch.set_num_threads and
# OPENBLAS_NUM_THREADS/OMP_NUM_THREADS set to the core count), swapping
# which goes first every round so that neither always runs on a machine
# the other just warmed or loaded. It prints every round, then per core
# count the median wall ms per step of each side (with the range), the
# ratio PyTorch/Go (above 1: the Go learner is faster), and the median CPU
# ms per step (all threads), which other work on a shared machine
# disturbs less.
#
# PyTorch's OpenMP threads wait passively (OMP_WAIT_POLICY=PASSIVE, or
# TORCH_OMP_WAIT_POLICY): with libgomp's default spinning, two threads on
# a 2-core machine shared with other processes took 20-50x longer per
# step, which would make PyTorch no fair peer.
#
# The Go side is the default pure-Go build (CGO_ENABLED=0). BASE names an
# extra test binary of agents/dqn (an older commit's, say) run in the same
# rotation and reported as "base". PYTHON defaults to /usr/bin/python3
# (Debian's python3-torch, with libopenblas0-pthread for a fair BLAS).
set -euo pipefail
CORES=${CORES:-1 2}
ROUNDS=${ROUNDS:-7}
STEPS=${STEPS:-300}
GO=${GO:-go}
PYTHON=${PYTHON:-/usr/bin/python3}
cd "$(dirname "$0")/.."
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-learner.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

CGO_ENABLED=0 $GO test -c -o "$tmp/dqn.test" ./agents/dqn
"$PYTHON" -c 'import torch' || {
	echo "bench-learner: $PYTHON cannot import torch" >&2
	exit 1
}
blas=$("$PYTHON" -c 'import torch; print(torch.__config__.show())' | grep -o 'BLAS_INFO=[a-z]*' || true)
lib=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || echo unknown)
echo "bench-learner: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, $ROUNDS rounds of $STEPS steps," \
	"torch $("$PYTHON" -c 'import torch; print(torch.__version__)') ($blas, libblas.so.3 -> $lib)"

sides="go torch"
[ -n "${BASE:-}" ] && sides="$sides base"

gostep() { # binary cores -> wall and CPU ms per step
	GOMAXPROCS=$2 "$1" -test.run '^$' -test.bench '^BenchmarkTrainStep$' -test.benchtime "${STEPS}x" |
		awk '/^BenchmarkTrainStep/ { cpu = "nan"; for (i = 4; i < NF; i++) if ($(i+1) == "cpu-ns/op") cpu = $i / 1e6
			printf "%.4f %s\n", $3 / 1e6, cpu }'
}

torchstep() { # cores -> wall and CPU ms per step
	OMP_WAIT_POLICY=${TORCH_OMP_WAIT_POLICY:-PASSIVE} OPENBLAS_NUM_THREADS=$1 OMP_NUM_THREADS=$1 \
		"$PYTHON" scripts/learner_step.py "$1" 1 "$STEPS" | awk '{ print $3, $4 }'
}

: >"$tmp/results"
for n in $CORES; do
	for r in $(seq 1 "$ROUNDS"); do
		order=$sides
		if [ $((r % 2)) -eq 0 ]; then
			order=$(echo "$sides" | tr ' ' '\n' | tac | tr '\n' ' ')
		fi
		for s in $order; do
			case $s in
			go) ms=$(gostep "$tmp/dqn.test" "$n") ;;
			base) ms=$(gostep "$BASE" "$n") ;;
			torch) ms=$(torchstep "$n") ;;
			esac
			echo "round $r cores $n $s ${ms% *} ms/step (CPU ${ms#* } ms)"
			echo "$n $s $ms" >>"$tmp/results"
		done
	done
done

"$PYTHON" - "$tmp/results" <<'EOF'
import statistics
import sys

rows = [line.split() for line in open(sys.argv[1])]
wall, cpu = {}, {}
for n, side, ms, cms in rows:
    wall.setdefault(int(n), {}).setdefault(side, []).append(float(ms))
    cpu.setdefault(int(n), {}).setdefault(side, []).append(float(cms))
print("cores  side   median ms/step  (min-max)        torch/side   median CPU ms/step")
for n in sorted(wall):
    med = {s: statistics.median(v) for s, v in wall[n].items()}
    for s, v in wall[n].items():
        print(f"{n:5d}  {s:5s}  {med[s]:14.3f}  ({min(v):.3f}-{max(v):.3f})  {med['torch'] / med[s]:9.2f}x"
              f"  {statistics.median(cpu[n][s]):12.3f}")
EOF
