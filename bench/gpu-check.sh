#!/usr/bin/env bash
# gpu-check.sh proves the cuda build on a real NVIDIA GPU in two steps.
#
#   bench/gpu-check.sh build [DIR]   on the build machine (Go + CUDA toolkit):
#       compiles `go test -c -tags cuda` binaries of every package whose
#       tests run on the gpu backend into DIR (default build/gpu-check),
#       stripped and gzipped (about 25 MB in all), with a copy of this script.
#   bench/gpu-check.sh run [DIR]     on the GPU machine (NVIDIA driver and
#       compute-sanitizer; no Go needed): runs the tests, the gpu tests
#       again under `compute-sanitizer --tool memcheck`, and the GPU
#       benchmarks, then prints one summary table: per operation, µs per
#       call, effective GB/s and the fraction of a device-to-device copy of
#       the same bytes measured in the same run. Finishes in under 8
#       minutes (every step has a time limit).
#
# The binaries link libcuda.so.1 dynamically; on the GPU machine the real
# driver must be what the loader finds (not the stand-in from make standin).
set -uo pipefail

cmd=${1:-}
dir=${2:-build/gpu-check}

build() {
	set -e
	cd "$(dirname "$0")/.."
	mkdir -p "$dir/bin"
	export CGO_LDFLAGS="${CGO_LDFLAGS:-} -L${CUDA_STUBS:-/usr/lib/x86_64-linux-gnu/stubs}"
	local pkgs=()
	# Packages whose own tests run on the gpu backend (directly, or through
	# tensorbuf.DefaultBackend); bench and cmd, which only sit on top of
	# them, are left out to keep the run short.
	for p in $(go list -tags cuda -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' ./gpu ./tensorbuf/... ./observer/... ./driver/...); do
		if go list -tags cuda -test -deps "$p" | grep -qx 'github.com/trajring/trajring/gpu'; then
			pkgs+=("$p")
		fi
	done
	rm -f "$dir"/bin/*.test.gz
	for p in "${pkgs[@]}"; do
		name=$(basename "$p")
		echo "gpu-check: building $p -> $dir/bin/$name.test.gz"
		# Stripped and compressed (about 5 MB each), so the folder is small
		# enough to carry to the GPU machine.
		go test -c -tags cuda -ldflags='-s -w' -o "$dir/bin/$name.test" "$p"
		gzip -9 -f "$dir/bin/$name.test"
	done
	cp bench/gpu-check.sh "$dir/gpu-check.sh"
	echo "gpu-check: built ${#pkgs[@]} test binaries in $dir ($(du -sh "$dir" | cut -f1)); on the GPU machine run: $dir/gpu-check.sh run $dir"
}

# limit runs a command with a time limit in seconds, keeping its output.
limit() {
	local secs=$1
	shift
	timeout --kill-after=10 "$secs" "$@"
}

run() {
	cd "$dir" || exit 2
	local start=$SECONDS logs=logs fail=0
	mkdir -p "$logs"
	echo "== gpu-check on $(hostname) at $(date -u +%FT%TZ)"
	if command -v nvidia-smi >/dev/null; then
		nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
	else
		echo "gpu-check: nvidia-smi not found" >&2
	fi
	local sanitizer
	sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer /opt/nvidia/*/compute-sanitizer 2>/dev/null | head -n 1)

	for z in bin/*.test.gz; do
		[ -e "$z" ] || continue
		gunzip -c "$z" >"${z%.gz}" && chmod +x "${z%.gz}"
	done
	declare -A status secs
	local bins=(bin/*.test)
	# 1. The tests of every package, on the GPU.
	for t in "${bins[@]}"; do
		local n s0
		n=$(basename "$t" .test)
		s0=$SECONDS
		# gpu tests compare every op with the cpu backend; the others run
		# the buffer, observers and drivers on the gpu backend.
		if (cd "$(dirname "$t")" && limit 45 "./$(basename "$t")" -test.count=1 -test.v) >"$logs/test-$n.log" 2>&1; then
			status[test-$n]=PASS
		else
			status[test-$n]=FAIL
			fail=1
		fi
		secs[test-$n]=$((SECONDS - s0))
	done
	grep -h 'device:' "$logs"/test-gpu.log 2>/dev/null | sed 's/^ */   /'

	# 2. The gpu package's tests again under memcheck. API errors are not
	# reported: the tests provoke some on purpose (device memory exhaustion).
	# Kernel memory errors are.
	local s0=$SECONDS inject=()
	# Debian's packaged compute-sanitizer does not find its own injection
	# libraries; point it at them.
	if [ -d /usr/lib/nvidia-cuda-toolkit/compute-sanitizer ] && [ "$sanitizer" = /usr/bin/compute-sanitizer ]; then
		inject=(--injection-path /usr/lib/nvidia-cuda-toolkit/compute-sanitizer)
	fi
	if [ -z "$sanitizer" ]; then
		status[memcheck-gpu]="SKIP (compute-sanitizer not found)"
	elif [ ! -x bin/gpu.test ]; then
		status[memcheck-gpu]="SKIP (no gpu.test)"
	elif limit 150 "$sanitizer" "${inject[@]}" --tool memcheck --report-api-errors no --error-exitcode 3 bin/gpu.test -test.count=1 >"$logs/memcheck-gpu.log" 2>&1; then
		status[memcheck-gpu]=PASS
	else
		status[memcheck-gpu]=FAIL
		fail=1
	fi
	secs[memcheck-gpu]=$((SECONDS - s0))
	grep -E 'ERROR SUMMARY' "$logs/memcheck-gpu.log" 2>/dev/null | tail -n 1 | sed 's/^/   memcheck: /'

	# 3. The benchmarks.
	s0=$SECONDS
	if [ -x bin/gpu.test ] && limit 120 bin/gpu.test -test.run '^$' -test.bench . -test.benchtime 0.3s -test.count=1 >"$logs/bench-gpu.log" 2>&1; then
		status[bench-gpu]=PASS
	else
		status[bench-gpu]=FAIL
		fail=1
	fi
	secs[bench-gpu]=$((SECONDS - s0))

	echo
	echo "== steps"
	printf '%-28s %-40s %6s\n' step result seconds
	for k in $(printf '%s\n' "${!status[@]}" | sort); do
		printf '%-28s %-40s %6s\n' "$k" "${status[$k]}" "${secs[$k]}"
	done
	echo
	echo "== GPU operations (same-run device-to-device copy of the same bytes is the ceiling)"
	printf '%-30s %9s %9s %9s %9s %9s %8s\n' operation us/op p50_us p99_us GB/s copyGB/s of_copy
	awk '/^BenchmarkOps\// {
		name = $1; sub(/^BenchmarkOps\//, "", name); sub(/-[0-9]+$/, "", name)
		us = p50 = p99 = gb = cgb = frac = "-"
		for (i = 2; i < NF; i++) {
			if ($(i+1) == "us/op") us = $i
			if ($(i+1) == "GB/s") gb = $i
			if ($(i+1) == "copyGB/s") cgb = $i
			if ($(i+1) == "of_copy") frac = $i
			if ($(i+1) == "p50_us") p50 = $i
			if ($(i+1) == "p99_us") p99 = $i
		}
		printf "%-30s %9s %9s %9s %9s %9s %8s\n", name, us, p50, p99, gb, cgb, frac
	}' "$logs/bench-gpu.log"
	echo
	echo "== n-step reward sum: kernel vs the gather-download-sum-upload fallback, same run"
	printf '%-30s %14s %16s %11s\n' case kernel_us/op fallback_us/op fallback_x
	awk '/^BenchmarkNStepReward\// {
		name = $1; sub(/^BenchmarkNStepReward\//, "", name); sub(/-[0-9]+$/, "", name)
		k = f = x = "-"
		for (i = 2; i < NF; i++) {
			if ($(i+1) == "kernel_us/op") k = $i
			if ($(i+1) == "fallback_us/op") f = $i
			if ($(i+1) == "fallback_x") x = $i
		}
		printf "%-30s %14s %16s %11s\n", name, k, f, x
	}' "$logs/bench-gpu.log"
	echo
	for k in "${!status[@]}"; do
		if [ "${status[$k]}" = FAIL ]; then
			echo "--- $k (last lines of $dir/$logs/$k.log)"
			tail -n 30 "$logs/$k.log"
		fi
	done
	echo "gpu-check: finished in $((SECONDS - start)) s; logs in $dir/$logs"
	return $fail
}

case $cmd in
build) build ;;
run) run ;;
*)
	echo "usage: $0 build|run [DIR]" >&2
	exit 2
	;;
esac
