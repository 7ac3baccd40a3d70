// Package nnops is fused float32 ops for gorgonia graphs: a layer's bias
// and ReLU in one op (BiasReLU, BiasAdd), with symbolic gradients, in
// place of gorgonia's BroadcastAdd and Rectify. Those build a repeated
// bias, a sum, a comparison mask and a product per layer, each a pass
// over the batch and a new tensor every run, and their gradients as
// many again; here a layer is one pass forward and two backward, each
// writing into memory the op keeps from run to run.
//
// The ops are for graphs run by one machine at a time: an op's output
// tensor is reused by its next run (so a value read from a node is good
// until the graph runs again), and an op is not safe for concurrent use.
package nnops

import (
	"errors"
	"fmt"
	"hash"
	"hash/fnv"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// ErrInput reports a node or value of the wrong shape or type.
var ErrInput = errors.New("nnops: bad input")

// BiasReLU returns max(z + b, 0), b added to every row: z is a float32
// matrix [n, m] and b [1, m] (else ErrInput, and the graph is unchanged).
// Like gorgonia's own constructors, it is not safe for concurrent use on
// one graph.
func BiasReLU(z, b *gorgonia.Node) (*gorgonia.Node, error) { return bias(z, b, true) }

// BiasAdd returns z + b, b added to every row: z is a float32 matrix
// [n, m] and b [1, m] (else ErrInput, and the graph is unchanged). Like
// gorgonia's own constructors, it is not safe for concurrent use on one
// graph.
func BiasAdd(z, b *gorgonia.Node) (*gorgonia.Node, error) { return bias(z, b, false) }

func bias(z, b *gorgonia.Node, relu bool) (*gorgonia.Node, error) {
	zs, bs := z.Shape(), b.Shape()
	if z.Dtype() != tensor.Float32 || b.Dtype() != tensor.Float32 || len(zs) != 2 || len(bs) != 2 || bs[0] != 1 ||
		bs[1] != zs[1] {
		return nil, fmt.Errorf("%w: bias of %v %v for %v %v (want float32 [n, m] and [1, m])", ErrInput, b.Dtype(), bs,
			z.Dtype(), zs)
	}
	return gorgonia.ApplyOp(&biasOp{relu: relu}, z, b)
}

// matrix is the type of every op here: float32 matrices.
var matrix = gorgonia.TensorType{Dims: 2, Of: hm.TypeVariable('a')}

// base holds what the ops share: an output tensor kept between runs.
type base struct{ out *tensor.Dense }

// output returns the op's output tensor of shape [rows, cols], made the
// first time and when the shape changes.
func (o *base) output(rows, cols int) *tensor.Dense {
	if o.out == nil || !o.out.Shape().Eq(tensor.Shape{rows, cols}) {
		o.out = tensor.New(tensor.WithShape(rows, cols), tensor.Of(tensor.Float32))
	}
	return o.out
}

func (o *base) ReturnsPtr() bool     { return false }
func (o *base) CallsExtern() bool    { return false }
func (o *base) OverwritesInput() int { return -1 }

// float32s returns the values' backing slices with their shapes, or
// ErrInput unless each is a float32 matrix.
func float32s(vs []gorgonia.Value, n int) ([][]float32, []tensor.Shape, error) {
	if len(vs) != n {
		return nil, nil, fmt.Errorf("%w: %d inputs, want %d", ErrInput, len(vs), n)
	}
	xs, ss := make([][]float32, n), make([]tensor.Shape, n)
	for i, v := range vs {
		d, ok := v.(*tensor.Dense)
		if !ok || d.Dtype() != tensor.Float32 || d.Dims() != 2 {
			return nil, nil, fmt.Errorf("%w: input %d is %T %v, want a float32 matrix", ErrInput, i, v, v.Dtype())
		}
		xs[i], ss[i] = d.Float32s(), d.Shape()
	}
	return xs, ss, nil
}

func hashOf(o gorgonia.Op) uint32 {
	h := fnv.New32a()
	o.WriteHash(h)
	return h.Sum32()
}

// biasOp is z + b (rows) and, if relu, max(·, 0).
type biasOp struct {
	base
	relu bool
}

func (o *biasOp) Arity() int                                               { return 2 }
func (o *biasOp) Type() hm.Type                                            { return hm.NewFnType(matrix, matrix, matrix) }
func (o *biasOp) InferShape(in ...gorgonia.DimSizer) (tensor.Shape, error) { return firstShape(in) }
func (o *biasOp) DiffWRT(int) []bool                                       { return []bool{true, true} }
func (o *biasOp) WriteHash(h hash.Hash)                                    { fmt.Fprintf(h, "nnops.bias relu=%v", o.relu) }
func (o *biasOp) Hashcode() uint32                                         { return hashOf(o) }
func (o *biasOp) String() string {
	if o.relu {
		return "BiasReLU"
	}
	return "BiasAdd"
}

func firstShape(in []gorgonia.DimSizer) (tensor.Shape, error) {
	if len(in) == 0 {
		return nil, fmt.Errorf("%w: no inputs", ErrInput)
	}
	s, ok := in[0].(tensor.Shape)
	if !ok {
		return nil, fmt.Errorf("%w: input shape %v", ErrInput, in[0])
	}
	return s.Clone(), nil
}

// Do computes the op into its output tensor.
func (o *biasOp) Do(vs ...gorgonia.Value) (gorgonia.Value, error) {
	xs, ss, err := float32s(vs, 2)
	if err != nil {
		return nil, err
	}
	n, m := ss[0][0], ss[0][1]
	if ss[1][0] != 1 || ss[1][1] != m {
		return nil, fmt.Errorf("%w: bias %v for %v", ErrInput, ss[1], ss[0])
	}
	out := o.output(n, m)
	z, b, y := xs[0][:n*m], xs[1][:m], out.Float32s()[:n*m]
	for i := 0; i < n*m; i += m {
		zr, yr := z[i:i+m], y[i:i+m]
		for j, bj := range b {
			yr[j] = zr[j] + bj
		}
		if o.relu {
			relu(yr)
		}
	}
	return out, nil
}

// SymDiff returns the gradients of z (the output's gradient where the
// output is positive, for ReLU) and of b (their sum over the rows).
func (o *biasOp) SymDiff(inputs gorgonia.Nodes, output, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	dz := grad
	if o.relu {
		var err error
		if dz, err = gorgonia.ApplyOp(&reluGradOp{}, output, grad); err != nil {
			return nil, err
		}
	}
	db, err := gorgonia.ApplyOp(&rowSumOp{}, dz)
	if err != nil {
		return nil, err
	}
	return gorgonia.Nodes{dz, db}, nil
}

// relu sets the negative values of xs to +0, without a branch per value
// (half of a layer's values are negative, in no order a branch
// predictor can follow).
func relu(xs []float32) {
	for i, v := range xs {
		u := math32bits(v)
		xs[i] = math32frombits(u &^ uint32(int32(u)>>31))
	}
}

// reluGradOp is dy where y > 0, else 0: the gradient through a ReLU
// from its output y.
type reluGradOp struct{ base }

func (o *reluGradOp) Arity() int                                               { return 2 }
func (o *reluGradOp) Type() hm.Type                                            { return hm.NewFnType(matrix, matrix, matrix) }
func (o *reluGradOp) InferShape(in ...gorgonia.DimSizer) (tensor.Shape, error) { return firstShape(in) }
func (o *reluGradOp) DiffWRT(int) []bool                                       { return []bool{false, false} }
func (o *reluGradOp) WriteHash(h hash.Hash)                                    { fmt.Fprint(h, "nnops.reluGrad") }
func (o *reluGradOp) Hashcode() uint32                                         { return hashOf(o) }
func (o *reluGradOp) String() string                                           { return "ReLUGrad" }

// SymDiff reports that the op has no gradient (it is itself one).
func (o *reluGradOp) SymDiff(gorgonia.Nodes, *gorgonia.Node, *gorgonia.Node) (gorgonia.Nodes, error) {
	return nil, fmt.Errorf("%w: ReLUGrad is not differentiable", ErrInput)
}

// Do computes the op into its output tensor.
func (o *reluGradOp) Do(vs ...gorgonia.Value) (gorgonia.Value, error) {
	xs, ss, err := float32s(vs, 2)
	if err != nil {
		return nil, err
	}
	if !ss[0].Eq(ss[1]) {
		return nil, fmt.Errorf("%w: output %v, gradient %v", ErrInput, ss[0], ss[1])
	}
	out := o.output(ss[0][0], ss[0][1])
	y, dy, dz := xs[0], xs[1][:len(xs[0])], out.Float32s()[:len(xs[0])]
	for i, v := range y {
		// keep is all ones where v > 0 (bits 1 to those of +Inf), else
		// zero (+0, negatives, NaNs), without a branch.
		b := int64(math32bits(v))
		keep := ^uint32(((0x7f800000 - b) | (b - 1)) >> 63)
		dz[i] = math32frombits(math32bits(dy[i]) & keep)
	}
	return out, nil
}

// rowSumOp sums a matrix [n, m] over its rows into [1, m], the rows in
// order.
type rowSumOp struct{ base }

func (o *rowSumOp) Arity() int    { return 1 }
func (o *rowSumOp) Type() hm.Type { return hm.NewFnType(matrix, matrix) }
func (o *rowSumOp) InferShape(in ...gorgonia.DimSizer) (tensor.Shape, error) {
	s, err := firstShape(in)
	if err != nil {
		return nil, err
	}
	if len(s) != 2 {
		return nil, fmt.Errorf("%w: row sum of %v", ErrInput, s)
	}
	return tensor.Shape{1, s[1]}, nil
}
func (o *rowSumOp) DiffWRT(int) []bool    { return []bool{false} }
func (o *rowSumOp) WriteHash(h hash.Hash) { fmt.Fprint(h, "nnops.rowSum") }
func (o *rowSumOp) Hashcode() uint32      { return hashOf(o) }
func (o *rowSumOp) String() string        { return "RowSum" }

// SymDiff reports that the op has no gradient (it is only used in
// gradients here).
func (o *rowSumOp) SymDiff(gorgonia.Nodes, *gorgonia.Node, *gorgonia.Node) (gorgonia.Nodes, error) {
	return nil, fmt.Errorf("%w: RowSum is not differentiable", ErrInput)
}

// Do computes the op into its output tensor.
func (o *rowSumOp) Do(vs ...gorgonia.Value) (gorgonia.Value, error) {
	xs, ss, err := float32s(vs, 1)
	if err != nil {
		return nil, err
	}
	n, m := ss[0][0], ss[0][1]
	out := o.output(1, m)
	s, x := out.Float32s()[:m], xs[0][:n*m]
	copy(s, x[:m])
	for i := m; i < n*m; i += m {
		r := x[i : i+m]
		for j, v := range r {
			s[j] += v
		}
	}
	return out, nil
}
