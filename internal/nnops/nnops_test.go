package nnops

import (
	"errors"
	"math"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// graph is z [2, 3] and b [1, 3] as inputs of a new graph.
func graph(t *testing.T, z, b []float32) (*gorgonia.ExprGraph, *gorgonia.Node, *gorgonia.Node) {
	t.Helper()
	g := gorgonia.NewGraph()
	zn := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(2, 3), gorgonia.WithName("z"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(2, 3), tensor.WithBacking(z))))
	bn := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(1, 3), gorgonia.WithName("b"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(1, 3), tensor.WithBacking(b))))
	return g, zn, bn
}

// TestBiasForwardAndGradients: the output and the gradients of
// sum(out * c) (c a fixed weight per element, so each element's gradient
// differs) with respect to z and b, exactly, for BiasReLU and BiasAdd,
// run twice to check that reused outputs are rewritten.
func TestBiasForwardAndGradients(t *testing.T) {
	z := []float32{1, -2, 0.5, -0.25, 3, -1}
	b := []float32{0.5, 1, -0.5}
	c := []float32{1, 2, 3, 4, 5, 6}
	for _, tc := range []struct {
		name    string
		op      func(z, b *gorgonia.Node) (*gorgonia.Node, error)
		out, dz []float32
		db      []float32
	}{
		// z+b = 1.5 -1 0 | 0.25 4 -1.5
		{"BiasReLU", BiasReLU, []float32{1.5, 0, 0, 0.25, 4, 0}, []float32{1, 0, 0, 4, 5, 0}, []float32{5, 5, 0}},
		{"BiasAdd", BiasAdd, []float32{1.5, -1, 0, 0.25, 4, -1.5}, []float32{1, 2, 3, 4, 5, 6}, []float32{5, 7, 9}},
	} {
		g, zn, bn := graph(t, append([]float32(nil), z...), append([]float32(nil), b...))
		y, err := tc.op(zn, bn)
		if err != nil {
			t.Fatal(err)
		}
		cn := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(2, 3), gorgonia.WithName("c"),
			gorgonia.WithValue(tensor.New(tensor.WithShape(2, 3), tensor.WithBacking(c))))
		loss := gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(y, cn))))
		var yv gorgonia.Value
		gorgonia.Read(y, &yv)
		if _, err := gorgonia.Grad(loss, zn, bn); err != nil {
			t.Fatal(err)
		}
		vm := gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(zn, bn))
		for run := range 2 {
			vm.Reset()
			if err := vm.RunAll(); err != nil {
				t.Fatal(err)
			}
			dz, _ := zn.Grad()
			db, _ := bn.Grad()
			for _, chk := range []struct {
				what      string
				got, want []float32
			}{{"out", yv.Data().([]float32), tc.out}, {"dz", dz.Data().([]float32), tc.dz},
				{"db", db.Data().([]float32), tc.db}} {
				for i := range chk.want {
					if chk.got[i] != chk.want[i] {
						t.Fatalf("%s run %d: %s = %v, want %v", tc.name, run, chk.what, chk.got, chk.want)
					}
				}
			}
			// gorgonia adds each run's gradients to the bound ones, which
			// a solver zeroes after its step.
			clear(dz.Data().([]float32))
			clear(db.Data().([]float32))
		}
		vm.Close()
	}
}

// TestReLUGradBits: the gradient passes where the output is positive
// (subnormals and +Inf included) and is 0 at +0, -0, negatives and NaN.
func TestReLUGradBits(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	y := []float32{0, float32(math.Copysign(0, -1)), 1e-45, 2, inf, nan, -3, float32(-math.NaN())}
	want := []float32{0, 0, 7, 7, 7, 0, 0, 0}
	dy := make([]float32, len(y))
	for i := range dy {
		dy[i] = 7
	}
	out, err := (&reluGradOp{}).Do(tensor.New(tensor.WithShape(2, 4), tensor.WithBacking(y)),
		tensor.New(tensor.WithShape(2, 4), tensor.WithBacking(dy)))
	if err != nil {
		t.Fatal(err)
	}
	got := out.Data().([]float32)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("y %v: gradient %v, want %v", y, got, want)
		}
	}
}

// TestRejects: shapes and types that do not fit return ErrInput.
func TestRejects(t *testing.T) {
	g := gorgonia.NewGraph()
	z := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(2, 3), gorgonia.WithName("z"))
	for _, tc := range []struct {
		name string
		b    *gorgonia.Node
	}{
		{"bias of the wrong width", gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(1, 2), gorgonia.WithName("b1"))},
		{"bias of two rows", gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(2, 3), gorgonia.WithName("b2"))},
		{"float64 bias", gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(1, 3), gorgonia.WithName("b3"))},
		{"vector bias", gorgonia.NewVector(g, tensor.Float32, gorgonia.WithShape(3), gorgonia.WithName("b4"))},
	} {
		if _, err := BiasReLU(z, tc.b); !errors.Is(err, ErrInput) {
			t.Errorf("%s: err %v, want ErrInput", tc.name, err)
		}
	}
	if _, err := (&rowSumOp{}).Do(tensor.New(tensor.WithShape(2, 3), tensor.Of(tensor.Float64))); !errors.Is(err, ErrInput) {
		t.Errorf("float64 row sum: err %v, want ErrInput", err)
	}
	if _, err := (&biasOp{}).Do(tensor.New(tensor.WithShape(2, 3), tensor.Of(tensor.Float32)),
		tensor.New(tensor.WithShape(1, 2), tensor.Of(tensor.Float32))); !errors.Is(err, ErrInput) {
		t.Errorf("bias value of the wrong width: err %v, want ErrInput", err)
	}
}
