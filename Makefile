# trajring build and test entry points. `make test` is what CI runs.
GO ?= go

# RACE runs go test under the race detector without its default one-second
# sleep at exit (TSan's atexit_sleep_ms), which every test binary and every
# child a kill test starts would pay; races are still reported, since each
# test checks the detector's count when it ends. A GORACE of the caller's
# own comes after and wins.
RACE = GORACE="atexit_sleep_ms=0 $$GORACE" $(GO) test -race

.PHONY: test test-go test-train vet

test: vet test-go test-train test-sweeps

vet:
	CGO_ENABLED=0 $(GO) build ./...
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }

test-go:
	$(RACE) -count=1 ./...

# test-train runs the seeded DQN training test without the race detector
# and its checkpoint-and-resume twin (about 4 s each; under -race they take
# 36 s each and are skipped there).
test-train:
	$(GO) test -count=1 -run 'TestRunCartPoleLearns|TestResumeLearns' ./agents/dqn/

# train-seeds trains DQN on CartPole-v1 with the default flags for 5
# seeds (one at a time; JOBS=N runs N at once, SEEDS="..." picks others)
# and prints per seed the best and the last network's mean return over
# 100 greedy episodes, the env steps of the first evaluation reaching 475
# and the wall time (a few minutes a seed on 2 cores).
.PHONY: train-seeds
train-seeds:
	GO=$(GO) bash scripts/train-seeds.sh

# --- Python (issue 40). `make python` builds the C ABI (capi/) as a shared
# library into the Python package; `make test-python` runs its pytest suite
# with Debian's interpreter (PYTHON), which has python3-numpy, python3-torch
# and python3-pytest (the python3 first on PATH may not).
PYTHON ?= /usr/bin/python3
PYLIB := python/trajring/libtrajring.so
.PHONY: python test-python
python:
	$(GO) build -buildmode=c-shared -o $(PYLIB) ./capi/libtrajring
	@rm -f python/trajring/libtrajring.h

# python-cuda builds the package with a trajring_cuda library (device
# batches, kDLCUDA) into build/python-cuda/, with the device check's Python
# script beside it (bench/gpu-check.sh carries it to a GPU machine).
PYCUDA := build/python-cuda
.PHONY: python-cuda
python-cuda:
	rm -rf $(PYCUDA) && mkdir -p $(PYCUDA)/trajring
	cp python/trajring/*.py $(PYCUDA)/trajring/
	cp python/tests/gpu_check.py $(PYCUDA)/
	CGO_LDFLAGS="-L$(CUDA_STUBS)" $(GO) build -tags trajring_cuda -buildmode=c-shared -ldflags="-s -w" \
		-o $(PYCUDA)/trajring/libtrajring.so ./capi/libtrajring
	@rm -f $(PYCUDA)/trajring/libtrajring.h

# python-train-seeds trains the PyTorch DQN example (python/examples/
# dqn_cartpole.py) on 5 seeds and fails unless every best network reaches
# 475 over 100 greedy episodes within 10 minutes a seed.
.PHONY: python-train-seeds
python-train-seeds: python
	PYTHON=$(PYTHON) bash scripts/python-train-seeds.sh

# test-python-cuda runs the package's tests against a trajring_cuda build of
# the library on the stand-in driver (device results, DLPack streams,
# device priorities), and the device check's Python script.
.PHONY: test-python-cuda
test-python-cuda: standin python-cuda
	cd python && LD_LIBRARY_PATH=$(CURDIR)/$(STANDIN_DIR) TRAJRING_LIBRARY=$(CURDIR)/$(PYCUDA)/trajring/libtrajring.so \
		$(PYTHON) -m pytest -q -p no:cacheprovider tests/test_cuda_standin.py
	LD_LIBRARY_PATH=$(CURDIR)/$(STANDIN_DIR) $(PYTHON) $(PYCUDA)/gpu_check.py

# A hung test prints every thread's Python stack after 5 minutes
# (faulthandler_timeout) and the run is killed after 20, so a hang fails
# the target with a trace instead of holding CI to its limit.
test-python: python
	cd python && timeout -k 30 1200 $(PYTHON) -m pytest -q -p no:cacheprovider -o faulthandler_timeout=300 tests

# test-sweeps runs the long sweeps of pure functions that -race cuts to a
# sample (the race detector finds nothing in them and slows them 3.5x).
.PHONY: test-sweeps
test-sweeps:
	$(GO) test -count=1 -run 'TestRandom' ./internal/explog/
	$(GO) test -count=1 -run 'TestCheckpointCorruption|TestCheckpointStoredCorruption|TestImportanceMatchesPow|TestCheckpointKill' ./tensorbuf/

# fuzz runs every Go fuzz target for FUZZTIME each (the seed corpora already
# run in `make test`): a count of executions by default, since a duration
# can end in Go 1.26's spurious "context deadline exceeded" (see .ci/run);
# FUZZTIME=2m works too. soak runs the concurrency soak for SOAK under -race.
FUZZTIME ?= 100000x
SOAK ?= 2m
.PHONY: fuzz soak test-cluster
fuzz:
	@for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			echo "fuzz $$pkg $$f ($(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
		done; \
	done

# bench-remote runs the opt-in ingest benchmark of remote/ with 1, 2 and 4
# actor processes, raw JetStream and in-process collection (a few minutes;
# BENCH_SCALE=N measures N times as many steps).
BENCH_SCALE ?= 1
.PHONY: bench-remote
bench-remote:
	TRAJRING_REMOTE_BENCH_PROCS=1 TRAJRING_BENCH_SCALE=$(BENCH_SCALE) $(GO) test -count=1 -run TestIngestProcesses -v -timeout 20m ./remote/

# test-cluster runs the 3-node JetStream cluster scenarios of remote/
# (node restart, actor killed, learner restarted), opt-in: see TestCluster.
test-cluster:
	TRAJRING_CLUSTER=1 $(RACE) -count=1 -run TestCluster -v ./remote/

soak:
	TRAJRING_SOAK=$(SOAK) $(RACE) -count=1 -run TestSoakConcurrent -v ./tensorbuf/

# --- CUDA build (issue 4). `make test` above needs neither nvcc nor a GPU;
# the targets below need the CUDA toolkit (scripts/install-cuda.sh).
NVCC ?= nvcc
CC ?= cc
CUDA_ARCH ?= compute_80
KERNEL_SRCS := $(wildcard kernels/*.cu)
KERNEL_PTX := $(patsubst kernels/%.cu,kernels/ptx/%.ptx,$(KERNEL_SRCS))
KERNEL_FATBIN := $(patsubst kernels/%.cu,kernels/fatbin/%.fatbin,$(KERNEL_SRCS))
# The fatbin the gpu backend loads: SASS for sm_80 (A100) and sm_90
# (H100/H200), so the driver does not JIT them, plus compute_80 PTX for
# anything newer. The PTX is stored uncompressed: the stand-in driver reads
# it (and the driver does not care).
FATBIN_GENCODE := -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
	-gencode arch=compute_80,code=compute_80
KERNEL_HDRS := $(wildcard kernels/host/*.h)
STANDIN_DIR := build/standin
STANDIN := $(STANDIN_DIR)/libcuda.so.1
# Link cuda builds against the toolkit's stub libcuda.so; at run time the
# loader finds the stand-in (or, on a GPU machine, the real driver).
CUDA_STUBS ?= /usr/lib/x86_64-linux-gnu/stubs

.PHONY: kernels kernels-check standin test-cuda

# kernels compiles every kernels/*.cu to PTX for $(CUDA_ARCH), JIT-able on
# sm_80 and later (sm_90: H100/H200), and to a fatbin (FATBIN_GENCODE),
# which the gpu backend loads; both are committed and checked by CI. Comment lines (nvcc's version banner)
# and trailing comments (nvcc's call-sequence notes) are stripped so the output
# depends only on the sources and the compiler.
kernels: $(KERNEL_PTX) $(KERNEL_FATBIN)

kernels/ptx/%.ptx: kernels/%.cu $(KERNEL_HDRS)
	@mkdir -p kernels/ptx
	$(NVCC) -ptx -arch=$(CUDA_ARCH) -O3 -o $@.tmp $<
	sed -e '/^[[:space:]]*\/\//d' -e 's|[[:space:]]*//.*$$||' $@.tmp | cat -s | sed -e '/./,$$!d' > $@
	@rm -f $@.tmp

kernels/fatbin/%.fatbin: kernels/%.cu $(KERNEL_HDRS)
	@mkdir -p kernels/fatbin
	$(NVCC) -fatbin $(FATBIN_GENCODE) -Xfatbin -compress=false -O3 -o $@ $<

# kernels-check checks that every fatbin holds SASS for sm_80 and sm_90 and
# compute_80 PTX, assembles the committed PTX for sm_80 and sm_90
# (H100/H200) with ptxas, the compiler the driver's JIT uses, prints
# registers and spills per kernel and architecture, and fails on any error
# or register spill.
kernels-check: $(KERNEL_PTX) $(KERNEL_FATBIN)
	@for f in $(KERNEL_FATBIN); do \
		list=$$(cuobjdump --list-elf --list-ptx $$f) || exit 1; \
		for want in 'sm_80.cubin' 'sm_90.cubin' 'sm_80.ptx'; do \
			echo "$$list" | grep -q "$$want" || { echo "$$f: no $$want"; echo "$$list"; exit 1; }; \
		done; \
		echo "fatbin $$f: SASS sm_80, sm_90; PTX compute_80"; \
	done
	@for f in $(KERNEL_PTX); do for sm in sm_80 sm_90; do \
		out=$$(ptxas -arch=$$sm -v -o /dev/null $$f 2>&1) || { echo "$$out"; exit 1; }; \
		echo "$$out" | grep -q ' 0 bytes spill stores, 0 bytes spill loads' || { echo "$$f ($$sm): register spills"; echo "$$out"; exit 1; }; \
		echo "ptxas $$sm $$f: $$(echo "$$out" | grep -o 'Used [0-9]* registers'), $$(echo "$$out" | grep -o '[0-9]* bytes spill stores, [0-9]* bytes spill loads')"; \
	done; done

# standin builds the stand-in driver library (gpu/standin), which runs the
# host build of our kernels on cuLaunchKernel.
standin: $(STANDIN)

$(STANDIN): gpu/standin/standin.c gpu/standin/gen-stubs.sh gpu/standin/gen-align.sh $(KERNEL_HDRS)
	@mkdir -p $(STANDIN_DIR)
	sh gpu/standin/gen-stubs.sh > $(STANDIN_DIR)/stubs.c
	sh gpu/standin/gen-align.sh $(KERNEL_HDRS) > $(STANDIN_DIR)/align.h
	$(CC) -O2 -fPIC -shared -Wall -Wextra -Wno-unused-parameter -Wno-unused-function \
		-Ikernels/host -I$(STANDIN_DIR) -o $@ gpu/standin/standin.c $(STANDIN_DIR)/stubs.c -Wl,-soname,libcuda.so.1 -lpthread -lm

# test-cuda runs every package's tests in the cuda build against the
# stand-in driver: no GPU needed. A second pass runs the kernel-level
# tests (kernels/..., gpu) in the stand-in's race exposure: each launch's
# blocks in shuffled units on STANDIN_THREADS host threads
# (kernels/host/launch.h), without -race (which does not see C threads;
# a few seconds). A third runs the gpu package and the device learner's
# tests on the stand-in's H200 profile (132 SMs, so grids of up to 2,112
# blocks; pageable uploads that block; about 2 minutes).
STANDIN_THREADS ?= 4
test-cuda: standin
	CGO_LDFLAGS="-L$(CUDA_STUBS)" LD_LIBRARY_PATH=$(CURDIR)/$(STANDIN_DIR) \
		sh -c '$(GO) vet -tags trajring_cuda ./... && $(RACE) -tags trajring_cuda -count=1 ./... && \
		TRAJRING_STANDIN_THREADS=$(STANDIN_THREADS) $(GO) test -tags trajring_cuda -count=1 ./kernels/... ./gpu/ && \
		TRAJRING_STANDIN_PROFILE=h200 $(GO) test -tags trajring_cuda -count=1 ./gpu/ && \
		TRAJRING_STANDIN_PROFILE=h200 $(GO) test -tags trajring_cuda -count=1 -run '\''TestDeviceLearner|TestRunCartPoleGPULearns'\'' ./agents/dqn/'

# train-gpu-standin trains DQN on CartPole-v1 with `trajring train -backend
# gpu` and the default flags on the stand-in driver (the device learner's
# kernels run on the host; about 10 minutes on 2 cores) into
# TRAIN_GPU_OUT, then fails unless its result (best.gob, else q.gob) plays
# a mean return of at least 475 over 100 greedy episodes (`trajring eval`).
TRAIN_GPU_OUT ?= build/train-gpu-standin
.PHONY: train-gpu-standin
train-gpu-standin: standin
	CGO_LDFLAGS="-L$(CUDA_STUBS)" $(GO) build -tags trajring_cuda -o $(STANDIN_DIR)/trajring ./cmd/trajring
	rm -rf $(TRAIN_GPU_OUT)
	LD_LIBRARY_PATH=$(CURDIR)/$(STANDIN_DIR) $(STANDIN_DIR)/trajring train -backend gpu -out $(TRAIN_GPU_OUT)
	@model=$(TRAIN_GPU_OUT)/best.gob; [ -e $$model ] || model=$(TRAIN_GPU_OUT)/q.gob; \
	line=$$(LD_LIBRARY_PATH=$(CURDIR)/$(STANDIN_DIR) $(STANDIN_DIR)/trajring eval -episodes 100 $$model) || exit 1; \
	echo "$$line"; \
	echo "$$line" | awk '{ for (i = 1; i < NF; i++) if ($$i == "episodes:") r = $$(i + 1) } \
		END { if (r + 0 >= 475) { print "train-gpu-standin: PASS (" r " >= 475)" } else { print "train-gpu-standin: FAIL (" r " < 475)"; exit 1 } }'

# gpu-check-rehearsal runs the device check (bench/gpu-check.sh, one run on a
# GPU machine) on the stand-in driver in its short mode: it builds the folder
# a GPU run carries, checks that the step limits fit the deadline and that
# every test it names exists, and fails unless every step passes or skips
# (nvidia-smi, compute-sanitizer) within the deadline leaving exactly its
# three files (about 1.5 minutes once the cuda build is cached).
.PHONY: gpu-check-rehearsal
gpu-check-rehearsal: standin
	GO=$(GO) CUDA_STUBS=$(CUDA_STUBS) bash bench/gpu-check.sh rehearse

# --- Benchmarks (issue 5). `bench` runs the full suite (table on stdout,
# JSON and SVG plots in bench/results/); `bench-quick` the CI subset
# (under two minutes); `bench-go` the Go benchmarks with allocations.
.PHONY: bench bench-quick bench-go

bench: python
	$(GO) run ./cmd/trajring bench

bench-quick: python
	$(GO) run ./cmd/trajring bench -quick

bench-go:
	$(GO) test -run '^$$' -bench . -benchmem ./bench

# bench-python runs the benchmark's "python ..." rows alone (issues 40 and
# 41, item 5 each): trajring called from Python (table.sample with
# torch.from_dlpack, the in-place hot loop, one-item samples, a one-row
# add) next to NumPy and PyTorch on the same data, and CartPole-v1 x 256
# stepped from Python next to the same loop in Go and a NumPy CartPole, in
# one Python process taking turns; the JSON goes to bench/results/ as
# `trajring bench` writes it. BENCH_PYTHON_FLAGS=-quick for smaller buffers.
BENCH_PYTHON_FLAGS ?=
.PHONY: bench-python
bench-python: python
	$(GO) run ./cmd/trajring bench -run '^python ' $(BENCH_PYTHON_FLAGS)

# test-file-backed (issue 44; not in make test: about 3 minutes) runs
# tensorbuf's whole suite with every cpu buffer file-backed (Config.Dir in a
# fresh directory): the property test against the model, the seeded
# samples, checkpoints and kill tests on buffers in files.
.PHONY: test-file-backed
test-file-backed:
	d=$$(mktemp -d) && TRAJRING_TEST_FILE_BACKED=$$d $(GO) test -count=1 ./tensorbuf/; s=$$?; rm -rf $$d; exit $$s

# bench-huge (issue 44; not CI) measures file-backed buffers past memory:
# B=256 samples (L=1, L=4) of CartPole-shaped 40-byte steps at 1M, 10M,
# 100M and 1B steps: in memory where it fits, file-backed resident (also
# with DirHugePages where it fits in memory) and cold (evicted), with the
# fraction resident and the disk's random-read latency measured in the same
# run, beside the machine's own random reads of the same lines from an
# arena of the same size ("huge yardstick" rows); Sync against the bytes
# dirtied; uniform and prioritized tables of 1M and HUGE_TABLE_MAX items
# (each skipped when the resident memory its items took at 1M says it
# will not fit). HUGE_MAX=100000000 stops at 100M steps (the 1B
# buffer needs about 41 GB of disk; capacities whose files do not fit in
# three quarters of the free space less 4 GiB are skipped). Files go to
# HUGE_DIR (removed after each capacity); the JSON to
# bench/results/<host>-<date>-huge.json. Takes minutes to about an hour.
HUGE_MAX ?= 1000000000
HUGE_TABLE_MAX ?= 100000000
HUGE_DIR ?= $(CURDIR)/build/huge
.PHONY: bench-huge
bench-huge:
	mkdir -p $(HUGE_DIR)
	TRAJRING_BENCH_HUGE=1 HUGE_MAX=$(HUGE_MAX) HUGE_TABLE_MAX=$(HUGE_TABLE_MAX) HUGE_DIR=$(HUGE_DIR) \
		$(GO) test -count=1 -timeout 0 -run '^TestBenchHuge$$' -v ./bench/

# bench-learner times agents/dqn's gradient step against PyTorch's same step
# (scripts/learner_step.py) on 1 and 2 cores, alternated in one run (issue 26
# item 5). ROUNDS, STEPS, CORES and BASE (an older agents/dqn test binary) pass through.
.PHONY: bench-learner
bench-learner:
	GO=$(GO) bash scripts/bench-learner.sh
