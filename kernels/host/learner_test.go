//go:build cgo

package host

import (
	"bytes"
	"math"
	"testing"
	"unsafe"

	"github.com/trajring/trajring/kernels"
)

// gbuf is an array in C memory between guard bytes, at a random aligned
// offset, remembering its initial bytes.
type gbuf struct {
	m        *Mem
	off, len int // bytes
	init     []byte
}

// put copies v into a guarded C array.
func put[T any](e *env, v []T) *gbuf {
	var z T
	size := int(unsafe.Sizeof(z))
	n := len(v) * size
	off := guard + size*e.rng.IntN(4)
	m := e.mem(off + n + guard)
	init := e.random(off + n + guard)
	if n > 0 {
		copy(init[off:], unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), n))
	}
	copy(m.Bytes(), init)
	return &gbuf{m: m, off: off, len: n, init: init}
}

func (g *gbuf) addr() uint64 { return g.m.Addr(g.off) }

// checkOut fails unless g holds exactly want's bytes and its guards are
// untouched.
func checkOut[T any](e *env, what string, g *gbuf, want []T) {
	e.t.Helper()
	got := g.m.Bytes()
	if !bytes.Equal(got[:g.off], g.init[:g.off]) || !bytes.Equal(got[g.off+g.len:], g.init[g.off+g.len:]) {
		e.t.Fatalf("%s: guard bytes around the output were written", what)
	}
	var z T
	size := int(unsafe.Sizeof(z))
	w := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(want))), len(want)*size)
	if i := bytes.Index(got[g.off:g.off+g.len], w); i != 0 || len(w) != g.len {
		k := 0
		for k < len(w) && got[g.off+k] == w[k] {
			k++
		}
		e.t.Fatalf("%s: element %d of %d differs from the reference loop (got %v, want %v)", what, k/size, len(want),
			*(*T)(unsafe.Pointer(&got[g.off+k/size*size])), want[k/size])
	}
}

// value returns a float32 of random sign and size: mostly normals around
// 1, some large or tiny, zeros of both signs, now and then a subnormal.
func (e *env) value() float32 {
	switch e.rng.IntN(16) {
	case 0:
		return 0
	case 1:
		return float32(math.Copysign(0, -1))
	case 2:
		return math.Float32frombits(e.rng.Uint32() & 0x807fffff)
	case 3:
		return float32(e.rng.NormFloat64() * math.Pow(10, float64(e.rng.IntN(9)-4)))
	default:
		return float32(e.rng.NormFloat64())
	}
}

// tdBatch draws a TD loss's batch of bsz transitions over na actions:
// actions, rewards, discounts (each one of discs), importance weights and
// validity bytes (mostly valid, any nonzero byte). One action in 20 is
// one of bad (out of range: the loss must skip it), drawn from bad only
// when it has more than one.
func (e *env) tdBatch(bsz, na int, bad []int64, discs []float32) (act []int64, rew, disc []float32, w []float64, valid []uint8) {
	act = make([]int64, bsz)
	rew, disc = e.values(bsz), make([]float32, bsz)
	w = make([]float64, bsz)
	valid = make([]uint8, bsz)
	for i := range bsz {
		act[i] = e.rng.Int64N(int64(na))
		if e.rng.IntN(20) == 0 {
			act[i] = bad[0]
			if len(bad) > 1 {
				act[i] = bad[e.rng.IntN(len(bad))]
			}
		}
		disc[i] = discs[e.rng.IntN(len(discs))]
		w[i] = e.rng.Float64() * 2
		valid[i] = uint8(e.rng.IntN(5))
	}
	return act, rew, disc, w, valid
}

func (e *env) values(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = e.value()
	}
	return v
}

// learnerModes alternate the trials between launches in order and in
// race exposure (four host threads, shuffled units of a warp).
var learnerModes = []Mode{{}, {Threads: 4, Chunk: 32, Seed: 11}, {Threads: 3, Chunk: 7, Seed: 5}}

// gemmGrids are grids of blocks of 256 threads, as the gpu backend
// launches trajring_gemm: one block, fewer blocks than tiles, more.
var gemmGrids = []int64{1, 2, 3, 7, 40}

func TestGemmMatchesReference(t *testing.T) {
	dims := []int{1, 2, 5, 15, 16, 17, 31, 33, 64, 70}
	for trial := range 90 {
		e := newEnv(t, 9000+uint64(trial))
		withMode(t, learnerModes[trial%len(learnerModes)])
		m, n, k := dims[e.rng.IntN(len(dims))], dims[e.rng.IntN(len(dims))], dims[e.rng.IntN(len(dims))]
		if trial%15 == 7 {
			k = 0
		}
		flags := trial % 8
		// Every third trial with bias (and ReLU on even trials), every
		// third with the ReLU gradient's epilogue.
		switch trial % 3 {
		case 1:
			flags |= GemmBias
			if trial%2 == 0 {
				flags |= GemmReLU
			}
		case 2:
			flags |= GemmDReLU
		}
		a, b, c, bias, y := e.values(m*k), e.values(k*n), e.values(m*n), e.values(n), e.values(m*n)
		ga, gb, gc, gbias, gy := put(e, a), put(e, b), put(e, c), put(e, bias), put(e, y)
		gx := gemmGrids[trial%len(gemmGrids)]
		if err := Launch(kernels.Gemm, gx, 1, 256, ga.addr(), gb.addr(), gc.addr(), uint64(m), uint64(n), uint64(k), uint64(flags),
			gbias.addr(), gy.addr()); err != nil {
			t.Fatal(err)
		}
		RefGemmEpilogue(a, b, c, m, n, k, flags, bias, y)
		checkOut(e, "gemm", gc, c)
	}
}

// TestGemmExact pins small products worked out by hand, in each storage
// order, and an accumulation.
func TestGemmExact(t *testing.T) {
	tests := []struct {
		name    string
		a, b, c []float32
		m, n, k int
		flags   int
		want    []float32
	}{
		{"plain", []float32{1, 2, 3, 4, 5, 6}, []float32{1, 0, 0, 1, 2, -1}, []float32{9, 9, 9, 9}, 2, 2, 3, 0, []float32{7, -1, 16, -1}},
		{"transA", []float32{1, 4, 2, 5, 3, 6}, []float32{1, 0, 0, 1, 2, -1}, []float32{9, 9, 9, 9}, 2, 2, 3, GemmTransA, []float32{7, -1, 16, -1}},
		{"transB", []float32{1, 2, 3, 4, 5, 6}, []float32{1, 0, 2, 0, 1, -1}, []float32{9, 9, 9, 9}, 2, 2, 3, GemmTransB, []float32{7, -1, 16, -1}},
		{"acc", []float32{1, 2, 3, 4, 5, 6}, []float32{1, 0, 0, 1, 2, -1}, []float32{1, 2, 3, 4}, 2, 2, 3, GemmAcc, []float32{8, 1, 19, 3}},
		// 1 + 2^-24 + 2^-24: each sum rounds on its own, back to 1
		// (a sum in double would round to 1+2^-23).
		{"rounding", []float32{1, 0x1p-24, 0x1p-24}, []float32{1, 1, 1}, []float32{0}, 1, 1, 3, 0, []float32{1}},
	}
	for _, tc := range tests {
		e := newEnv(t, 1)
		ga, gb, gc := put(e, tc.a), put(e, tc.b), put(e, tc.c)
		if err := Launch(kernels.Gemm, 1, 1, 256, ga.addr(), gb.addr(), gc.addr(), uint64(tc.m), uint64(tc.n), uint64(tc.k), uint64(tc.flags), 0, 0); err != nil {
			t.Fatal(err)
		}
		checkOut(e, tc.name, gc, tc.want)
	}
}

// TestGemmEpilogueIsTheSeparateLaunches: trajring_gemm with its
// bias+ReLU or ReLU-gradient epilogue writes bit for bit what
// trajring_gemm followed by trajring_bias_relu or trajring_relu_grad
// writes (the learner's fused launches change no result).
func TestGemmEpilogueIsTheSeparateLaunches(t *testing.T) {
	dims := []int{1, 3, 16, 17, 33, 64}
	for trial := range 36 {
		e := newEnv(t, 7100+uint64(trial))
		withMode(t, learnerModes[trial%len(learnerModes)])
		m, n, k := dims[e.rng.IntN(len(dims))], dims[e.rng.IntN(len(dims))], dims[e.rng.IntN(len(dims))]
		flags := trial % 4 // storage orders
		a, b, c, bias, y := e.values(m*k), e.values(k*n), e.values(m*n), e.values(n), e.values(m*n)
		ga, gb, gbias, gy := put(e, a), put(e, b), put(e, bias), put(e, y)
		fused, sep := put(e, c), put(e, c)
		ep, relu := GemmDReLU, uint64(0)
		if trial%2 == 0 {
			ep = GemmBias
			if trial%4 == 0 {
				ep, relu = GemmBias|GemmReLU, 1
			}
		}
		gx := gemmGrids[trial%len(gemmGrids)]
		if err := Launch(kernels.Gemm, gx, 1, 256, ga.addr(), gb.addr(), fused.addr(), uint64(m), uint64(n), uint64(k),
			uint64(flags|ep), gbias.addr(), gy.addr()); err != nil {
			t.Fatal(err)
		}
		if err := Launch(kernels.Gemm, gx, 1, 256, ga.addr(), gb.addr(), sep.addr(), uint64(m), uint64(n), uint64(k), uint64(flags), 0, 0); err != nil {
			t.Fatal(err)
		}
		var err error
		if ep == GemmDReLU {
			err = Launch(kernels.ReLUGrad, 3, 1, 256, sep.addr(), gy.addr(), uint64(m*n))
		} else {
			err = Launch(kernels.BiasReLU, 3, 1, 256, sep.addr(), gbias.addr(), uint64(m), uint64(n), relu)
		}
		if err != nil {
			t.Fatal(err)
		}
		want := append([]float32(nil), c...)
		RefGemmEpilogue(a, b, want, m, n, k, flags|ep, bias, y)
		checkOut(e, "fused gemm", fused, want)
		checkOut(e, "gemm, then its own epilogue launch", sep, want)
	}
}

func TestElementwiseMatchReference(t *testing.T) {
	dims := []int{1, 3, 16, 33, 256, 300}
	for trial := range 60 {
		e := newEnv(t, 9500+uint64(trial))
		withMode(t, learnerModes[trial%len(learnerModes)])
		grid := grids[trial%len(grids)]
		rows, cols := dims[e.rng.IntN(4)], dims[e.rng.IntN(len(dims))]
		z, bias := e.values(rows*cols), e.values(cols)
		relu := trial%2 == 0
		gz, gbias := put(e, z), put(e, bias)
		if err := Launch(kernels.BiasReLU, grid[0], 1, grid[2], gz.addr(), gbias.addr(), uint64(rows), uint64(cols), b2u(relu)); err != nil {
			t.Fatal(err)
		}
		RefBiasReLU(z, bias, rows, cols, relu)
		checkOut(e, "bias_relu", gz, z)

		dy, y := e.values(rows*cols), e.values(rows*cols)
		gdy, gy := put(e, dy), put(e, y)
		if err := Launch(kernels.ReLUGrad, grid[0], 1, grid[2], gdy.addr(), gy.addr(), uint64(rows*cols)); err != nil {
			t.Fatal(err)
		}
		RefReLUGrad(dy, y)
		checkOut(e, "relu_grad", gdy, dy)

		q := e.values(rows * cols)
		if trial%3 == 0 { // ties: the first largest wins
			for i := range q {
				q[i] = float32(e.rng.IntN(3))
			}
		}
		acts := make([]int64, rows)
		for i := range acts {
			acts[i] = e.rng.Int64()
		}
		gq, gacts := put(e, q), put(e, acts)
		if err := Launch(kernels.Argmax, grid[0], 1, grid[2], gq.addr(), gacts.addr(), uint64(rows), uint64(cols)); err != nil {
			t.Fatal(err)
		}
		RefArgmax(q, acts, rows, cols)
		checkOut(e, "argmax", gacts, acts)

		x, out := e.values(rows*cols), e.values(cols)
		gx, gout := put(e, x), put(e, out)
		if err := Launch(kernels.ColSum, grid[0], 1, grid[2], gx.addr(), gout.addr(), uint64(rows), uint64(cols)); err != nil {
			t.Fatal(err)
		}
		RefColSum(x, out, rows, cols)
		checkOut(e, "col_sum", gout, out)
	}
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func TestTDLossMatchesReference(t *testing.T) {
	for trial := range 80 {
		e := newEnv(t, 9700+uint64(trial))
		withMode(t, learnerModes[trial%len(learnerModes)])
		grid := grids[trial%len(grids)]
		bsz, na := 1+e.rng.IntN(300), 1+e.rng.IntN(6)
		q, qno, qnt := e.values(bsz*na), e.values(bsz*na), e.values(bsz*na)
		if trial%4 == 1 { // ties: the first largest wins
			for i := range qno {
				qno[i] = float32(e.rng.IntN(2))
			}
		}
		act, rew, disc, w, valid := e.tdBatch(bsz, na, []int64{-1, int64(na), 1 << 40}, []float32{0, 0.99, 0.9801, 1})
		eps := []float64{0, 1e-6, 0.01}[trial%3]
		var gqno *gbuf
		qnoAddr, refQno := uint64(0), []float32(nil)
		if trial%3 != 2 {
			gqno, refQno = put(e, qno), qno
			qnoAddr = gqno.addr()
		}
		validAddr, refValid := uint64(0), []uint8(nil)
		gvalid := put(e, valid)
		if trial%4 != 3 {
			validAddr, refValid = gvalid.addr(), valid
		}
		gq, gqnt, gact, grew, gdisc, gw := put(e, q), put(e, qnt), put(e, act), put(e, rew), put(e, disc), put(e, w)
		dq, td, prio, rl := e.values(bsz*na), e.values(bsz), e.values(bsz), e.values(bsz)
		gdq, gtd, gprio, grl := put(e, dq), put(e, td), put(e, prio), put(e, rl)
		if err := Launch(kernels.TDLoss, grid[0], 1, grid[2], gq.addr(), qnoAddr, gqnt.addr(), gact.addr(), grew.addr(), gdisc.addr(),
			gw.addr(), validAddr, uint64(bsz), uint64(na), math.Float64bits(eps), gdq.addr(), gtd.addr(), gprio.addr(), grl.addr()); err != nil {
			t.Fatal(err)
		}
		RefTDLoss(q, refQno, qnt, act, rew, disc, w, refValid, bsz, na, eps, dq, td, prio, rl)
		checkOut(e, "dq", gdq, dq)
		checkOut(e, "td", gtd, td)
		checkOut(e, "priorities", gprio, prio)
		checkOut(e, "row losses", grl, rl)
	}
}

// TestTDLossExact pins a double-DQN row worked out by hand, a row inside
// Huber's quadratic part, a masked row and one with no such action.
func TestTDLossExact(t *testing.T) {
	e := newEnv(t, 1)
	q := []float32{1, 2, 0.5, 0, 7, 7, 7, 7}
	qno := []float32{3, 5, 1, 0, 1, 2, 0, 0} // next actions 1, 0, 1, 0
	qnt := []float32{0.5, 4, 1, 9, 0, 0, 0, 0}
	act := []int64{0, 0, 1, 2}
	rew := []float32{1, 0.25, 1, 1}
	disc := []float32{0.5, 0.5, 0.5, 0.5}
	w := []float64{2, 1, 3, 1}
	valid := []uint8{1, 1, 0, 1}
	// row 0: y = 1 + 0.5*4 = 3, td = 1-3 = -2: Huber 1.5, weight 2;
	// gradient 2*(-1)/4. Row 1: y = 0.25 + 0.5*1 = 0.75, td = -0.25:
	// Huber 0.03125; gradient -0.25/4. Row 2: y = 1, td = 6, masked (weight
	// 0: no gradient, priority or loss). Row 3: action 2 of 2 actions.
	gq, gqno, gqnt, gact, grew, gdisc, gw, gv := put(e, q), put(e, qno), put(e, qnt), put(e, act), put(e, rew), put(e, disc), put(e, w), put(e, valid)
	gdq, gtd, gprio, grl := put(e, make([]float32, 8)), put(e, make([]float32, 4)), put(e, make([]float32, 4)), put(e, make([]float32, 4))
	if err := Launch(kernels.TDLoss, 1, 1, 32, gq.addr(), gqno.addr(), gqnt.addr(), gact.addr(), grew.addr(), gdisc.addr(),
		gw.addr(), gv.addr(), 4, 2, math.Float64bits(0.5), gdq.addr(), gtd.addr(), gprio.addr(), grl.addr()); err != nil {
		t.Fatal(err)
	}
	checkOut(e, "dq", gdq, []float32{-0.5, 0, -0.0625, 0, 0, 0, 0, 0})
	checkOut(e, "td", gtd, []float32{-2, -0.25, 6, 0})
	checkOut(e, "priorities", gprio, []float32{2.5, 0.75, 0, 0})
	checkOut(e, "row losses", grl, []float32{3, 0.03125, 0, 0})
}

func TestGradNormMatchesReference(t *testing.T) {
	for trial := range 60 {
		e := newEnv(t, 9900+uint64(trial))
		withMode(t, learnerModes[trial%len(learnerModes)])
		grid := grids[trial%len(grids)]
		n := []int{0, 1, 7, 256, 1000, 5000}[trial%6]
		parts := []int{1, 3, 256, 1024}[trial%4]
		g := e.values(n)
		maxNorm := []float64{0.5, 10, 1e30}[trial%3]
		gg := put(e, g)
		partial := put(e, make([]float64, parts))
		norm, scale := put(e, []float64{-1}), put(e, []float32{-1})
		if err := Launch(kernels.NormPartial, grid[0], 1, grid[2], gg.addr(), uint64(n), uint64(parts), partial.addr()); err != nil {
			t.Fatal(err)
		}
		if err := Launch(kernels.NormFinish, 1, 1, []int64{1, 32}[trial%2], partial.addr(), uint64(parts), math.Float64bits(maxNorm), norm.addr(), scale.addr()); err != nil {
			t.Fatal(err)
		}
		wantNorm, wantScale := RefGradNorm(g, parts, maxNorm)
		checkOut(e, "norm", norm, []float64{wantNorm})
		checkOut(e, "scale", scale, []float32{wantScale})
	}
	// Exact: the norm of (3, 4) is 5; clipped to 1 it scales by 1/(5+1e-6).
	e := newEnv(t, 1)
	gg, partial := put(e, []float32{3, 4}), put(e, make([]float64, 2))
	norm, scale := put(e, []float64{0}), put(e, []float32{0})
	if err := Launch(kernels.NormPartial, 1, 1, 32, gg.addr(), 2, 2, partial.addr()); err != nil {
		t.Fatal(err)
	}
	if err := Launch(kernels.NormFinish, 1, 1, 1, partial.addr(), 2, math.Float64bits(1), norm.addr(), scale.addr()); err != nil {
		t.Fatal(err)
	}
	checkOut(e, "norm of (3, 4)", norm, []float64{5})
	checkOut(e, "scale of (3, 4)", scale, []float32{float32(1 / (5 + 1e-6))})
}

func TestAdamMatchesReference(t *testing.T) {
	for trial := range 60 {
		e := newEnv(t, 10100+uint64(trial))
		withMode(t, learnerModes[trial%len(learnerModes)])
		grid := grids[trial%len(grids)]
		n := []int{1, 5, 256, 1000}[trial%4]
		w, g, m := e.values(n), e.values(n), e.values(n)
		v := e.values(n)
		for i := range v {
			v[i] = float32(math.Abs(float64(v[i]))) // a second moment is never negative
		}
		k := NewAdamConsts([]float64{2.3e-3, 1e-4, 0.5}[trial%3], int64(1+trial*37))
		var scale []float32
		scaleAddr := uint64(0)
		if trial%2 == 1 {
			scale = []float32{0.37}
			scaleAddr = put(e, scale).addr()
		}
		gw, gg, gm, gv := put(e, w), put(e, g), put(e, m), put(e, v)
		f := func(x float32) uint64 { return math.Float64bits(float64(x)) }
		if err := Launch(kernels.Adam, grid[0], 1, grid[2], gw.addr(), gg.addr(), gm.addr(), gv.addr(), uint64(n), scaleAddr,
			f(k.B1), f(k.B2), f(k.OmB1), f(k.OmB2), f(k.Eps), f(k.NegLR), f(k.C1), f(k.C2), 0); err != nil {
			t.Fatal(err)
		}
		g0 := append([]float32(nil), g...)
		RefAdam(w, g, m, v, scale, k)
		checkOut(e, "w", gw, w)
		checkOut(e, "m", gm, m)
		checkOut(e, "v", gv, v)
		checkOut(e, "g (unchanged)", gg, g0)
	}
}

// bytesOf returns the bytes of a guarded array now.
func (g *gbuf) bytesNow() []byte { return g.m.Bytes()[g.off : g.off+g.len] }

// TestGemm3MatchesReference: trajring_gemm3's products, one to three of
// them, each equal bit for bit to trajring_gemm's launch of its own (and
// to the reference loop), in every mode and grid.
func TestGemm3MatchesReference(t *testing.T) {
	dims := []int{1, 2, 5, 16, 17, 33, 64}
	for trial := range 60 {
		e := newEnv(t, 23000+uint64(trial))
		withMode(t, learnerModes[trial%len(learnerModes)])
		m, n, k := dims[e.rng.IntN(len(dims))], dims[e.rng.IntN(len(dims))], dims[e.rng.IntN(len(dims))]
		if trial%13 == 5 {
			k = 0
		}
		flags := trial % 8
		switch trial % 3 {
		case 1:
			flags |= GemmBias
			if trial%2 == 0 {
				flags |= GemmReLU
			}
		case 2:
			flags |= GemmDReLU
		}
		var a, b, c, ep [3][]float32
		var ga, gb, gc, ge, sep [3]*gbuf
		var args []uint64
		for p := range 3 {
			ga[p], gb[p] = put(e, e.values(m*k)), put(e, e.values(k*n))
			// product p is left out on trials where bit p of trial/3 is set
			// (never all three)
			if (trial/3)%7&(1<<p) != 0 && p < 2 {
				args = append(args, ga[p].addr(), gb[p].addr(), 0, 0)
				continue
			}
			a[p], b[p] = e.values(m*k), e.values(k*n)
			ga[p], gb[p] = put(e, a[p]), put(e, b[p])
			c[p] = e.values(m * n)
			en := m * n
			if flags&GemmBias != 0 {
				en = n
			}
			ep[p] = e.values(en)
			gc[p], sep[p], ge[p] = put(e, c[p]), put(e, c[p]), put(e, ep[p])
			args = append(args, ga[p].addr(), gb[p].addr(), gc[p].addr(), ge[p].addr())
		}
		args = append(args, uint64(m), uint64(n), uint64(k), uint64(flags))
		gx := gemmGrids[trial%len(gemmGrids)]
		if err := Launch(kernels.Gemm3, gx, 1, 256, args...); err != nil {
			t.Fatal(err)
		}
		RefGemm3(a, b, c, ep, m, n, k, flags)
		for p := range 3 {
			if c[p] == nil {
				continue
			}
			bias, y := ge[p].addr(), uint64(0)
			if flags&GemmBias == 0 {
				bias, y = 0, ge[p].addr()
			}
			if err := Launch(kernels.Gemm, gx, 1, 256, ga[p].addr(), gb[p].addr(), sep[p].addr(), uint64(m), uint64(n), uint64(k),
				uint64(flags), bias, y); err != nil {
				t.Fatal(err)
			}
			checkOut(e, "gemm3 product", gc[p], c[p])
			checkOut(e, "gemm of the same product", sep[p], c[p])
		}
	}
}

// TestGemmBackIsTheSeparateLaunches: trajring_gemm_back writes bit for
// bit what trajring_gemm (dW), trajring_col_sum (db), trajring_gemm with
// the ReLU gradient (dX), trajring_norm_partial and trajring_norm_finish
// write in launches of their own (and the reference loops), with and
// without dX, the mask and the norm, in every mode and grid; the norm's
// counter is zero again after it.
func TestGemmBackIsTheSeparateLaunches(t *testing.T) {
	dims := []int{1, 2, 5, 16, 17, 33, 64}
	for trial := range 60 {
		e := newEnv(t, 24000+uint64(trial))
		withMode(t, learnerModes[trial%len(learnerModes)])
		bsz, k, n := dims[e.rng.IntN(len(dims))], dims[e.rng.IntN(len(dims))], dims[e.rng.IntN(len(dims))]
		withDX, withY, withNorm := trial%4 != 3, trial%3 != 2, trial%5 != 4
		x, dz, w, y := e.values(bsz*k), e.values(bsz*n), e.values(k*n), e.values(bsz*k)
		// The gradient: pre, gw [k*n], gb [n], post, as the learner's flat
		// layout puts the layer's among the others.
		pre, post := e.rng.IntN(40), e.rng.IntN(40)
		flat := e.values(pre + k*n + n + post)
		dx := e.values(bsz * k)
		gx, gdz, gwt, gy := put(e, x), put(e, dz), put(e, w), put(e, y)
		fused, sep := put(e, flat), put(e, flat)
		fdx, sdx := put(e, dx), put(e, dx)
		parts := []int{1, 3, 256, 300}[trial%4]
		maxNorm := []float64{0.5, 10, 1e30}[trial%3]
		st := make([]uint64, 3+parts)
		for i := 1; i < len(st); i++ {
			st[i] = e.rng.Uint64()
		}
		state := put(e, st)
		sPartial, sNorm, sScale := put(e, make([]float64, parts)), put(e, []float64{-1}), put(e, []float32{-1})
		gwOff, gbOff := uint64(4*pre), uint64(4*(pre+k*n))
		yArg, dxArg, sdxArg := gy.addr(), fdx.addr(), sdx.addr()
		if !withY {
			yArg = 0
		}
		if !withDX {
			dxArg, sdxArg = 0, 0
		}
		stArg := state.addr()
		if !withNorm {
			stArg = 0
		}
		grid := gemmGrids[trial%len(gemmGrids)]
		ng := len(flat)
		if err := Launch(kernels.GemmBack, grid, 1, 256, gx.addr(), gdz.addr(), gwt.addr(), yArg, fused.addr()+gwOff, fused.addr()+gbOff,
			dxArg, uint64(bsz), uint64(k), uint64(n), fused.addr(), uint64(ng), uint64(parts), stArg, math.Float64bits(maxNorm)); err != nil {
			t.Fatal(err)
		}
		// The separate launches.
		if err := Launch(kernels.Gemm, grid, 1, 256, gx.addr(), gdz.addr(), sep.addr()+gwOff, uint64(k), uint64(n), uint64(bsz), GemmTransA, 0, 0); err != nil {
			t.Fatal(err)
		}
		if err := Launch(kernels.ColSum, 3, 1, 256, gdz.addr(), sep.addr()+gbOff, uint64(bsz), uint64(n)); err != nil {
			t.Fatal(err)
		}
		if withDX {
			flags := uint64(GemmTransB)
			if withY {
				flags |= GemmDReLU
			}
			if err := Launch(kernels.Gemm, grid, 1, 256, gdz.addr(), gwt.addr(), sdxArg, uint64(bsz), uint64(k), uint64(n), flags, 0, yArg); err != nil {
				t.Fatal(err)
			}
		}
		if err := Launch(kernels.NormPartial, 1, 1, 256, sep.addr(), uint64(ng), uint64(parts), sPartial.addr()); err != nil {
			t.Fatal(err)
		}
		if err := Launch(kernels.NormFinish, 1, 1, 1, sPartial.addr(), uint64(parts), math.Float64bits(maxNorm), sNorm.addr(), sScale.addr()); err != nil {
			t.Fatal(err)
		}
		// The reference.
		want := append([]float32(nil), flat...)
		wantDX := append([]float32(nil), dx...)
		var rdx, ry []float32
		if withDX {
			rdx = wantDX
		}
		if withY {
			ry = y
		}
		RefGemmBack(x, dz, w, ry, want[pre:pre+k*n], want[pre+k*n:pre+k*n+n], rdx, bsz, k, n)
		checkOut(e, "gemm_back gradients", fused, want)
		checkOut(e, "separate gradients", sep, want)
		checkOut(e, "gemm_back dX", fdx, wantDX)
		checkOut(e, "separate dX", sdx, wantDX)
		wantNorm, wantScale := RefGradNorm(want, parts, maxNorm)
		checkOut(e, "separate norm", sNorm, []float64{wantNorm})
		checkOut(e, "separate scale", sScale, []float32{wantScale})
		got := state.bytesNow()
		if !withNorm {
			checkOut(e, "untouched state", state, st)
			continue
		}
		if c := *(*uint64)(unsafe.Pointer(&got[0])); c != 0 {
			t.Fatalf("trial %d: counter %d after the launch", trial, c)
		}
		if gn := *(*float64)(unsafe.Pointer(&got[8])); math.Float64bits(gn) != math.Float64bits(wantNorm) {
			t.Fatalf("trial %d: norm %v, want %v", trial, gn, wantNorm)
		}
		if gs := *(*float32)(unsafe.Pointer(&got[16])); math.Float32bits(gs) != math.Float32bits(wantScale) {
			t.Fatalf("trial %d: scale %v, want %v", trial, gs, wantScale)
		}
		if !bytes.Equal(got[24:], sPartial.bytesNow()) {
			t.Fatalf("trial %d: partial sums differ from trajring_norm_partial's", trial)
		}
	}
}

// TestTDHeadIsTheSeparateLaunches: trajring_td_head writes bit for bit
// what trajring_gemm3 (the last layer's products with their biases)
// followed by trajring_td_loss writes (and the reference loops), with
// and without double DQN and the mask, in every mode and grid; its count
// of finished blocks is 0 again after it.
func TestTDHeadIsTheSeparateLaunches(t *testing.T) {
	for trial := range 48 {
		e := newEnv(t, 26000+uint64(trial))
		withMode(t, learnerModes[trial%len(learnerModes)])
		bsz, k, na := 1+e.rng.IntN(300), 1+e.rng.IntN(40), 1+e.rng.IntN(6)
		double, masked := trial%3 != 2, trial%4 != 3
		x0, x1, x2 := e.values(bsz*k), e.values(bsz*k), e.values(bsz*k)
		wo, bo, wt, bt := e.values(k*na), e.values(na), e.values(k*na), e.values(na)
		act, rew, disc, w, valid := e.tdBatch(bsz, na, []int64{-1}, []float32{0, 0.99, 1})
		eps := []float64{0, 1e-6, 0.01}[trial%3]
		gx0, gx1, gx2 := put(e, x0), put(e, x1), put(e, x2)
		gwo, gbo, gwt, gbt := put(e, wo), put(e, bo), put(e, wt), put(e, bt)
		gact, grew, gdisc, gw, gvalid := put(e, act), put(e, rew), put(e, disc), put(e, w), put(e, valid)
		validAddr, refValid := uint64(0), []uint8(nil)
		if masked {
			validAddr, refValid = gvalid.addr(), valid
		}
		// Outputs of the fused launch (f) and of the separate ones (s).
		type outs struct{ q, qno, qnt, dq, td, prio, rl *gbuf }
		mk := func() outs {
			return outs{put(e, e.values(bsz*na)), put(e, e.values(bsz*na)), put(e, e.values(bsz*na)), put(e, e.values(bsz*na)),
				put(e, e.values(bsz)), put(e, e.values(bsz)), put(e, e.values(bsz))}
		}
		f, s := mk(), mk()
		x1Addr, fqno, sqno := gx1.addr(), f.qno.addr(), s.qno.addr()
		if !double {
			x1Addr, fqno, sqno = 0, 0, 0
		}
		desc := make([]uint64, 19)
		copy(desc, []uint64{gx0.addr(), x1Addr, gx2.addr(), gwo.addr(), gbo.addr(), gwt.addr(), gbt.addr(), f.q.addr(), fqno, f.qnt.addr(),
			f.dq.addr(), f.td.addr(), f.prio.addr(), f.rl.addr(), uint64(bsz), uint64(k), uint64(na), math.Float64bits(eps), 0})
		gdesc := put(e, desc)
		gx := gemmGrids[trial%len(gemmGrids)]
		if err := Launch(kernels.TDHead, gx, 1, 256, gdesc.addr(), gact.addr(), grew.addr(), gdisc.addr(), gw.addr(), validAddr); err != nil {
			t.Fatal(err)
		}
		if err := Launch(kernels.Gemm3, gx, 1, 256, gx0.addr(), gwo.addr(), s.q.addr(), gbo.addr(), x1Addr, gwo.addr(), sqno, gbo.addr(),
			gx2.addr(), gwt.addr(), s.qnt.addr(), gbt.addr(), uint64(bsz), uint64(na), uint64(k), GemmBias); err != nil {
			t.Fatal(err)
		}
		if err := Launch(kernels.TDLoss, 1, 1, 256, s.q.addr(), sqno, s.qnt.addr(), gact.addr(), grew.addr(), gdisc.addr(),
			gw.addr(), validAddr, uint64(bsz), uint64(na), math.Float64bits(eps), s.dq.addr(), s.td.addr(), s.prio.addr(), s.rl.addr()); err != nil {
			t.Fatal(err)
		}
		// The reference.
		q, qno, qnt := make([]float32, bsz*na), make([]float32, bsz*na), make([]float32, bsz*na)
		RefGemmEpilogue(x0, wo, q, bsz, na, k, GemmBias, bo, nil)
		RefGemmEpilogue(x1, wo, qno, bsz, na, k, GemmBias, bo, nil)
		RefGemmEpilogue(x2, wt, qnt, bsz, na, k, GemmBias, bt, nil)
		refQno := qno
		if !double {
			refQno = nil
		}
		dq, td, prio, rl := make([]float32, bsz*na), make([]float32, bsz), make([]float32, bsz), make([]float32, bsz)
		RefTDLoss(q, refQno, qnt, act, rew, disc, w, refValid, bsz, na, eps, dq, td, prio, rl)
		for _, o := range []outs{f, s} {
			checkOut(e, "q", o.q, q)
			if double {
				checkOut(e, "q next online", o.qno, qno)
			}
			checkOut(e, "q next target", o.qnt, qnt)
			checkOut(e, "dq", o.dq, dq)
			checkOut(e, "td", o.td, td)
			checkOut(e, "priorities", o.prio, prio)
			checkOut(e, "row losses", o.rl, rl)
		}
		checkOut(e, "descriptor (its count back at 0)", gdesc, desc)
	}
}
