package dqn

import (
	"encoding/gob"
	"fmt"
	"io"
	"math"
	"math/rand/v2"

	"github.com/trajring/trajring/internal/sgemm"
)

// mlp is the weights of a ReLU MLP as plain slices: layer l maps dims[l]
// inputs to dims[l+1] outputs, w[l] row-major [dims[l], dims[l+1]] and
// b[l] [dims[l+1]]. The target network is one, and so is the online
// network's forward pass outside the training graph.
type mlp struct {
	dims []int
	w, b [][]float32
}

// newMLP draws weights as PyTorch's nn.Linear does (uniform in
// ±1/sqrt(fan_in), biases too), from a PCG stream seeded with seed.
func newMLP(dims []int, seed uint64) *mlp {
	rng := rand.New(rand.NewPCG(seed, 0x646f6e))
	m := &mlp{dims: append([]int(nil), dims...)}
	for l := 0; l+1 < len(dims); l++ {
		bound := 1 / math.Sqrt(float64(dims[l]))
		w := make([]float32, dims[l]*dims[l+1])
		for i := range w {
			w[i] = float32((2*rng.Float64() - 1) * bound)
		}
		b := make([]float32, dims[l+1])
		for i := range b {
			b[i] = float32((2*rng.Float64() - 1) * bound)
		}
		m.w, m.b = append(m.w, w), append(m.b, b)
	}
	return m
}

// copyFrom copies o's weights into m (same dims).
func (m *mlp) copyFrom(o *mlp) {
	for l := range m.w {
		copy(m.w[l], o.w[l])
		copy(m.b[l], o.b[l])
	}
}

// forward computes the outputs of n inputs (row-major [n, dims[0]]) into
// out ([n, dims[last]]), with scratch for the hidden layers (grown as
// needed and returned).
func forward(dims []int, ws, bs [][]float32, in []float32, n int, out []float32, scratch [][]float32) [][]float32 {
	for len(scratch) < len(ws) {
		scratch = append(scratch, nil)
	}
	cur := in
	for l := range ws {
		k, m := dims[l], dims[l+1]
		dst := out
		if l+1 < len(ws) {
			if cap(scratch[l]) < n*m {
				scratch[l] = make([]float32, n*m)
			}
			dst = scratch[l][:n*m]
		}
		for r := range n {
			copy(dst[r*m:(r+1)*m], bs[l])
		}
		// The shapes are the network's own, so Gemm cannot fail.
		_ = sgemm.Gemm(false, false, n, m, k, 1, cur[:n*k], k, ws[l], m, 1, dst, m)
		if l+1 < len(ws) {
			relu(dst)
		}
		cur = dst
	}
	return scratch
}

// relu sets the negative values of xs to +0, without a branch per value:
// about half of a layer's values are negative in no predictable order,
// and mispredicted branches cost more than the arithmetic.
func relu(xs []float32) {
	for i, v := range xs {
		u := math.Float32bits(v)
		xs[i] = math.Float32frombits(u &^ uint32(int32(u)>>31))
	}
}

// savedNet is the file format of Save: gob of the layer sizes and
// weights.
type savedNet struct {
	Format  string
	Dims    []int
	Weights [][]float32
	Biases  [][]float32
}

const netFormat = "trajring-dqn-mlp/1"

func (m *mlp) save(w io.Writer) error {
	return gob.NewEncoder(w).Encode(savedNet{Format: netFormat, Dims: m.dims, Weights: m.w, Biases: m.b})
}

func loadMLP(r io.Reader) (*mlp, error) {
	var s savedNet
	if err := gob.NewDecoder(r).Decode(&s); err != nil {
		return nil, fmt.Errorf("%w: decoding a network: %w", ErrConfig, err)
	}
	if s.Format != netFormat || len(s.Dims) < 2 || len(s.Weights) != len(s.Dims)-1 || len(s.Biases) != len(s.Dims)-1 {
		return nil, fmt.Errorf("%w: not a %s network", ErrConfig, netFormat)
	}
	for l := range s.Weights {
		if len(s.Weights[l]) != s.Dims[l]*s.Dims[l+1] || len(s.Biases[l]) != s.Dims[l+1] {
			return nil, fmt.Errorf("%w: layer %d has the wrong size", ErrConfig, l)
		}
	}
	return &mlp{dims: s.Dims, w: s.Weights, b: s.Biases}, nil
}
