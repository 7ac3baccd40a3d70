#!/usr/bin/env bash
# gpu-check.sh proves the cuda build on a real NVIDIA GPU in one run that
# ends within GPU_CHECK_DEADLINE seconds (default 480, so a second try fits
# in a 15-minute lease) and leaves exactly three files in $OUT, the folder
# that comes back from a device machine: summary.txt, gpu-check.json (per
# step: name, status pass/fail/skip/timeout, seconds, limit, key figures)
# and logs.tgz (every step's log). They are rewritten after every step,
# each under a temporary name and then renamed, so a run killed from
# outside, even mid-write, still returns what it did.
#
#   bench/gpu-check.sh prepare [DIR]   here (Go, CUDA toolkit): builds
#       stripped, xz-compressed `go test -c -tags trajring_cuda` binaries
#       of gpu, tensorbuf and agents/dqn and the trajring binary into DIR
#       (default build/gpu-check, ignored by git, the one path to carry),
#       with the Python package of `make python-cuda` (python-cuda/, when
#       the Makefile has the target) and then compute-sanitizer and its
#       libraries (sanitizer.txz) if they fit; fails if DIR is over 40 MiB
#       or DIR plus the working tree over 60 MiB.
#   bench/gpu-check.sh run [DIR]       on the GPU machine, in the repository
#       root (the working tree travels with DIR; no Go there): the steps
#       below, each under its own limit, all under the deadline.
#   bench/gpu-check.sh rehearse [DIR]  here: prepare, check the run's
#       budget and test names, then `run` on the stand-in driver
#       (build/standin, `make standin`) in its short mode, and fail unless
#       it passes within its deadline leaving exactly its three files; then
#       two runs that must fail cleanly (no binaries; a deadline of 20 s).
#
# Steps, most important first (limits: the table `limit` below):
#   preflight       the libcuda.so.1 the loader resolves (fallback
#                   directories if none; the stand-in is refused outside a
#                   rehearsal), glibc, first and warm gpu.New (TestStartupTime)
#   nvidia-smi      GPU name, driver, memory, compute capability, clocks
#   gpu-tests       the gpu package's tests (rehearsal: -short)
#   no-device       CUDA_VISIBLE_DEVICES= (the stand-in: its no-device
#                   switch): `trajring demo -backend gpu` and `trajring
#                   train -backend gpu` fail with gpu.ErrNoDevice's message,
#                   never gorgonia.org/cu's
#                   "Error in initialization", -backend default falls back
#                   to the cpu backend, and a test binary starts
#   fault-probe     an illegal address in a real kernel is ErrDeviceLost and
#                   later calls fail fast (TestStickyFaultProbe; on the
#                   stand-in its injected twin)
#   tensorbuf-tests tensorbuf's tests on the gpu backend, -short, less
#                   the model tests and the host-side checkpoint sweeps
#                   (make test runs them; rehearsal: the device subset)
#   memcheck, synccheck, racecheck   compute-sanitizer (the machine's, else
#                   the carried one) on kernel subsets with the contended
#                   tree-repair test, the learner's kernels (GEMM's shared
#                   memory) and nstep_check (skipped on the stand-in, which
#                   checks the lists select their tests, or without
#                   compute-sanitizer: "sanitizers: not available")
#   ptx-jit         CUDA_FORCE_PTX_JIT=1 over the CPU-equality tests, the
#                   learner's and nstep_check's included
#   stream-order    the real-driver tests of issue 27 items 1-3 (stream-
#                   ordered uploads, UpdatePrioritiesDeviceAfter, cross-
#                   stream consumers), repeated
#   host-time       host µs per device-selected sample and per launch
#                   (BenchmarkDeviceSelection at B=256), then TestHostTime
#   benchmarks      BenchmarkOps, BenchmarkDevice, BenchmarkDeviceSelection
#                   at B=65,536, BenchmarkFrameStackDevice, fixed iteration
#                   counts (-test.benchtime=Nx)
#   learner         the device learner's correctness tests
#                   (TestDeviceLearnerMatchesAgent,
#                   TestDeviceLearnerFusedIsSeparate: the fused step's
#                   bytes are the separate launches',
#                   TestDeviceLearnerGraphIsDirect: the step replayed
#                   from a CUDA graph writes the direct launches' bytes,
#                   TestDeviceLearnerTrainsOnTableTransitions,
#                   TestRunCartPoleGPUGraphIsDirect: seeded training runs
#                   with each round replayed from one graph, each step
#                   from its own, and kernel by kernel, equal), then a
#                   fixed number of DQN gradient steps (MLP 256x256,
#                   batch 64): DeviceLearner queued back to back as
#                   `train -backend gpu` runs them (BenchmarkDeviceTrainRound)
#                   and synced after each (BenchmarkDeviceTrainStep), and the
#                   CPU learner (BenchmarkTrainStep) in the same run:
#                   gradient steps/s of each and host µs per step
#   demo            a `trajring demo -backend gpu` smoke run
#   python          python3 python-cuda/gpu_check.py (make python-cuda's
#                   package, carried) under a timeout: pass, skip (no
#                   python-cuda/, no python3 with NumPy, or what the
#                   script skips) or fail
#
# Every test binary runs with -test.timeout inside its step's limit (a
# hang leaves Go's goroutine dump), and the three files are written under
# a temporary name and renamed (a kill mid-write leaves the last whole).
set -uo pipefail
export LC_ALL=C

self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
root=$(cd "$(dirname "$0")/.." && pwd)

# --- the plan: names, limits and test lists, shared by run and rehearse.

steps=(preflight nvidia-smi gpu-tests no-device fault-probe tensorbuf-tests memcheck synccheck racecheck
	ptx-jit stream-order host-time benchmarks learner demo python)
declare -A limit=(
	[preflight]=20 [nvidia-smi]=10 [gpu-tests]=40 [no-device]=15 [fault-probe]=15 [tensorbuf-tests]=50
	[memcheck]=45 [synccheck]=20 [racecheck]=30 [ptx-jit]=30 [stream-order]=25 [host-time]=35
	[benchmarks]=55 [learner]=40 [demo]=15 [python]=20
)
deadline_default=480
reserve=10 # seconds kept for the last summary and logs.tgz

# Tests named by the steps (top-level names; rehearse checks they exist).
# The learner's kernels (GEMM and its fused forms gemm3 and gemm_back, the
# only ones with shared memory, gemm_back with its last-block norm;
# bias+ReLU, column sums, TD loss, grad norm, Adam) and nstep_check (the
# device transitions' metadata) run under every sanitizer and the forced
# JIT.
# AdamDevice (Adam's last-block step count, read by a graph replay) and
# graph capture and replay (TestGraphReplaysCapturedWork) with them.
learner_kernel_tests="TestLearnerOpsMatchReference TestLearnerFusedOpsMatchReference TestNStepCheckMatchesCPU
	TestAdamDeviceIsAdam TestGraphReplaysCapturedWork"
memcheck_tests="TestGatherRowsMatchesCPU TestGatherWindowsMatchesCPU TestScatterMatchesCPU TestConcatMatchesCPU
	TestNStepRewardMatchesCPU TestScatterFromMatchesCPU TestDeviceSelectionMatchesCPU TestSumTreeMatchesCPU
	TestUpdateRepairContended TestUploadIsStreamOrdered $learner_kernel_tests"
# The sum-tree tests run tree_repair and update_one (a batch's priority
# updates in one block, phases separated by __syncthreads) and patch_items.
barrier_tests="TestSumTreeMatchesCPU TestUpdateRepairContended TestDeviceSelectionMatchesCPU $learner_kernel_tests"
jit_gpu_tests="TestGatherRowsMatchesCPU TestGatherWindowsMatchesCPU TestGatherWindowsExact TestScatterMatchesCPU
	TestScatterFromMatchesCPU TestConcatMatchesCPU TestNStepRewardMatchesCPU TestNStepRewardExact
	TestSumTreeMatchesCPU TestDeviceSelectionMatchesCPU TestUpdateRepairContended $learner_kernel_tests"
jit_tensorbuf_tests="TestSeededSamplesMatchAcrossBackends TestDeviceSelectionMatchesHost TestDevicePrioritizedMatchesHost
	TestRoundReplayIsDirect"
jit_tensorbuf_rehearsal="TestSeededSamplesMatchAcrossBackends"
jit_gpu_rehearsal="TestGatherRowsMatchesCPU $learner_kernel_tests"
order_gpu_tests="TestUploadIsStreamOrdered TestStreamOrderingModel TestStreamOrderingWithAConsumer"
order_tensorbuf_tests="TestUpdatePrioritiesDeviceAfterOrdersALearner TestBatchSourceOrdersAGPUConsumer
	TestAddFromDeviceWaitsForProducerStream"
fault_tests="TestStickyFaultProbe TestStickyFaultIsReportedAndFailsFast"
# The device learner's correctness on the device, before its benchmarks.
learner_tests="TestDeviceLearnerMatchesAgent TestDeviceLearnerFusedIsSeparate TestDeviceLearnerGraphIsDirect
	TestDeviceLearnerTrainsOnTableTransitions TestRunCartPoleGPUGraphIsDirect"
# tensorbuf-tests leaves out the two model tests (host logic through
# thousands of small syncs: minutes on the stand-in) and the host-side
# checkpoint sweeps (child processes, file corruption: host code that CI's
# make test-sweeps runs; each kill-test child would start a CUDA context).
host_sweeps="TestCheckpointKill TestCheckpointCorruption TestCheckpointStoredCorruption"
tensorbuf_skip="TestPropertyAgainstModel TestNStepAgainstModel $host_sweeps"
tensorbuf_rehearsal="TestSeededSamplesMatchAcrossBackends TestSteadyStateMakesNoDeviceWideCalls
	TestAddFromDeviceMatchesHost TestCheckpointKeepsDevicePriorities TestBatchSourceOrdersAGPUConsumer
	TestDroppedDeviceResultsAreFreed TestDeviceBatchIsRefusedByAddAndPrintsSafely TestDefaultBackendIsNStepper"

# re turns a list of test names into an anchored -test.run pattern.
re() { local IFS='|'; echo "^($*)\$"; }

# --- prepare (here)

prepare() {
	set -e
	cd "$root"
	local dir=$1
	mkdir -p "$dir/bin"
	export CGO_LDFLAGS="${CGO_LDFLAGS:-} -L${CUDA_STUBS:-/usr/lib/x86_64-linux-gnu/stubs}"
	rm -f "$dir"/bin/* "$dir/sanitizer.txz"
	echo "gpu-check: go test -c -tags trajring_cuda ./gpu ./tensorbuf ./agents/dqn; go build -tags trajring_cuda ./cmd/trajring -> $dir/bin"
	"${GO:-go}" test -c -tags trajring_cuda -ldflags='-s -w' -o "$dir/bin/" ./gpu ./tensorbuf ./agents/dqn
	"${GO:-go}" build -tags trajring_cuda -ldflags='-s -w' -o "$dir/bin/trajring" ./cmd/trajring
	# xz -2: a quarter smaller than gzip (so compute-sanitizer and the
	# Python package fit the budget too), under a second to unpack each.
	xz -2 -T2 -f "$dir/bin/gpu.test" "$dir/bin/tensorbuf.test" "$dir/bin/dqn.test" "$dir/bin/trajring"
	{
		echo "commit: $(git rev-parse HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo ' (uncommitted changes)')"
		echo "built: $(date -u +%FT%TZ) with $("${GO:-go}" version)"
	} >"$dir/bin/manifest.txt"
	# The Python package with a trajring_cuda libtrajring.so and its
	# gpu_check.py (issue 40), when the Makefile has the target that
	# builds it: into $dir/python-cuda (PYTHON_CUDA_DIR), or copied there
	# from build/python-cuda.
	rm -rf "$dir/python-cuda"
	if make -n python-cuda >/dev/null 2>&1; then
		echo "gpu-check: make python-cuda PYTHON_CUDA_DIR=$dir/python-cuda"
		make python-cuda PYTHON_CUDA_DIR="$dir/python-cuda" GO="${GO:-go}"
		if [ ! -d "$dir/python-cuda" ] && [ -d build/python-cuda ]; then
			cp -r build/python-cuda "$dir/python-cuda"
		fi
		# The shared library goes compressed (run unpacks it).
		find "$dir/python-cuda" -name '*.so' -exec xz -2 -T2 -f {} +
	else
		echo "gpu-check: no make target python-cuda yet: the python step will skip"
	fi
	local kib tree
	kib=$(du -sk "$dir" | cut -f1)
	tree=$( (git ls-files -z; git ls-files -z --others --exclude-standard) | du -ck --files0-from=- 2>/dev/null | tail -n 1 | cut -f1)
	echo "gpu-check: $dir is $kib KiB; the working tree that travels with it $tree KiB"
	if [ "$kib" -gt $((40 * 1024)) ] || [ $((kib + tree)) -gt $((60 * 1024)) ]; then
		echo "gpu-check: over budget (carried folder 40 MiB, with the tree 60 MiB; the device tool takes 64)" >&2
		exit 1
	fi
	# compute-sanitizer with the libraries it loads from its own folder
	# (the toolkit's, xz-compressed: about 4 MiB), when it fits the budget;
	# else the run's sanitizer steps say the sanitizers were not available
	# unless the GPU machine has its own.
	local san sandir sk
	san=$(command -v compute-sanitizer || true)
	sandir=/usr/lib/nvidia-cuda-toolkit/compute-sanitizer
	[ -n "$san" ] && [ ! -e "$sandir/libsanitizer-collection.so" ] && sandir=$(dirname "$(readlink -f "$san")")
	if [ -n "$san" ] && [ -e "$sandir/libsanitizer-collection.so" ]; then
		tar -cJf "$dir/sanitizer.txz" --exclude include -C "$sandir" . -C "$(dirname "$(readlink -f "$san")")" "$(basename "$(readlink -f "$san")")"
		sk=$(du -sk "$dir/sanitizer.txz" | cut -f1)
		if [ $((kib + sk)) -gt $((40 * 1024)) ] || [ $((kib + sk + tree)) -gt $((60 * 1024)) ]; then
			rm -f "$dir/sanitizer.txz"
			echo "gpu-check: compute-sanitizer ($sk KiB) does not fit the budget: not carried"
		else
			kib=$((kib + sk))
			echo "gpu-check: compute-sanitizer from $sandir carried ($sk KiB); $dir is now $kib KiB"
		fi
	else
		echo "gpu-check: no compute-sanitizer here (scripts/install-cuda.sh): not carried"
	fi
	echo "gpu-check: on the GPU machine, carry [\"$dir\"] and run: bash bench/gpu-check.sh run $dir"
}

# --- the steps' bodies: each runs as `gpu-check.sh _do NAME` in its own
# process under timeout, with stdout and stderr in the step's log. A line
# "GPU_CHECK_SKIP: why" makes a step that exits 0 a skip; "GPU_CHECK_FIG:
# key=value" adds a key figure; "GPU_CHECK_FAIL: why" says why it failed.

# on_standin: whether the loader resolves the stand-in driver.
on_standin() {
	local lib
	lib=$(ldd "$work/bin/gpu.test" 2>/dev/null | awk '/libcuda\.so\.1/ { print $3 }')
	[ -f "$lib" ] && grep -q trajring_standin_device_ns "$lib"
}

# gotest PKG ARGS...: runs PKG's test binary (named after the package's
# last path element, as go test -c names it) in the package's folder (its
# testdata) with -test.timeout a few seconds inside the step's limit, so a
# hang ends with Go's goroutine dump.
gotest() {
	local pkg=$1 bin=${1##*/}
	shift
	local left=$((step_end - $(date +%s) - 3))
	[ "$left" -lt 2 ] && left=2
	echo "+ $bin.test -test.timeout=${left}s $*"
	(cd "$root/$pkg" && exec "$work/bin/$bin.test" -test.v -test.count=1 -test.timeout="${left}s" "$@")
}

body_preflight() {
	local lib b
	for b in gpu.test tensorbuf.test trajring; do
		[ -x "$work/bin/$b" ] || { echo "GPU_CHECK_FAIL: no $b in the carried folder (bench/gpu-check.sh prepare)"; return 1; }
	done
	lib=$(ldd "$work/bin/gpu.test" | awk '/libcuda\.so\.1/ { print $3 }')
	echo "GPU_CHECK_FIG: libcuda=$lib -> $(readlink -f "$lib" 2>/dev/null)"
	ldd --version 2>&1 | head -n 1 | sed 's/^/GPU_CHECK_FIG: glibc=/'
	echo "GPU_CHECK_FIG: LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
	cat "$work/bin/manifest.txt"
	case $lib in
	"" | not | */stubs/*) # ldd: "libcuda.so.1 => not found"
		echo "GPU_CHECK_FAIL: no libcuda.so.1: not found by the loader nor in the fallback directories"
		return 1
		;;
	esac
	if on_standin && [ -z "$rehearsal" ]; then
		echo "GPU_CHECK_FAIL: the loader resolves the stand-in driver ($lib), not the NVIDIA driver"
		return 1
	fi
	gotest gpu -test.run '^TestStartupTime$'
}

body_nvidia-smi() {
	if on_standin; then
		echo "GPU_CHECK_SKIP: stand-in driver (no GPU for nvidia-smi)"
		return 0
	fi
	if ! command -v nvidia-smi >/dev/null; then
		echo "GPU_CHECK_SKIP: nvidia-smi not found"
		return 0
	fi
	nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap,clocks.max.sm,pci.bus_id --format=csv || return
	nvidia-smi -q | head -n 40
}

body_gpu-tests() {
	if [ -n "$rehearsal" ]; then
		# TestStandinRaceExposure tests the stand-in itself (make test-cuda
		# runs it) and can see no race on a loaded 2-core machine; the
		# tests that ptx-jit, stream-order and fault-probe run in the
		# rehearsal run there only (once each on the 2-core stand-in).
		gotest gpu -test.short -test.skip "$(re TestStandinRaceExposure $jit_gpu_rehearsal $order_gpu_tests $fault_tests)"
	else
		gotest gpu
	fi
}

body_no-device() {
	local out rc
	export CUDA_VISIBLE_DEVICES= TRAJRING_STANDIN_NODEVICE=1
	echo "+ CUDA_VISIBLE_DEVICES= trajring demo -backend gpu"
	out=$("$work/bin/trajring" demo -backend gpu -steps 1000 -progress 0 2>&1)
	rc=$?
	echo "$out (exit $rc)"
	case $out in *"Error in initialization"*)
		echo "GPU_CHECK_FAIL: gorgonia.org/cu's init reported the missing device: cuinit.c did not take its cuInit"
		return 1
		;;
	esac
	if [ $rc -eq 0 ] || [[ $out != *"gpu: no usable CUDA driver or device"* ]]; then
		echo "GPU_CHECK_FAIL: -backend gpu: want a failure with gpu.ErrNoDevice's message"
		return 1
	fi
	echo "GPU_CHECK_FIG: error=$(echo "$out" | grep -o 'gpu: no usable.*' | head -n 1)"
	echo "+ CUDA_VISIBLE_DEVICES= trajring train -backend gpu"
	out=$("$work/bin/trajring" train -backend gpu -steps 100 -progress 0 -out "$work/train-nodevice" 2>&1)
	rc=$?
	echo "$out (exit $rc)"
	if [ $rc -eq 0 ] || [[ $out != *"gpu: no usable CUDA driver or device"* ]]; then
		echo "GPU_CHECK_FAIL: train -backend gpu: want a failure with gpu.ErrNoDevice's message"
		return 1
	fi
	echo "+ CUDA_VISIBLE_DEVICES= trajring demo -backend default"
	out=$("$work/bin/trajring" demo -backend default -steps 1000 -envs 8 -capacity 256 -batch 32 -progress 0 2>&1)
	rc=$?
	echo "$out (exit $rc)"
	if [ $rc -ne 0 ] || [[ $out != *"running on the cpu backend"* ]]; then
		echo "GPU_CHECK_FAIL: want -backend default to fall back to the cpu backend"
		return 1
	fi
	echo "+ CUDA_VISIBLE_DEVICES= gpu.test -test.run TestStartupTime -test.timeout=10s (must start and fail with ErrNoDevice)"
	out=$(cd "$root/gpu" && "$work/bin/gpu.test" -test.run '^TestStartupTime$' -test.count=1 -test.timeout=10s 2>&1)
	rc=$?
	echo "$out (exit $rc)"
	if [ $rc -eq 0 ] || [[ $out != *"gpu: no usable CUDA driver or device"* ]]; then
		echo "GPU_CHECK_FAIL: want the test binary to start and gpu.New to fail with gpu.ErrNoDevice"
		return 1
	fi
}

body_fault-probe() {
	TRAJRING_GPU_FAULT_PROBE=1 gotest gpu -test.run "$(re $fault_tests)"
}

body_tensorbuf-tests() {
	if [ -n "$rehearsal" ]; then
		gotest tensorbuf -test.short -test.run "$(re $tensorbuf_rehearsal)"
	else
		# The two model tests check host logic through thousands of
		# small syncs (minutes on the stand-in); make test-cuda runs them.
		gotest tensorbuf -test.short -test.skip "$(re $tensorbuf_skip)"
	fi
}

# sanitizer prints the compute-sanitizer to use: the machine's own (it
# matches the driver), else the one prepare carried (the toolkit's, with
# the libraries it loads, unpacked by run into $work/sanitizer); nothing
# when neither is there.
sanitizer() {
	local san
	san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer /usr/local/cuda*/compute-sanitizer/compute-sanitizer 2>/dev/null | head -n 1)
	[ -z "$san" ] && [ -x "$work/sanitizer/compute-sanitizer" ] && san=$work/sanitizer/compute-sanitizer
	echo "$san"
}

# unpack_sanitizer unpacks the carried compute-sanitizer (prepare's
# sanitizer.txz) into $work/sanitizer, once.
unpack_sanitizer() {
	[ -s "$carried/sanitizer.txz" ] && [ ! -d "$work/sanitizer" ] || return 0
	mkdir -p "$work/sanitizer"
	tar -xJf "$carried/sanitizer.txz" -C "$work/sanitizer" 2>/dev/null ||
		python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$carried/sanitizer.txz" "$work/sanitizer" 2>/dev/null ||
		rm -rf "$work/sanitizer"
}

# sanitize TOOL TESTS: compute-sanitizer over the gpu test binary, with
# -test.timeout inside the step's limit so a hang leaves a stack dump. On
# the stand-in it checks that the pattern selects every named test (the
# binary's -test.list) and skips.
sanitize() {
	local tool=$1 tests=$2 san left t listed
	left=$((step_end - $(date +%s) - 3))
	[ "$left" -lt 2 ] && left=2
	if on_standin; then
		echo "+ gpu.test -test.list $(re $tests) (the stand-in: the tests compute-sanitizer would run)"
		listed=$(cd "$root/gpu" && "$work/bin/gpu.test" -test.list "$(re $tests)") || return
		echo "$listed"
		for t in $tests; do
			grep -qx "$t" <<<"$listed" || { echo "GPU_CHECK_FAIL: $tool: the pattern does not select $t"; return 1; }
		done
		echo "GPU_CHECK_FIG: tests=$(wc -w <<<"$tests") selected"
		echo "GPU_CHECK_SKIP: stand-in driver (compute-sanitizer needs the NVIDIA driver)"
		return 0
	fi
	san=$(sanitizer)
	if [ -z "$san" ]; then
		unpack_sanitizer
		san=$(sanitizer)
	fi
	if [ -z "$san" ]; then
		echo "GPU_CHECK_SKIP: sanitizers not available (no compute-sanitizer on the machine or in the carried folder)"
		return 0
	fi
	echo "GPU_CHECK_FIG: compute_sanitizer=$san"
	echo "+ $san --tool $tool gpu.test -test.run $(re $tests) -test.timeout ${left}s"
	(cd "$root/gpu" && exec "$san" --tool "$tool" --error-exitcode 3 --report-api-errors no --print-limit 20 \
		"$work/bin/gpu.test" -test.v -test.count=1 -test.timeout="${left}s" -test.run "$(re $tests)")
}

body_memcheck() { sanitize memcheck "$memcheck_tests"; }
body_synccheck() { sanitize synccheck "$barrier_tests"; }
body_racecheck() { sanitize racecheck "$barrier_tests"; }

body_ptx-jit() {
	export CUDA_FORCE_PTX_JIT=1 CUDA_CACHE_DISABLE=1
	local short=() tb=$jit_tensorbuf_tests gt=$jit_gpu_tests
	if [ -n "$rehearsal" ]; then
		# The stand-in has no JIT, and gpu-tests ran every one of these:
		# the learner's kernel tests and one data kernel's show the
		# step runs them.
		short=(-test.short)
		tb=$jit_tensorbuf_rehearsal
		gt=$jit_gpu_rehearsal
	fi
	gotest gpu "${short[@]}" -test.run "$(re $gt)" || return
	gotest tensorbuf -test.short -test.run "$(re $tb)"
}

body_stream-order() {
	local n=25
	[ -n "$rehearsal" ] && n=1
	gotest gpu -test.count=$n -test.run "$(re $order_gpu_tests)" || return
	gotest tensorbuf -test.count=$n -test.run "$(re $order_tensorbuf_tests)"
}

body_host-time() {
	if [ -n "$rehearsal" ]; then
		# Each case fills 262,144 items (seconds on the stand-in); TestHostTime
		# takes minutes there.
		gotest tensorbuf -test.run '^$' -test.bench '^BenchmarkDeviceSelection$/^(uniform|update)$/^B256$' -test.benchtime 20x
		return
	fi
	gotest tensorbuf -test.run '^$' -test.bench '^BenchmarkDeviceSelection$/./^B256$' -test.benchtime 2000x || return
	TRAJRING_HOSTTIME=1 gotest tensorbuf -test.run '^TestHostTime$'
}

body_benchmarks() {
	local n=200 short=()
	if [ -n "$rehearsal" ]; then
		n=3
		short=(-test.short)
	fi
	gotest gpu "${short[@]}" -test.run '^$' -test.bench '^BenchmarkOps$' -test.benchtime ${n}x || return
	if [ -z "$rehearsal" ]; then # it fills 262,144 items: too slow on the stand-in
		gotest tensorbuf -test.run '^$' -test.bench '^BenchmarkDeviceSelection$/./^B65536$' -test.benchtime ${n}x || return
	fi
	gotest tensorbuf "${short[@]}" -test.run '^$' -test.bench '^BenchmarkDevice$' -test.benchtime ${n}x || return
	# Frame stacking (issue 45): device-selected stacks (kernels/stack_gather.cu)
	# beside host-selected and unstacked table transitions of 84x84 frames.
	gotest tensorbuf "${short[@]}" -test.run '^$' -test.bench '^BenchmarkFrameStackDevice$' -test.benchtime ${n}x
}

# learner_benchmarks names the learner step's benchmarks.
learner_benchmarks="BenchmarkDeviceTrainRound BenchmarkDeviceTrainStep BenchmarkTrainStep"

body_learner() {
	local n=1000 res rc
	[ -n "$rehearsal" ] && n=5
	if [ ! -x "$work/bin/dqn.test" ]; then
		echo "GPU_CHECK_FAIL: no dqn.test in the carried folder (bench/gpu-check.sh prepare)"
		return 1
	fi
	# Correctness first: the device learner's step against the host
	# Agent's, and training on a device-selected table's transitions.
	gotest agents/dqn -test.run "$(re $learner_tests)" || return
	res=$work/learner-bench.txt
	gotest agents/dqn -test.run '^$' -test.bench "$(re $learner_benchmarks)" -test.benchtime ${n}x | tee "$res"
	rc=${PIPESTATUS[0]}
	[ "$rc" -eq 0 ] || return "$rc"
	# Benchmark lines: name, N, ns/op value, "ns/op", then value-unit pairs.
	awk -v n="$n" '/^Benchmark/ && $4 == "ns/op" {
		name = $1; sub(/-[0-9]+$/, "", name)
		v["ns/op"] = $3; delete extra
		for (i = 5; i + 1 <= NF; i += 2) extra[$(i + 1)] = $i
		if (name == "BenchmarkDeviceTrainRound") {
			printf "GPU_CHECK_FIG: device_steps_per_s=%.0f\n", extra["steps/s"]
			printf "GPU_CHECK_FIG: device_steps_per_sync=%d\n", n
			printf "GPU_CHECK_FIG: device_host_us_per_step=%.1f\n", extra["host-ns/step"] / 1000
		} else if (name == "BenchmarkDeviceTrainStep/device") {
			printf "GPU_CHECK_FIG: device_synced_steps_per_s=%.0f\n", 1e9 / $3
		} else if (name == "BenchmarkTrainStep") {
			printf "GPU_CHECK_FIG: cpu_steps_per_s=%.0f\n", 1e9 / $3
			if ("cpu-ns/op" in extra) printf "GPU_CHECK_FIG: cpu_host_us_per_step=%.1f\n", extra["cpu-ns/op"] / 1000
		}
	}' "$res"
}

body_demo() {
	local args=(-steps 200000)
	[ -n "$rehearsal" ] && args=(-steps 20000 -envs 16 -capacity 1024 -batch 64)
	echo "+ trajring demo -backend gpu ${args[*]}"
	"$work/bin/trajring" demo -backend gpu -progress 0 "${args[@]}"
}

# The python step (issue 40): the carried python-cuda/ (make python-cuda:
# the Python package with a trajring_cuda libtrajring.so, and
# gpu_check.py) run with the machine's python3 under a timeout; the
# script decides what it skips (GPU_CHECK_SKIP/FIG/FAIL lines count as in
# every step; TRAJRING_GPU_CHECK_REHEARSAL=1 on the stand-in).
body_python() {
	local d=$work/python-cuda left py so
	# The carried package (prepare), its shared library unpacked.
	if [ -d "$carried/python-cuda" ] && [ ! -d "$d" ]; then
		cp -r "$carried/python-cuda" "$d"
		while IFS= read -r so; do
			unxz_to "$so" "${so%.xz}" && rm -f "$so"
		done < <(find "$d" -name '*.so.xz')
	fi
	if [ ! -f "$d/gpu_check.py" ]; then
		echo "GPU_CHECK_SKIP: no python-cuda/gpu_check.py in the carried folder (make python-cuda, which prepare runs when the Makefile has it)"
		return 0
	fi
	# The first python3 that has NumPy (the package needs it): the one on
	# PATH, else the system's (here the first may be a bare pyenv one).
	local c
	py=
	for c in $(command -v python3) /usr/bin/python3; do
		if [ -x "$c" ] && "$c" -c 'import numpy' 2>/dev/null; then
			py=$c
			break
		fi
	done
	if [ -z "$py" ]; then
		echo "GPU_CHECK_SKIP: no python3 with NumPy on this machine"
		return 0
	fi
	left=$((step_end - $(date +%s) - 3))
	[ "$left" -lt 2 ] && left=2
	echo "GPU_CHECK_FIG: python=$("$py" --version 2>&1)"
	echo "+ timeout $left python3 python-cuda/gpu_check.py"
	(cd "$work" && TRAJRING_GPU_CHECK_REHEARSAL=$rehearsal PYTHONPATH=$d${PYTHONPATH:+:$PYTHONPATH} \
		exec timeout -k 2 "$left" "$py" python-cuda/gpu_check.py)
	local rc=$?
	[ $rc -eq 124 ] || [ $rc -eq 137 ] && echo "GPU_CHECK_FAIL: gpu_check.py ran past its ${left} s"
	return $rc
}

# --- run (on the GPU machine)

# unxz_to XZ OUT: XZ decompressed into OUT (xz, else Python's lzma).
unxz_to() {
	xz -dc "$1" >"$2" 2>/dev/null ||
		python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$1" "$2"
}

run() {
	# $OUT and the EXIT trap first: whatever fails later, the files come back.
	out=${OUT:-$root/gpu-check-out}
	mkdir -p "$out" || exit 2
	work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX" 2>/dev/null || mktemp -d "$root/build/gpu-check-work.XXXXXX") || exit 2
	mkdir -p "$work/logs" "$work/bin"
	t_start=$(date +%s)
	deadline_s=${GPU_CHECK_DEADLINE:-$deadline_default}
	deadline=$((t_start + deadline_s))
	declare -gA status secs reason figs
	sanitizers="not checked yet"
	trap finish EXIT
	trap 'exit 130' INT TERM
	export rehearsal=${GPU_CHECK_REHEARSAL:-} work root
	dir=$(cd "$1" 2>/dev/null && pwd) || dir=$1
	export carried=$dir
	unset TRAJRING_STANDIN_THREADS TRAJRING_STANDIN_FAULT_LAUNCH TRAJRING_STANDIN_NODEVICE TRAJRING_HOSTTIME
	export GOTRACEBACK=all CUDA_CACHE_PATH="$work/cuda-cache"
	write_files

	# The binaries, unpacked at once (in parallel); the Python package and
	# compute-sanitizer only by the steps that use them.
	for z in "$dir"/bin/*.xz; do
		[ -e "$z" ] || continue
		(b=$work/bin/$(basename "${z%.xz}") && unxz_to "$z" "$b" && chmod +x "$b") &
	done
	wait
	cp "$dir/bin/manifest.txt" "$work/bin/" 2>/dev/null
	sanitizers=$(sanitizer)
	if [ -z "$sanitizers" ] && [ -s "$dir/sanitizer.txz" ]; then
		sanitizers="the carried one (prepare's sanitizer.txz)"
	fi
	if [ -n "$rehearsal" ]; then
		sanitizers="not run on the stand-in (found: ${sanitizers:-none})"
	elif [ -z "$sanitizers" ]; then
		sanitizers="not available (no compute-sanitizer on the machine or in the carried folder): memcheck, synccheck and racecheck skipped"
	fi
	# The NVIDIA container runtime mounts the driver under
	# /usr/local/nvidia; make the loader find it if it does not.
	if [ -x "$work/bin/gpu.test" ] && ldd "$work/bin/gpu.test" | grep -q 'libcuda\.so\.1 => not found'; then
		for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64 \
			/usr/local/cuda/compat /usr/lib/wsl/lib; do
			if [ -e "$d/libcuda.so.1" ]; then
				export LD_LIBRARY_PATH=$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
				break
			fi
		done
	fi

	for s in "${steps[@]}"; do
		if [ "$s" != preflight ] && [ "$s" != nvidia-smi ] && [ "${status[preflight]}" != pass ]; then
			status[$s]=skip reason[$s]="preflight failed" secs[$s]=0
		else
			step "$s"
		fi
		write_files
	done
}

# step NAME: runs the step's body with the smaller of its limit and the
# time left before the deadline (less the reserve), and records its status,
# seconds and figures.
step() {
	local name=$1 lim=${limit[$1]} log=$work/logs/$1.log t0 rc
	local left=$((deadline - $(date +%s) - reserve))
	if [ "$left" -lt 3 ]; then
		status[$name]=skip reason[$name]="global deadline" secs[$name]=0
		return
	fi
	[ "$lim" -gt "$left" ] && lim=$left
	t0=$(date +%s.%N)
	step_end=$(($(date +%s) + lim)) timeout -k 3 "$lim" bash "$self" _do "$name" >"$log" 2>&1
	rc=$?
	secs[$name]=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	figs[$name]=""
	local l p f sk
	while IFS= read -r l; do addfig "$name" "$l"; done < <(grep -a '^GPU_CHECK_FIG: ' "$log" | sed 's/^GPU_CHECK_FIG: //')
	p=$(grep -ac '^--- PASS: ' "$log")
	f=$(grep -ac '^--- FAIL: ' "$log")
	sk=$(grep -ac '^--- SKIP: ' "$log")
	if grep -aq '^=== RUN' "$log"; then
		addfig "$name" "tests=$p passed, $f failed, $sk skipped"
		grep -aq '^ *--- SKIP: ' "$log" &&
			addfig "$name" "skipped=$(grep -a '^ *--- SKIP: ' "$log" | awk '{ print $3 }' | sort -u | tr '\n' ' ')"
	fi
	if [ $rc -eq 124 ] || [ $rc -eq 137 ] || grep -aq '^panic: test timed out' "$log"; then
		status[$name]=timeout reason[$name]="limit ${lim} s"
	elif [ $rc -ne 0 ]; then
		l=$(grep -a -m 1 '^GPU_CHECK_FAIL: \|^--- FAIL\|^panic\|FAIL' "$log" | sed 's/^GPU_CHECK_FAIL: //')
		# A failed test: its name and the last message logged before it.
		case $l in "--- FAIL"*) l="$l $(grep -a -B 8 -m 1 '^--- FAIL' "$log" | grep -a '_test\.go:[0-9]*: ' | tail -n 1 | sed 's/^ *//')" ;; esac
		status[$name]=fail reason[$name]="exit $rc: ${l:-$(tail -n 1 "$log")}"
	elif grep -aq '^GPU_CHECK_SKIP: ' "$log"; then
		status[$name]=skip reason[$name]=$(grep -a -m 1 '^GPU_CHECK_SKIP: ' "$log" | sed 's/^GPU_CHECK_SKIP: //')
	elif grep -aq 'no tests to run\|no benchmarks to run' "$log"; then
		status[$name]=fail reason[$name]="a test or benchmark list matched nothing"
	elif grep -aq -- '-test.bench' "$log" && grep -aq -- '--- SKIP: Benchmark' "$log"; then
		status[$name]=fail reason[$name]="a benchmark skipped: $(grep -a -A 1 -m 1 -- '--- SKIP: Benchmark' "$log" | tail -n 1 | sed 's/^ *//')"
	elif grep -aq -- '-test.bench' "$log" && ! grep -aq '^Benchmark.* ns/op' "$log"; then
		status[$name]=fail reason[$name]="no benchmark ran"
	elif grep -aq '^=== RUN' "$log" && [ "$p" -eq 0 ] && [ "$sk" -gt 0 ]; then
		status[$name]=skip reason[$name]=$(grep -a -A 1 -m 1 '^--- SKIP: ' "$log" | tail -n 1 | sed 's/^ *//')
	else
		status[$name]=pass
	fi
	reason[$name]=$(printf '%s' "${reason[$name]:-}" | tr -d '\000-\037' | cut -c1-200)
	figures "$name"
}

# addfig NAME key=value: one key figure (one line, no control characters).
addfig() {
	case $2 in "" | *=) return ;; esac # no value
	figs[$1]+=${figs[$1]:+$'\n'}$(printf '%s' "$2" | tr -d '\000-\037')
}

# figures NAME: the step's key figures, read from its log.
figures() {
	local name=$1 log=$work/logs/$1.log l
	case $name in
	preflight)
		addfig "$name" "$(grep -a -o 'first_new_ms=[0-9.]*' "$log" | head -n 1)"
		addfig "$name" "$(grep -a -o 'warm_new_ms=[0-9.]*' "$log" | head -n 1)"
		;;
	nvidia-smi)
		grep -aq '^name, driver' "$log" && addfig "$name" "gpu=$(grep -a -A 1 '^name, driver' "$log" | tail -n 1)"
		;;
	fault-probe)
		addfig "$name" "fault_seen=$(grep -a -o 'fault seen after [^:]*' "$log" | head -n 1)"
		addfig "$name" "fail_fast=$(grep -a -o 'fail-fast call took [^)]*' "$log" | head -n 1)"
		;;
	memcheck | synccheck | racecheck)
		addfig "$name" "sanitizer=$(grep -a -o 'ERROR SUMMARY: .*' "$log" | tail -n 1)"
		;;
	host-time)
		# µs of host time per device-selected sample, and per launch.
		while read -r n host launches; do
			addfig "$name" "$n=$host host µs/call, $launches launches/call, $(awk -v h="$host" -v l="$launches" \
				'BEGIN { if (l > 0) printf "%.2f", h / l; else printf "-" }') host µs/launch"
		done < <(awk '/^BenchmarkDeviceSelection\/.* ns\/op/ { n=$1; sub(/^BenchmarkDeviceSelection\//, "", n); sub(/-[0-9]+$/, "", n)
			h=l="-"; for (i = 2; i < NF; i++) { if ($(i+1) == "host_us") h = $i; if ($(i+1) == "launches/op") l = $i }
			print n, h, l }' "$log")
		;;
	benchmarks)
		addfig "$name" "benchmarks=$(grep -ac '^Benchmark.* ns/op' "$log")"
		;;
	demo)
		while read -r l; do addfig "$name" "$l"; done < <(awk '/env steps\/s/ { getline
			print "env_steps_per_s=" $2; print "sequences_per_s=" $6; print "sample_GB_per_s=" $7 }' "$log")
		;;
	esac
}

# mode: run or rehearsal.
mode() { if [ -n "$rehearsal" ]; then echo rehearsal; else echo run; fi; }

# json_str S: S as a JSON string.
json_str() {
	local s=$1
	s=${s//\\/\\\\}
	s=${s//\"/\\\"}
	printf '"%s"' "$s"
}

# json_val S: a number as is, anything else a string.
json_val() {
	if [[ $1 =~ ^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$ ]]; then printf '%s' "$1"; else json_str "$1"; fi
}

# write_files writes summary.txt, gpu-check.json and logs.tgz to $OUT.
write_files() {
	local s elapsed=$(($(date +%s) - t_start)) result=pass
	for s in "${steps[@]}"; do
		case ${status[$s]:-} in fail | timeout) result=fail ;; "") [ "$result" = pass ] && result=incomplete ;; esac
	done
	{
		printf '{"tool":"bench/gpu-check.sh","mode":%s,"host":%s,"date":%s,"deadline_s":%d,"seconds":%d,"result":%s,"steps":[' \
			"$(json_str "$(mode)")" "$(json_str "$(hostname)")" \
			"$(json_str "$(date -u +%FT%TZ)")" "$deadline_s" "$elapsed" "$(json_str "$result")"
		local sep="" k v line fsep
		for s in "${steps[@]}"; do
			[ -n "${status[$s]:-}" ] || continue
			printf '%s{"name":%s,"status":%s,"seconds":%s,"limit_s":%d,"reason":%s,"figures":{' "$sep" "$(json_str "$s")" \
				"$(json_str "${status[$s]}")" "${secs[$s]:-0}" "${limit[$s]}" "$(json_str "${reason[$s]:-}")"
			fsep=""
			while IFS= read -r line; do
				[ -n "$line" ] || continue
				k=${line%%=*} v=${line#*=}
				printf '%s%s:%s' "$fsep" "$(json_str "$k")" "$(json_val "$v")"
				fsep=,
			done <<<"${figs[$s]:-}"
			printf '}}'
			sep=,
		done
		printf '],"benchmarks":['
		cat "$work"/logs/host-time.log "$work"/logs/benchmarks.log 2>/dev/null | awk 'BEGIN { s = "" }
			/^Benchmark[^ \t]*[ \t]+[0-9]+[ \t].* ns\/op/ { printf "%s{\"name\":\"%s\",\"n\":%s", s, $1, $2
				for (i = 3; i < NF; i += 2) if ($i ~ /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$/) printf ",\"%s\":%s", $(i+1), $i
				printf "}"; s = "," }'
		printf ']}\n'
	} >"$out/.gpu-check.json.tmp" && mv -f "$out/.gpu-check.json.tmp" "$out/gpu-check.json"
	{
		echo "== bench/gpu-check.sh ${rehearsal:+(rehearsal on the stand-in driver) }on $(hostname) at $(date -u +%FT%TZ): $result, $elapsed s of $deadline_s"
		echo "sanitizers: $sanitizers"
		printf '%-16s %-8s %7s %6s  %s\n' step status seconds limit "reason / key figures"
		for s in "${steps[@]}"; do
			[ -n "${status[$s]:-}" ] || continue
			printf '%-16s %-8s %7s %6s  %s\n' "$s" "${status[$s]}" "${secs[$s]:-0}" "${limit[$s]}" "${reason[$s]:-}"
			[ -n "${figs[$s]:-}" ] && printf '%s\n' "${figs[$s]}" | sed 's/^/                                          /'
		done
		if [ -s "$work/logs/benchmarks.log" ]; then
			echo
			echo "== benchmarks (us/op: calls queued back to back; p50/p99: one call and a sync; of_copy/of_d2d: fraction of a same-run device copy)"
			awk '/^Benchmark[^ \t]*[ \t]+[0-9]+[ \t].* ns\/op/ { line = sprintf("%-52s", $1)
				for (i = 3; i < NF; i += 2) if ($(i+1) ~ /^(us\/op|ns\/op|p50_us|p99_us|GB\/s|of_copy|of_d2d|host_us|launches\/op)$/) line = line sprintf(" %s %s", $i, $(i+1))
				print line }' "$work/logs/benchmarks.log"
		fi
		if [ -s "$work/logs/host-time.log" ] && grep -aq 'call (B=256)' "$work/logs/host-time.log"; then
			echo
			grep -a -A 14 'call (B=256)' "$work/logs/host-time.log" | sed 's/^ *//'
		fi
		for s in "${steps[@]}"; do
			case ${status[$s]:-} in fail | timeout)
				echo
				echo "--- $s: last lines of logs/$s.log"
				tail -n 20 "$work/logs/$s.log" 2>/dev/null | cut -c1-200
				;;
			esac
		done
	} >"$out/.summary.txt.tmp" && mv -f "$out/.summary.txt.tmp" "$out/summary.txt"
	cp "$out/summary.txt" "$work/logs/summary.txt"
	tar -czf "$out/.logs.tgz.tmp" -C "$work" logs 2>/dev/null && mv -f "$out/.logs.tgz.tmp" "$out/logs.tgz"
}

finish() {
	local rc=$?
	trap - EXIT
	write_files
	cat "$out/summary.txt"
	rm -rf "$work"
	local s
	for s in "${steps[@]}"; do
		case ${status[$s]:-none} in fail | timeout | none) exit 1 ;; esac
	done
	exit "$rc"
}

# --- rehearse (here)

rehearse() {
	local dir=$1
	cd "$root" || exit 2
	local standin=$root/build/standin
	[ -e "$standin/libcuda.so.1" ] || { echo "rehearse: no $standin/libcuda.so.1 (make standin)" >&2; exit 2; }
	if [ -z "${GPU_CHECK_NOBUILD:-}" ]; then
		bash "$self" prepare "$dir" || exit 1
	fi
	local fails=0 sum=0 s
	no() { echo "rehearse: FAIL: $*" >&2; fails=$((fails + 1)); }
	# The GPU run's budget, by construction.
	for s in "${steps[@]}"; do sum=$((sum + limit[$s])); done
	[ $((sum + reserve)) -le "$deadline_default" ] ||
		no "step limits ($sum s) and the reserve ($reserve s) exceed the deadline ($deadline_default s)"
	echo "rehearse: step limits add up to $sum s (+$reserve s reserve) against a $deadline_default s deadline"
	# Every named test exists, in the binaries the GPU run uses.
	local tmp
	tmp=$(mktemp -d) || exit 2
	for p in gpu tensorbuf dqn; do
		xz -dc "$dir/bin/$p.test.xz" >"$tmp/$p.test" && chmod +x "$tmp/$p.test"
		LD_LIBRARY_PATH=$standin "$tmp/$p.test" -test.list '.*' >"$tmp/$p.list" || no "$p.test -test.list"
	done
	local t
	for t in $memcheck_tests $barrier_tests $jit_gpu_tests $order_gpu_tests $fault_tests TestStartupTime \
		TestStandinRaceExposure; do
		grep -qx "$t" "$tmp/gpu.list" || no "gpu has no test $t"
	done
	for t in $jit_tensorbuf_tests $order_tensorbuf_tests $tensorbuf_rehearsal $tensorbuf_skip $host_sweeps TestHostTime; do
		grep -qx "$t" "$tmp/tensorbuf.list" || no "tensorbuf has no test $t"
	done
	for t in BenchmarkOps; do grep -qx "$t" "$tmp/gpu.list" || no "gpu has no $t"; done
	for t in BenchmarkDevice BenchmarkDeviceSelection BenchmarkFrameStackDevice; do grep -qx "$t" "$tmp/tensorbuf.list" || no "tensorbuf has no $t"; done
	for t in $learner_benchmarks $learner_tests; do grep -qx "$t" "$tmp/dqn.list" || no "agents/dqn has no $t"; done
	# The learner's kernels are in every sanitizer's and the JIT's list.
	for t in $learner_kernel_tests; do
		for l in memcheck_tests barrier_tests jit_gpu_tests; do
			grep -qw "$t" <<<"${!l}" || no "$l leaves out $t"
		done
	done
	# The three files are only ever written under a temporary name and
	# renamed (a kill mid-write leaves the previous file whole).
	if grep -nE '(>|-czf) *"\$out/(summary\.txt|gpu-check\.json|logs\.tgz)"' "$self"; then
		no "a file of \$OUT is written in place (lines above), not under a temporary name and renamed"
	fi
	# compute-sanitizer goes with the binaries when this machine has it and
	# it fits; then it unpacks into a folder that runs.
	if command -v compute-sanitizer >/dev/null; then
		if [ -s "$dir/sanitizer.txz" ]; then
			mkdir -p "$tmp/san"
			tar -xJf "$dir/sanitizer.txz" -C "$tmp/san" || no "$dir/sanitizer.txz does not unpack"
			[ -x "$tmp/san/compute-sanitizer" ] && [ -e "$tmp/san/libsanitizer-collection.so" ] ||
				no "$dir/sanitizer.txz lacks compute-sanitizer or libsanitizer-collection.so"
			"$tmp/san/compute-sanitizer" --version >/dev/null || no "the carried compute-sanitizer does not start"
		else
			echo "rehearse: compute-sanitizer is not carried (over budget): the GPU run's sanitizers need the machine's own"
		fi
	fi

	# checkout OUT: OUT holds exactly the three files and the JSON parses.
	checkout() {
		local o=$1 files
		files=$(cd "$o" && ls -A | tr '\n' ' ')
		[ "$files" = "gpu-check.json logs.tgz summary.txt " ] || no "$o holds [$files], want gpu-check.json logs.tgz summary.txt"
		if command -v python3 >/dev/null; then
			python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$o/gpu-check.json" || no "$o/gpu-check.json does not parse"
		fi
	}

	# The rehearsal itself: every step on the stand-in, short.
	local o=$tmp/out rc t0 el dl=${GPU_CHECK_REHEARSAL_DEADLINE:-180}
	mkdir -p "$o"
	t0=$(date +%s)
	OUT=$o GPU_CHECK_REHEARSAL=1 GPU_CHECK_DEADLINE=$dl LD_LIBRARY_PATH=$standin bash "$self" run "$dir" >"$tmp/run.txt" 2>&1
	rc=$? el=$(($(date +%s) - t0))
	cat "$tmp/run.txt"
	[ $rc -eq 0 ] || no "the rehearsal run exited $rc"
	[ "$el" -le "$dl" ] || no "the rehearsal run took $el s, over its $dl s deadline"
	checkout "$o"
	local n
	n=$(tar -tzf "$o/logs.tgz" | grep -c '^logs/.*\.log$')
	[ "$n" -eq "${#steps[@]}" ] || no "logs.tgz holds $n step logs, want ${#steps[@]}"
	for s in "${steps[@]}"; do
		grep -q "\"name\":\"$s\",\"status\":\"\(pass\|skip\)\"" "$o/gpu-check.json" || no "step $s did not pass or skip"
	done
	for s in nvidia-smi memcheck synccheck racecheck; do
		grep -q "\"name\":\"$s\",\"status\":\"skip\",[^}]*\"reason\":\"[^\"]" "$o/gpu-check.json" || no "step $s: want skip with a reason"
	done
	grep -q '^sanitizers: ' "$o/summary.txt" || no "the summary does not say which sanitizers ran"
	grep -q '"name":"python","status":"\(pass\|skip\)"' "$o/gpu-check.json" || no "the python step did not pass or skip"
	[ -d "$dir/python-cuda" ] && ! grep -q '"name":"python","status":"pass"' "$o/gpu-check.json" &&
		grep -q '"name":"python","status":"skip","seconds":[0-9.]*,"limit_s":[0-9]*,"reason":"no python-cuda' "$o/gpu-check.json" &&
		no "the python step did not find the carried python-cuda/"
	# The tests run in the steps the plan says.
	mkdir -p "$tmp/logs"
	tar -xzf "$o/logs.tgz" -C "$tmp" || no "logs.tgz does not unpack"
	local lg=$tmp/logs
	for t in $learner_tests; do
		grep -q "^--- PASS: $t " "$lg/learner.log" || no "the learner step did not pass $t"
	done
	awk '/^Benchmark/ { b = 1 } /^--- PASS: TestDeviceLearner/ && b { bad = 1 } END { exit bad }' "$lg/learner.log" ||
		no "the learner step ran its tests after its benchmarks"
	for t in $learner_kernel_tests; do
		grep -q "^--- PASS: $t " "$lg/ptx-jit.log" || no "ptx-jit did not pass $t"
		for s in memcheck synccheck racecheck; do grep -qx "$t" "$lg/$s.log" || no "$s does not select $t"; done
	done
	for t in $host_sweeps; do
		! grep -q "^=== RUN   $t\$" "$lg/tensorbuf-tests.log" || no "tensorbuf-tests ran the host-side sweep $t"
	done
	# Every test binary run has -test.timeout (a hang leaves a stack dump).
	if grep -h '^+ .*\.test ' "$lg"/*.log | grep -v -e '-test\.timeout' -e '-test\.list'; then
		no "the runs above have no -test.timeout"
	fi

	# Without binaries: it fails, and still leaves its files.
	mkdir -p "$tmp/none" "$tmp/out2"
	OUT=$tmp/out2 GPU_CHECK_REHEARSAL=1 LD_LIBRARY_PATH=$standin bash "$self" run "$tmp/none" >"$tmp/run2.txt" 2>&1 &&
		no "a run without binaries exited 0"
	checkout "$tmp/out2"
	grep -q '"name":"preflight","status":"fail"' "$tmp/out2/gpu-check.json" || no "a run without binaries: preflight did not fail"

	# A deadline of 20 s: steps past it are skipped, the run ends in time.
	mkdir -p "$tmp/out3"
	t0=$(date +%s)
	OUT=$tmp/out3 GPU_CHECK_REHEARSAL=1 GPU_CHECK_DEADLINE=20 LD_LIBRARY_PATH=$standin bash "$self" run "$dir" >"$tmp/run3.txt" 2>&1
	el=$(($(date +%s) - t0))
	[ "$el" -le 20 ] || no "a run with a 20 s deadline took $el s"
	checkout "$tmp/out3"
	grep -q '"reason":"global deadline"' "$tmp/out3/gpu-check.json" || no "a run with a 20 s deadline skipped nothing"
	echo "rehearse: a run without binaries and one with a 20 s deadline (took $el s) left their three files"

	rm -rf "$tmp"
	if [ $fails -gt 0 ]; then
		echo "rehearse: $fails check(s) failed" >&2
		exit 1
	fi
	echo "rehearse: PASS"
}

case ${1:-} in
prepare | build) prepare "${2:-build/gpu-check}" ;;
run) run "${2:-build/gpu-check}" ;;
rehearse) rehearse "${2:-build/gpu-check}" ;;
_do)
	name=$2
	"body_$name"
	;;
*)
	echo "usage: $0 prepare|run|rehearse [DIR]" >&2
	exit 2
	;;
esac
