#!/usr/bin/env bash
# gpu-check.sh proves the cuda build on a real NVIDIA GPU in one run of at
# most 9 minutes, and always leaves a summary (summary.txt) and JSON
# (gpu-check.json) under $OUT, the only folder that comes back from a
# device machine.
#
#   bench/gpu-check.sh build [DIR]   on the build machine (Go + CUDA toolkit):
#       compiles stripped, gzipped `go test -c -tags trajring_cuda` binaries of the
#       packages whose tests run on the gpu backend into DIR (default
#       build/gpu-check) with a copy of this script; fails if DIR is not
#       under 60 MiB (the carried folder must stay under 64 MiB).
#   bench/gpu-check.sh run [DIR]     on the GPU machine (NVIDIA driver;
#       compute-sanitizer optional; no Go). Needs glibc >= 2.34 (binaries
#       built with Go 1.26 on Debian 12).
#
# Steps, each with its own limit and all under one global deadline
# (GPU_CHECK_DEADLINE seconds, default 540):
#   1. preflight: which libcuda.so.1 the loader resolves (it must be the
#      real driver, not the stand-in), glibc, nvidia-smi facts, and the
#      time of the first and a warm gpu.New (context creation, module load)
#   2. the gpu package's tests (one process: the primary context stays
#      retained across them); tensorbuf's run last, with the time left
#   3. host time of Table.SampleInto, SampleTransitionsInto and Writer.Add
#      at B=256 (low-dim, 3 KB rows) next to the cpu backend (TestHostTime)
#   4. GPU benchmarks (kernels: BenchmarkOps; buffer calls: BenchmarkDevice,
#      SampleInto L=1/8 low-dim and 3 KB, transitions, n-step, Add
#      W=256/1024, a 1M-step export): per op µs, p50/p99 and the fraction of a same-run
#      device-to-device copy of the same bytes; n-step kernel vs fallback
#      and device selection (BenchmarkDeviceSelection: uniform and
#      prioritized SampleInto and UpdatePrioritiesDevice at B=256 and
#      65,536: µs per call, host µs per call, launches per call)
#   5. compute-sanitizer memcheck and initcheck on a short subset
#   6. the sticky-fault probe (an illegal address in a real kernel must
#      surface as gpu.ErrDeviceLost, and later calls must fail fast)
set -uo pipefail

cmd=${1:-}
dir=${2:-build/gpu-check}

build() {
	set -e
	cd "$(dirname "$0")/.."
	mkdir -p "$dir/bin"
	export CGO_LDFLAGS="${CGO_LDFLAGS:-} -L${CUDA_STUBS:-/usr/lib/x86_64-linux-gnu/stubs}"
	rm -f "$dir"/bin/*.test.gz
	for p in ./gpu ./tensorbuf; do
		name=$(basename "$p")
		echo "gpu-check: building $p -> $dir/bin/$name.test.gz"
		go test -c -tags trajring_cuda -ldflags='-s -w' -o "$dir/bin/$name.test" "$p"
		gzip -9 -f "$dir/bin/$name.test"
	done
	cp bench/gpu-check.sh "$dir/gpu-check.sh"
	local kib
	kib=$(du -sk "$dir" | cut -f1)
	if [ "$kib" -ge $((60 * 1024)) ]; then
		echo "gpu-check: $dir is $kib KiB, over the 60 MiB budget" >&2
		exit 1
	fi
	echo "gpu-check: built in $dir ($kib KiB); on the GPU machine run: $dir/gpu-check.sh run $dir"
}

run() {
	cd "$dir" || exit 2
	# Globals: the EXIT trap reads them after run returns.
	out=${OUT:-$PWD/out}
	mkdir -p "$out/logs"
	start=$SECONDS
	deadline=$((SECONDS + ${GPU_CHECK_DEADLINE:-540}))
	declare -gA status secs
	declare -ga order
	summary() {
		{
			echo "== gpu-check on $(hostname) at $(date -u +%FT%TZ), $((SECONDS - start)) s"
			cat "$out/preflight.txt" 2>/dev/null
			echo
			printf '%-22s %-44s %6s\n' step result seconds
			for k in "${order[@]}"; do
				printf '%-22s %-44s %6s\n' "$k" "${status[$k]}" "${secs[$k]:-}"
			done
			echo
			grep -h -A 8 'call (B=256)' "$out/logs/hosttime.log" 2>/dev/null | sed 's/^ *//'
			echo
			echo "== GPU operations (of_copy: fraction of a same-run device-to-device copy)"
			printf '%-30s %9s %9s %9s %9s %8s\n' operation us/op p50_us p99_us GB/s of_copy
			awk '/^BenchmarkOps\// { n=$1; sub(/^BenchmarkOps\//,"",n); sub(/-[0-9]+$/,"",n); us=p50=p99=gb=f="-"
				for (i=2;i<NF;i++) { u=$(i+1); if(u=="us/op")us=$i; if(u=="GB/s")gb=$i; if(u=="of_copy")f=$i; if(u=="p50_us")p50=$i; if(u=="p99_us")p99=$i }
				printf "%-30s %9s %9s %9s %9s %8s\n", n, us, p50, p99, gb, f }' "$out/logs/bench-gpu.log" 2>/dev/null
			echo
			echo "== buffer calls (of_d2d: fraction of a same-run device-to-device copy of the output bytes)"
			printf '%-30s %9s %9s %9s %9s %8s\n' call us/op p50_us p99_us out_MB of_d2d
			awk '/^BenchmarkDevice\// { n=$1; sub(/^BenchmarkDevice\//,"",n); sub(/-[0-9]+$/,"",n); us=p50=p99=mb=f="-"
				for (i=2;i<NF;i++) { u=$(i+1); if(u=="ns/op")us=sprintf("%.1f",$i/1000); if(u=="out_MB")mb=$i; if(u=="of_d2d")f=$i; if(u=="p50_us")p50=$i; if(u=="p99_us")p99=$i }
				printf "%-30s %9s %9s %9s %9s %8s\n", n, us, p50, p99, mb, f }' "$out/logs/bench-buffer.log" 2>/dev/null
			echo
			echo "== device selection (SampleInto of a DeviceSelection table, 262,144 items; update: UpdatePrioritiesDevice)"
			printf '%-30s %9s %9s %9s %9s\n' call us/op p50_us host_us launches
			awk '/^BenchmarkDeviceSelection\// { n=$1; sub(/^BenchmarkDeviceSelection\//,"",n); sub(/-[0-9]+$/,"",n); us=p50=h=l="-"
				for (i=2;i<NF;i++) { u=$(i+1); if(u=="us/op")us=$i; if(u=="p50_us")p50=$i; if(u=="host_us")h=$i; if(u=="launches/op")l=$i }
				printf "%-30s %9s %9s %9s %9s\n", n, us, p50, h, l }' "$out/logs/bench-devsel.log" 2>/dev/null
			grep -h 'sticky-fault probe\|fault seen after' "$out/logs/fault-probe.log" 2>/dev/null | sed 's/^ */   /'
			for k in "${order[@]}"; do
				case ${status[$k]} in FAIL*)
					echo "--- $k: last lines of logs/$k.log"
					tail -n 25 "$out/logs/$k.log" 2>/dev/null ;;
				esac
			done
		} >"$out/summary.txt"
		{
			printf '{"host":"%s","seconds":%d,"steps":[' "$(hostname)" $((SECONDS - start))
			local sep=""
			for k in "${order[@]}"; do
				printf '%s{"step":"%s","result":"%s","seconds":%s}' "$sep" "$k" "${status[$k]//\"/\'}" "${secs[$k]:-0}"
				sep=","
			done
			printf '],"benchmarks":['
			awk 'BEGIN{s=""} /^Benchmark/ { printf "%s{\"name\":\"%s\"", s, $1; for (i=3;i<NF;i+=2) printf ",\"%s\":%s", $(i+1), ($i ~ /^[0-9.eE+-]+$/ ? $i : "null"); printf "}"; s="," }' "$out"/logs/bench-*.log 2>/dev/null
			printf ']}\n'
		} >"$out/gpu-check.json"
		cat "$out/summary.txt"
	}
	trap summary EXIT

	# step NAME LIMIT CMD...: runs CMD with the smaller of LIMIT and the
	# time left before the deadline (less 15 s for the summary).
	step() {
		local name=$1 lim=$2 s0=$SECONDS
		shift 2
		order+=("$name")
		local left=$((deadline - SECONDS - 15))
		if [ "$left" -lt 10 ]; then
			status[$name]="SKIP (global deadline)"
			return
		fi
		[ "$lim" -gt "$left" ] && lim=$left
		if timeout --kill-after=5 "$lim" "$@" >"$out/logs/$name.log" 2>&1; then
			status[$name]=PASS
		else
			local rc=$?
			status[$name]="FAIL (rc $rc$([ $rc -ge 124 ] && echo ", limit ${lim}s"))"
		fi
		secs[$name]=$((SECONDS - s0))
	}

	for z in bin/*.test.gz; do
		[ -e "$z" ] && gunzip -c "$z" >"${z%.gz}" && chmod +x "${z%.gz}"
	done
	{
		echo "libcuda: $(ldd bin/gpu.test 2>&1 | grep libcuda)"
		echo "glibc: $(ldd --version 2>&1 | head -n 1) (needs >= 2.34)"
		nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap,clocks.max.sm --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
	} >"$out/preflight.txt"
	local standin=""
	if ldd bin/gpu.test 2>&1 | grep libcuda | grep -q standin; then
		echo "preflight: the loader resolves the stand-in, not the driver" >>"$out/preflight.txt"
		standin=1
	fi
	step preflight 60 bin/gpu.test -test.run '^TestStartupTime$' -test.v -test.count=1
	grep -h 'startup:' "$out/logs/preflight.log" 2>/dev/null | sed 's/^ */   /' >>"$out/preflight.txt"
	step test-gpu 120 bin/gpu.test -test.count=1
	step hosttime 60 env TRAJRING_HOSTTIME=1 bin/tensorbuf.test -test.run '^TestHostTime$' -test.v -test.count=1
	step bench-gpu 120 bin/gpu.test -test.run '^$' -test.bench . -test.benchtime 0.3s -test.count=1
	step bench-buffer 150 bin/tensorbuf.test -test.run '^$' -test.bench '^BenchmarkDevice$' -test.benchtime 0.3s -test.count=1
	step bench-devsel 90 bin/tensorbuf.test -test.run '^$' -test.bench '^BenchmarkDeviceSelection$' -test.benchtime 200x -test.count=1
	local san
	san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -n 1)
	if [ -n "$standin" ]; then
		order+=(memcheck)
		status[memcheck]="SKIP (stand-in driver: no sanitizer)"
	elif [ -n "$san" ]; then
		local subset='^(TestGatherRows|TestScatter|TestConcat|TestGatherWindows|TestNStepReward|TestDeviceSelection|TestSumTree)'
		step memcheck 90 "$san" --tool memcheck --report-api-errors no --error-exitcode 3 bin/gpu.test -test.run "$subset" -test.short -test.count=1
		step initcheck 90 "$san" --tool initcheck --error-exitcode 3 bin/gpu.test -test.run "$subset" -test.short -test.count=1
	else
		order+=(memcheck)
		status[memcheck]="SKIP (compute-sanitizer not found)"
	fi
	step fault-probe 60 env TRAJRING_GPU_FAULT_PROBE=1 bin/gpu.test -test.run '^TestStickyFaultProbe$' -test.v -test.count=1
	# Last: the buffer's tests on the gpu backend, with the time left.
	step test-tensorbuf 240 bin/tensorbuf.test -test.count=1 -test.short -test.v
	for k in "${order[@]}"; do
		case ${status[$k]} in FAIL*) return 1 ;; esac
	done
	return 0
}

case $cmd in
build) build ;;
run) run ;;
*)
	echo "usage: $0 build|run [DIR]" >&2
	exit 2
	;;
esac
