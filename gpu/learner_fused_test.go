//go:build trajring_cuda

package gpu

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/trajring/trajring/kernels/host"
	"gorgonia.org/tensor"
)

// refPartials are trajring_norm_partial's partial sums of g.
func refPartials(g []float32, parts int) []float64 {
	partial := make([]float64, parts)
	for p := range parts {
		s := 0.0
		for i := p; i < len(g); i += parts {
			v := float64(g[i])
			s = s + float64(v*v)
		}
		partial[p] = s
	}
	return partial
}

// TestLearnerFusedOpsMatchReference: Gemm3, GemmBack and TDHead on the
// stand-in write the reference loops' bytes (kernels/host.RefGemm3,
// RefGemmBack, RefGradNorm, RefGemmEpilogue and RefTDLoss) between
// untouched guards, on every grid.
func TestLearnerFusedOpsMatchReference(t *testing.T) { forGrids(t, testLearnerFusedOpsMatchReference) }

func testLearnerFusedOpsMatchReference(t *testing.T, b *Backend) {
	sizes := []int{1, 2, 15, 17, 33, 64}
	f32 := tensor.Float32
	trials := 12
	if testing.Short() {
		trials = 6
	}
	for trial := range trials {
		rng := rand.New(rand.NewPCG(uint64(trial), 42))
		m, n, k := sizes[rng.IntN(len(sizes))], sizes[rng.IntN(len(sizes))], sizes[rng.IntN(len(sizes))]
		tA, tB := trial&1 != 0, trial&2 != 0
		flags := trial & 3
		np := 1 + trial%3
		kind := trial % 3 // bias+ReLU, bias, ReLU gradient
		var a, bm, c, e [3][]float32
		var dc [3]*devArr
		var ps []GemmProduct
		for p := range np {
			a[p], bm[p], c[p] = randF32(rng, m*k), randF32(rng, k*n), randF32(rng, m*n)
			da, db := upload(t, b, rng, f32, a[p]), upload(t, b, rng, f32, bm[p])
			dc[p] = upload(t, b, rng, f32, c[p])
			pr := GemmProduct{A: da.t, B: db.t, C: dc[p].t}
			if kind < 2 {
				e[p] = randF32(rng, n)
				pr.Ep = GemmEpilogue{Bias: upload(t, b, rng, f32, e[p]).t, ReLU: kind == 0}
			} else {
				e[p] = randF32(rng, m*n)
				pr.Ep = GemmEpilogue{ReLUGradOf: upload(t, b, rng, f32, e[p]).t}
			}
			ps = append(ps, pr)
		}
		if err := b.Gemm3(tA, tB, false, m, n, k, ps...); err != nil {
			t.Fatal(err)
		}
		switch kind {
		case 0:
			flags |= host.GemmBias | host.GemmReLU
		case 1:
			flags |= host.GemmBias
		default:
			flags |= host.GemmDReLU
		}
		host.RefGemm3(a, bm, c, e, m, n, k, flags)
		for p := range np {
			expect(t, b, fmt.Sprintf("trial %d: gemm3 product %d of %d, %dx%dx%d flags %d", trial, p, np, m, n, k, flags), dc[p], c[p])
		}

		// A layer's gradients, with dX and the ReLU mask on some trials,
		// and the norm of the whole gradient after them on others.
		bsz, in, out := m, k, n
		withDX, withNorm := trial%4 != 3, trial%3 != 1
		x, dz, w, y, dx := randF32(rng, bsz*in), randF32(rng, bsz*out), randF32(rng, in*out), randF32(rng, bsz*in), randF32(rng, bsz*in)
		pre, post := rng.IntN(30), rng.IntN(30)
		flat := randF32(rng, pre+in*out+out+post)
		dflat := upload(t, b, rng, f32, flat)
		gw, err := b.Tensor(dflat.a, int64(4*(learnGuard+pre)), f32, in*out)
		if err != nil {
			t.Fatal(err)
		}
		gb, err := b.Tensor(dflat.a, int64(4*(learnGuard+pre+in*out)), f32, out)
		if err != nil {
			t.Fatal(err)
		}
		parts := []int{1, 5, 256}[trial%3]
		st := make([]uint64, NormStateWords(parts))
		for i := 1; i < len(st); i++ {
			st[i] = rng.Uint64()
		}
		dst := upload(t, b, rng, tensor.Uint64, st)
		ddx := upload(t, b, rng, f32, dx)
		args := GemmBackArgs{Batch: bsz, In: in, Out: out, X: upload(t, b, rng, f32, x).t, DZ: upload(t, b, rng, f32, dz).t,
			W: upload(t, b, rng, f32, w).t, GW: gw, GB: gb}
		var rdx, ry []float32
		if withDX {
			args.DX, rdx = ddx.t, dx
			if trial%2 == 0 {
				args.Y, ry = upload(t, b, rng, f32, y).t, y
			}
		}
		maxNorm := []float64{0.5, 1e30}[trial%2]
		if withNorm {
			args.G, args.N, args.Parts, args.NormState, args.MaxNorm = dflat.t, len(flat), parts, dst.t, maxNorm
		}
		if err := b.GemmBack(args); err != nil {
			t.Fatal(err)
		}
		host.RefGemmBack(x, dz, w, ry, flat[pre:pre+in*out], flat[pre+in*out:pre+in*out+out], rdx, bsz, in, out)
		what := fmt.Sprintf("trial %d: gemm back %dx%dx%d dx %v y %v", trial, bsz, in, out, withDX, ry != nil)
		expect(t, b, what+": gradients", dflat, flat)
		expect(t, b, what+": dX", ddx, dx)
		if withNorm {
			norm, scale := host.RefGradNorm(flat, parts, maxNorm)
			st[0], st[1] = 0, math.Float64bits(norm)
			st[2] = st[2]&^0xffffffff | uint64(math.Float32bits(scale))
			for i, v := range refPartials(flat, parts) {
				st[3+i] = math.Float64bits(v)
			}
		}
		expect(t, b, what+": norm state", dst, st)

		// A last layer and its TD loss in one launch (TDHead), twice on
		// the same descriptor: its count of finished blocks returns to 0.
		na := 1 + rng.IntN(5)
		double := trial%3 != 2
		xs := [3][]float32{randF32(rng, bsz*in), randF32(rng, bsz*in), randF32(rng, bsz*in)}
		wo, bo, wt, bt := randF32(rng, in*na), randF32(rng, na), randF32(rng, in*na), randF32(rng, na)
		act := make([]int64, bsz)
		rew, disc, wts, vb := randF32(rng, bsz), make([]float32, bsz), make([]float64, bsz), make([]uint8, bsz)
		for i := range bsz {
			act[i] = rng.Int64N(int64(na))
			disc[i] = []float32{0, 0.99}[rng.IntN(2)]
			wts[i] = rng.Float64() + 0.5
			vb[i] = uint8(rng.IntN(4))
		}
		ha := TDHeadArgs{Batch: bsz, In: in, NumActions: na, X: upload(t, b, rng, f32, xs[0]).t, XTarget: upload(t, b, rng, f32, xs[2]).t,
			W: upload(t, b, rng, f32, wo).t, Bias: upload(t, b, rng, f32, bo).t, WTarget: upload(t, b, rng, f32, wt).t,
			BiasTarget: upload(t, b, rng, f32, bt).t, PriorityEpsilon: 0.01}
		outs := make([]*devArr, 7)
		for i, n := range []int{bsz * na, bsz * na, bsz * na, bsz * na, bsz, bsz, bsz} {
			outs[i] = upload(t, b, rng, f32, randF32(rng, n))
		}
		ha.Q, ha.QNextTarget, ha.DQ, ha.TD, ha.Priorities, ha.RowLoss = outs[0].t, outs[2].t, outs[3].t, outs[4].t, outs[5].t, outs[6].t
		if double {
			ha.XNext, ha.QNextOnline = upload(t, b, rng, f32, xs[1]).t, outs[1].t
		}
		h, err := b.NewTDHead(ha)
		if err != nil {
			t.Fatal(err)
		}
		dact, drew, ddisc := upload(t, b, rng, tensor.Int64, act), upload(t, b, rng, f32, rew), upload(t, b, rng, f32, disc)
		dwts, dvb := upload(t, b, rng, tensor.Float64, wts), upload(t, b, rng, tensor.Uint8, vb)
		for range 2 {
			if err := h.Step(dact.t, drew.t, ddisc.t, dwts.t, dvb.t); err != nil {
				t.Fatal(err)
			}
		}
		q := [3][]float32{make([]float32, bsz*na), make([]float32, bsz*na), make([]float32, bsz*na)}
		for p, w := range [][2][]float32{{wo, bo}, {wo, bo}, {wt, bt}} {
			host.RefGemmEpilogue(xs[p], w[0], q[p], bsz, na, in, host.GemmBias, w[1], nil)
		}
		qno := q[1]
		if !double {
			qno = nil
		}
		dq, td, prio, rl := make([]float32, bsz*na), make([]float32, bsz), make([]float32, bsz), make([]float32, bsz)
		host.RefTDLoss(q[0], qno, q[2], act, rew, disc, wts, vb, bsz, na, 0.01, dq, td, prio, rl)
		for i, want := range [][]float32{q[0], q[1], q[2], dq, td, prio, rl} {
			if i == 1 && !double {
				continue
			}
			expect(t, b, fmt.Sprintf("trial %d: TD head output %d", trial, i), outs[i], want)
		}
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLearnerFusedOpsRefuseBadOperands: mixed epilogues, too many
// products, overlapping outputs and a norm state that overlaps the
// gradient are ErrBounds, and nothing is launched.
func TestLearnerFusedOpsRefuseBadOperands(t *testing.T) {
	b := newBackend(t)
	rng := rand.New(rand.NewPCG(1, 2))
	f32 := tensor.Float32
	x, w, c, bias := upload(t, b, rng, f32, randF32(rng, 16)), upload(t, b, rng, f32, randF32(rng, 16)), upload(t, b, rng, f32, randF32(rng, 16)), upload(t, b, rng, f32, randF32(rng, 4))
	c2 := upload(t, b, rng, f32, randF32(rng, 16))
	st := upload(t, b, rng, tensor.Uint64, make([]uint64, NormStateWords(2)))
	l0 := b.Launches()
	p := GemmProduct{A: x.t, B: w.t, C: c.t, Ep: GemmEpilogue{Bias: bias.t}}
	for i, err := range []error{
		b.Gemm3(false, false, false, 4, 4, 4),
		b.Gemm3(false, false, false, 4, 4, 4, p, p, p, p),
		b.Gemm3(false, false, false, 4, 4, 4, p, GemmProduct{A: x.t, B: w.t, C: c2.t}),
		b.Gemm3(false, false, false, 4, 4, 4, p, GemmProduct{A: x.t, B: w.t, C: c.t, Ep: p.Ep}),
		b.Gemm3(false, false, false, 4, 4, 4, GemmProduct{A: x.t, B: w.t, C: x.t}),
		b.GemmBack(GemmBackArgs{Batch: 4, In: 2, Out: 2, X: x.t, DZ: w.t, W: bias.t, GW: c.t, GB: c.t}),
		b.GemmBack(GemmBackArgs{Batch: 4, In: 2, Out: 2, X: x.t, DZ: w.t, GW: c.t, GB: bias.t, Y: c2.t}),
		b.GemmBack(GemmBackArgs{Batch: 4, In: 2, Out: 2, X: x.t, DZ: w.t, GW: c.t, GB: bias.t, G: st.t, N: 2, Parts: 2, NormState: st.t}),
		b.GemmBack(GemmBackArgs{Batch: 4, In: 2, Out: 2, X: x.t, DZ: w.t, GW: c.t, GB: bias.t, G: c.t, N: 4, Parts: 0, NormState: st.t}),
	} {
		if !errors.Is(err, ErrBounds) {
			t.Errorf("case %d: %v, want ErrBounds", i, err)
		}
	}
	if l := b.Launches() - l0; l != 0 {
		t.Errorf("%d launches", l)
	}
}
