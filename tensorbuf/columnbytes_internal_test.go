package tensorbuf

import (
	"bytes"
	"testing"

	"gorgonia.org/tensor"
)

// TestColumnBytesIsHostBytes: Writer.add's columnBytes returns exactly
// what hostBytes returns, bytes or error text, for good tensors and for
// every kind of bad one: wrong dtype, rank, extent or row count, a
// non-contiguous view, and a device-like tensor is refused by both.
func TestColumnBytesIsHostBytes(t *testing.T) {
	f := Field{Name: "obs", Role: Observation, DType: Float32, Shape: []int{2, 3}}
	col := column{Field: f, stepBytes: int64(f.StepBytes())}
	wide := tensor.New(tensor.WithShape(2, 2, 6), tensor.Of(tensor.Float32))
	view, err := wide.Slice(nil, nil, tensor.S(0, 3))
	if err != nil {
		t.Fatal(err)
	}
	good := tensor.New(tensor.WithShape(2, 2, 3), tensor.WithBacking([]float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}))
	for _, tc := range []struct {
		name   string
		d      *tensor.Dense
		n      int
		wantOK bool
	}{
		{"good", good, 2, true},
		{"rows", good, 3, false},
		{"dtype", tensor.New(tensor.WithShape(2, 2, 3), tensor.Of(tensor.Float64)), 2, false},
		{"rank", tensor.New(tensor.WithShape(2, 6), tensor.Of(tensor.Float32)), 2, false},
		{"extent", tensor.New(tensor.WithShape(2, 3, 2), tensor.Of(tensor.Float32)), 2, false},
		{"view", view.(*tensor.Dense), 2, false},
	} {
		gotB, gotErr := columnBytes(tc.d, &col, tc.n)
		wantB, wantErr := hostBytes(tc.d, f, tc.n)
		if (gotErr == nil) != tc.wantOK || (wantErr == nil) != tc.wantOK {
			t.Fatalf("%s: columnBytes err %v, hostBytes err %v, want ok %v", tc.name, gotErr, wantErr, tc.wantOK)
		}
		if gotErr != nil && gotErr.Error() != wantErr.Error() {
			t.Errorf("%s: columnBytes %q, hostBytes %q", tc.name, gotErr, wantErr)
		}
		if !bytes.Equal(gotB, wantB) || len(gotB) != len(wantB) {
			t.Errorf("%s: columnBytes %d bytes, hostBytes %d", tc.name, len(gotB), len(wantB))
		}
	}
}
