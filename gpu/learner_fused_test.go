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

// TestLearnerFusedOpsMatchReference: Gemm3 and GemmBack on the stand-in
// write the reference loops' bytes (kernels/host.RefGemm3, RefGemmBack,
// RefGradNorm) between untouched guards, on every grid.
func TestLearnerFusedOpsMatchReference(t *testing.T) { forGrids(t, testLearnerFusedOpsMatchReference) }

func testLearnerFusedOpsMatchReference(t *testing.T, b *Backend) {
	sizes := []int{1, 2, 15, 17, 33, 64}
	f32 := tensor.Float32
	for trial := range 12 {
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
