//go:build trajring_cuda

package gpu

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/trajring/trajring/kernels"
	"github.com/trajring/trajring/kernels/host"
	"gorgonia.org/tensor"
)

// learnGuard is the number of random guard elements on each side of every
// operand of the learner tests.
const learnGuard = 5

// devArr is an operand of the learner tests: values between guard
// elements in one arena, and the bytes the arena started with.
type devArr struct {
	a    kernels.Arena
	t    *tensor.Dense
	init []byte
	size int // bytes per element
}

func bytesOf[T any](v []T) []byte {
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v)*int(unsafe.Sizeof(z)))
}

// upload puts v between guard elements of random bytes into a new arena
// and returns the operand, viewed as dtype dt.
func upload[T any](t *testing.T, b *Backend, rng *rand.Rand, dt tensor.Dtype, v []T) *devArr {
	t.Helper()
	var z T
	size := int(unsafe.Sizeof(z))
	init := make([]byte, (len(v)+2*learnGuard)*size)
	for i := range init {
		init[i] = byte(rng.Uint32())
	}
	copy(init[learnGuard*size:], bytesOf(v))
	a, err := b.Alloc(int64(len(init)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Free(a) })
	if err := b.Upload(a, 0, init); err != nil {
		t.Fatal(err)
	}
	tt, err := b.Tensor(a, int64(learnGuard*size), dt, max(len(v), 1))
	if err != nil {
		t.Fatal(err)
	}
	return &devArr{a: a, t: tt, init: init, size: size}
}

// expect fails unless d holds want between its untouched guard elements.
func expect[T any](t *testing.T, b *Backend, what string, d *devArr, want []T) {
	t.Helper()
	got := make([]byte, len(d.init))
	if err := b.Download(got, d.a, 0); err != nil {
		t.Fatal(err)
	}
	g := learnGuard * d.size
	exp := append(append(append([]byte(nil), d.init[:g]...), bytesOf(want)...), d.init[len(d.init)-g:]...)
	if !bytes.Equal(got, exp) {
		i := 0
		for got[i] == exp[i] {
			i++
		}
		t.Fatalf("%s: byte %d of %d (element %d of %d between %d guard elements) differs from the reference loop",
			what, i, len(got), i/d.size-learnGuard, len(want), learnGuard)
	}
}

func randF32(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		switch rng.IntN(10) {
		case 0:
			v[i] = 0
		case 1:
			v[i] = float32(rng.NormFloat64() * 1e3)
		default:
			v[i] = float32(rng.NormFloat64())
		}
	}
	return v
}

func TestLearnerOpsMatchReference(t *testing.T) { forGrids(t, testLearnerOpsMatchReference) }

func testLearnerOpsMatchReference(t *testing.T, b *Backend) {
	sizes := []int{1, 2, 15, 17, 33, 64}
	for trial := range 16 { // every transpose and accumulate flag twice
		rng := rand.New(rand.NewPCG(uint64(trial), 28))
		f32 := tensor.Float32
		m, n, k := sizes[rng.IntN(len(sizes))], sizes[rng.IntN(len(sizes))], sizes[rng.IntN(len(sizes))]
		tA, tB, acc := trial&1 != 0, trial&2 != 0, trial&4 != 0
		a, bm, c := randF32(rng, m*k), randF32(rng, k*n), randF32(rng, m*n)
		da, db, dc := upload(t, b, rng, f32, a), upload(t, b, rng, f32, bm), upload(t, b, rng, f32, c)
		if err := b.Gemm(tA, tB, acc, m, n, k, da.t, db.t, dc.t); err != nil {
			t.Fatal(err)
		}
		flags := 0
		for i, on := range []bool{tA, tB, acc} {
			if on {
				flags |= 1 << i
			}
		}
		host.RefGemm(a, bm, c, m, n, k, flags)
		expect(t, b, fmt.Sprintf("trial %d: gemm %dx%dx%d flags %d", trial, m, n, k, flags), dc, c)

		z, bias := randF32(rng, m*n), randF32(rng, n)
		dz, dbias := upload(t, b, rng, f32, z), upload(t, b, rng, f32, bias)
		if err := b.BiasReLU(dz.t, dbias.t, m, n, trial%3 != 0); err != nil {
			t.Fatal(err)
		}
		host.RefBiasReLU(z, bias, m, n, trial%3 != 0)
		expect(t, b, "bias relu", dz, z)

		dy, y := randF32(rng, m*n), randF32(rng, m*n)
		ddy, dyv := upload(t, b, rng, f32, dy), upload(t, b, rng, f32, y)
		if err := b.ReLUGrad(ddy.t, dyv.t, m*n); err != nil {
			t.Fatal(err)
		}
		host.RefReLUGrad(dy, y)
		expect(t, b, "relu gradient", ddy, dy)

		// The same product with an epilogue in the same launch: bias
		// and ReLU, bias alone, or the ReLU gradient's mask.
		c2 := randF32(rng, m*n)
		dc2 := upload(t, b, rng, f32, c2)
		ep, epFlags := GemmEpilogue{Bias: dbias.t, ReLU: trial%3 == 0}, host.GemmBias
		if trial%3 == 0 {
			epFlags |= host.GemmReLU
		}
		if trial%3 == 2 {
			ep, epFlags = GemmEpilogue{ReLUGradOf: dyv.t}, host.GemmDReLU
		}
		if err := b.GemmEp(tA, tB, acc, m, n, k, da.t, db.t, dc2.t, ep); err != nil {
			t.Fatal(err)
		}
		host.RefGemmEpilogue(a, bm, c2, m, n, k, flags|epFlags, bias, y)
		expect(t, b, fmt.Sprintf("trial %d: gemm with epilogue %d", trial, epFlags), dc2, c2)

		acts := make([]int64, m)
		dacts := upload(t, b, rng, tensor.Int64, acts)
		if err := b.Argmax(dyv.t, dacts.t, m, n); err != nil {
			t.Fatal(err)
		}
		host.RefArgmax(y, acts, m, n)
		expect(t, b, "argmax", dacts, acts)

		out := randF32(rng, n)
		dout := upload(t, b, rng, f32, out)
		if err := b.ColSum(dyv.t, dout.t, m, n); err != nil {
			t.Fatal(err)
		}
		host.RefColSum(y, out, m, n)
		expect(t, b, "column sum", dout, out)

		testTDLossTrial(t, b, rng, trial)

		g := randF32(rng, m*n*k)
		parts := []int{1, 7, 256}[trial%3]
		maxNorm := []float64{1, 1e9, 30}[trial%3]
		dg := upload(t, b, rng, f32, g)
		dpart := upload(t, b, rng, tensor.Float64, make([]float64, parts))
		dnorm, dscale := upload(t, b, rng, tensor.Float64, []float64{0}), upload(t, b, rng, f32, []float32{0})
		if err := b.GradNorm(dg.t, len(g), dpart.t, parts, maxNorm, dnorm.t, dscale.t); err != nil {
			t.Fatal(err)
		}
		norm, scale := host.RefGradNorm(g, parts, maxNorm)
		expect(t, b, "norm", dnorm, []float64{norm})
		expect(t, b, "clip scale", dscale, []float32{scale})

		w, mo, v := randF32(rng, len(g)), randF32(rng, len(g)), randF32(rng, len(g))
		for i := range v {
			v[i] = float32(math.Abs(float64(v[i])))
		}
		dw, dm, dv := upload(t, b, rng, f32, w), upload(t, b, rng, f32, mo), upload(t, b, rng, f32, v)
		lr, step := []float64{2.3e-3, 1e-4}[trial%2], int64(1+trial*11)
		sc := dscale.t
		var refScale []float32
		if trial%4 == 3 {
			sc = nil
		} else {
			refScale = []float32{scale}
		}
		if err := b.Adam(dw.t, dg.t, dm.t, dv.t, len(g), sc, lr, step); err != nil {
			t.Fatal(err)
		}
		g0 := append([]float32(nil), g...)
		host.RefAdam(w, g, mo, v, refScale, host.NewAdamConsts(lr, step))
		expect(t, b, "Adam w", dw, w)
		expect(t, b, "Adam m", dm, mo)
		expect(t, b, "Adam v", dv, v)
		expect(t, b, "Adam g", dg, g0)
	}
}

func testTDLossTrial(t *testing.T, b *Backend, rng *rand.Rand, trial int) {
	t.Helper()
	bsz, na := 1+rng.IntN(300), 1+rng.IntN(5)
	q, qno, qnt := randF32(rng, bsz*na), randF32(rng, bsz*na), randF32(rng, bsz*na)
	act := make([]int64, bsz)
	rew, disc, w := randF32(rng, bsz), make([]float32, bsz), make([]float64, bsz)
	valid := make([]bool, bsz)
	validU8 := make([]uint8, bsz)
	for i := range bsz {
		act[i] = rng.Int64N(int64(na))
		disc[i] = []float32{0, 0.99, 0.970299}[rng.IntN(3)]
		w[i] = rng.Float64()
		valid[i] = rng.IntN(6) != 0
		if valid[i] {
			validU8[i] = 1
		}
	}
	f32 := tensor.Float32
	args := TDLossArgs{
		Q: upload(t, b, rng, f32, q).t, QNextTarget: upload(t, b, rng, f32, qnt).t,
		Actions: upload(t, b, rng, tensor.Int64, act).t, Reward: upload(t, b, rng, f32, rew).t,
		Discount: upload(t, b, rng, f32, disc).t, Weights: upload(t, b, rng, tensor.Float64, w).t,
		Batch: bsz, NumActions: na, PriorityEpsilon: 1e-6,
	}
	refQno, refValid := []float32(nil), []uint8(nil)
	if trial%2 == 0 {
		args.QNextOnline, refQno = upload(t, b, rng, f32, qno).t, qno
	}
	if trial%3 != 2 {
		args.Valid, refValid = upload(t, b, rng, tensor.Bool, valid).t, validU8
	}
	dq, td, prio, rl := randF32(rng, bsz*na), randF32(rng, bsz), randF32(rng, bsz), randF32(rng, bsz)
	ddq, dtd, dprio, drl := upload(t, b, rng, f32, dq), upload(t, b, rng, f32, td), upload(t, b, rng, f32, prio), upload(t, b, rng, f32, rl)
	args.DQ, args.TD, args.Priorities, args.RowLoss = ddq.t, dtd.t, dprio.t, drl.t
	if err := b.TDLoss(args); err != nil {
		t.Fatal(err)
	}
	host.RefTDLoss(q, refQno, qnt, act, rew, disc, w, refValid, bsz, na, 1e-6, dq, td, prio, rl)
	expect(t, b, "TD loss dq", ddq, dq)
	expect(t, b, "TD loss td", dtd, td)
	expect(t, b, "TD loss priorities", dprio, prio)
	expect(t, b, "TD loss row losses", drl, rl)
}

// TestLearnerOpsRefuseBadOperands: a bad operand fails with ErrBounds or
// ErrArena, launches nothing and leaves the output as it was.
func TestLearnerOpsRefuseBadOperands(t *testing.T) {
	b := newBackend(t)
	rng := rand.New(rand.NewPCG(1, 2))
	f32 := tensor.Float32
	x := upload(t, b, rng, f32, make([]float32, 16)) // 4x4
	y := upload(t, b, rng, f32, make([]float32, 16))
	out := upload(t, b, rng, f32, make([]float32, 16))
	f64 := upload(t, b, rng, tensor.Float64, make([]float64, 16))
	hostT := tensor.New(tensor.WithShape(16), tensor.WithBacking(make([]float32, 16)))
	other := newBackend(t)
	foreign := upload(t, other, rng, f32, make([]float32, 16))
	overlapping, err := b.Tensor(out.a, int64(learnGuard*4+8), f32, 8)
	if err != nil {
		t.Fatal(err)
	}
	overlapping64, err := b.Tensor(out.a, int64(learnGuard*4+12), tensor.Int64, 2)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"gemm a too small", func() error { return b.Gemm(false, false, false, 4, 4, 5, x.t, y.t, out.t) }, ErrBounds},
		{"gemm c float64", func() error { return b.Gemm(false, false, false, 4, 4, 4, x.t, y.t, f64.t) }, ErrBounds},
		{"gemm c overlaps a", func() error { return b.Gemm(false, false, false, 2, 2, 2, overlapping, y.t, out.t) }, ErrBounds},
		{"gemm c is a", func() error { return b.Gemm(false, false, true, 4, 4, 4, out.t, y.t, out.t) }, ErrBounds},
		{"gemm negative k", func() error { return b.Gemm(false, false, false, 4, 4, -1, x.t, y.t, out.t) }, ErrBounds},
		{"gemm host tensor", func() error { return b.Gemm(false, false, false, 4, 4, 4, hostT, y.t, out.t) }, ErrArena},
		{"gemm foreign tensor", func() error { return b.Gemm(false, false, false, 4, 4, 4, foreign.t, y.t, out.t) }, ErrArena},
		{"gemm nil", func() error { return b.Gemm(false, false, false, 4, 4, 4, nil, y.t, out.t) }, ErrBounds},
		{"gemm relu without bias", func() error {
			return b.GemmEp(false, false, false, 4, 4, 4, x.t, y.t, out.t, GemmEpilogue{ReLU: true})
		}, ErrBounds},
		{"gemm bias is c", func() error {
			return b.GemmEp(false, false, false, 4, 4, 4, x.t, y.t, out.t, GemmEpilogue{Bias: out.t})
		}, ErrBounds},
		{"gemm relu gradient y is c", func() error {
			return b.GemmEp(false, false, false, 4, 4, 4, x.t, y.t, out.t, GemmEpilogue{ReLUGradOf: out.t})
		}, ErrBounds},
		{"gemm bias float64", func() error {
			return b.GemmEp(false, false, false, 4, 4, 4, x.t, y.t, out.t, GemmEpilogue{Bias: f64.t})
		}, ErrBounds},
		{"bias too short", func() error { return b.BiasReLU(out.t, overlapping, 1, 16, true) }, ErrBounds},
		{"relu gradient too long", func() error { return b.ReLUGrad(out.t, x.t, 17) }, ErrBounds},
		{"argmax into its input", func() error { return b.Argmax(out.t, overlapping64, 2, 8) }, ErrBounds},
		{"argmax into float32", func() error { return b.Argmax(x.t, out.t, 4, 4) }, ErrBounds},
		{"argmax of no columns", func() error { return b.Argmax(x.t, f64.t, 4, 0) }, ErrBounds},
		{"column sum into its input", func() error { return b.ColSum(out.t, overlapping, 2, 4) }, ErrBounds},
		{"TD loss no outputs", func() error {
			return b.TDLoss(TDLossArgs{Q: x.t, QNextTarget: y.t, Batch: 4, NumActions: 4, DQ: out.t})
		}, ErrBounds},
		{"TD loss NaN epsilon", func() error {
			return b.TDLoss(TDLossArgs{Q: x.t, Batch: 4, NumActions: 4, PriorityEpsilon: math.NaN()})
		}, ErrBounds},
		{"norm no parts", func() error { return b.GradNorm(x.t, 16, f64.t, 0, 1, f64.t, out.t) }, ErrBounds},
		{"norm NaN clip", func() error { return b.GradNorm(x.t, 16, f64.t, 1, math.NaN(), f64.t, out.t) }, ErrBounds},
		{"norm outputs overlap", func() error { return b.GradNorm(x.t, 16, f64.t, 2, 1, f64.t, out.t) }, ErrBounds},
		{"Adam step 0", func() error { return b.Adam(out.t, x.t, y.t, f64.t, 4, nil, 1e-3, 0) }, ErrBounds},
		{"Adam m is w", func() error { return b.Adam(out.t, x.t, out.t, y.t, 4, nil, 1e-3, 1) }, ErrBounds},
		{"Adam negative rate", func() error { return b.Adam(out.t, x.t, y.t, f64.t, 4, nil, -1, 1) }, ErrBounds},
	}
	for _, tc := range tests {
		before := b.Launches()
		err := tc.call()
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if n := b.Launches() - before; n != 0 {
			t.Errorf("%s: %d launches queued by a failed call", tc.name, n)
		}
	}
	expect(t, b, "output after refused calls", out, make([]float32, 16))
}
