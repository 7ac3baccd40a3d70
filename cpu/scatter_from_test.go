package cpu_test

import (
	"bytes"
	"errors"
	"runtime"
	"testing"
	"unsafe"

	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/kernels"
	"gorgonia.org/tensor"
)

// noHost is a tensor engine whose memory gorgonia.org/tensor sees as not
// host-accessible, as the gpu backend's device tensors are.
type noHost struct{ tensor.StdEng }

func (noHost) AllocAccessible() bool { return false }

// TestScatterFromHostTensors: ScatterFrom with tensor sources (the cpu
// backend's own memory is host memory) writes what Scatter writes from
// the same bytes, packed columns and mixed sources included; sources it
// cannot read are refused and nothing is written.
func TestScatterFromHostTensors(t *testing.T) {
	be := cpu.New()
	const steps, n = 10, 3
	idx := []int64{7, 2, 9}
	mk := func() (*cpu.Arena, []kernels.Column) {
		r := ring(t, be, steps, 16)
		return r, []kernels.Column{{Ring: r, StepBytes: 12, Stride: 16}, {Ring: r, StepBytes: 4, Stride: 16, Offset: 12}}
	}
	a := []byte("abcdefghijklmnopqrstuvwxyz0123456789")[:n*12]
	b := []byte("ABCDEFGHIJKL")
	ta := tensor.New(tensor.WithShape(n*12), tensor.WithBacking(bytes.Clone(a)))
	tb := tensor.New(tensor.WithShape(n*4), tensor.WithBacking(bytes.Clone(b)))
	wantRing, wantCols := mk()
	if err := be.Scatter(wantCols, [][]byte{a, b}, idx); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		src  [][]byte
		dev  []*tensor.Dense
	}{
		{"both tensors", [][]byte{nil, nil}, []*tensor.Dense{ta, tb}},
		{"tensor and bytes", [][]byte{nil, b}, []*tensor.Dense{ta, nil}},
		{"bytes only", [][]byte{a, b}, []*tensor.Dense{nil, nil}},
	} {
		r, cols := mk()
		if err := be.ScatterFrom(cols, tc.src, tc.dev, idx); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !bytes.Equal(r.Bytes(), wantRing.Bytes()) {
			t.Fatalf("%s: ring %q, want %q", tc.name, r.Bytes(), wantRing.Bytes())
		}
	}
	mem := make([]byte, n*12)
	device := tensor.New(tensor.Of(tensor.Uint8), tensor.WithShape(n*12), tensor.WithEngine(noHost{}), tensor.FromMemory(uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem))))
	if device.IsNativelyAccessible() {
		t.Fatal("the test engine's tensor is host-accessible")
	}
	short := tensor.New(tensor.WithShape(n*12-1), tensor.WithBacking(make([]byte, n*12-1)))
	for _, tc := range []struct {
		name string
		src  [][]byte
		dev  []*tensor.Dense
		want error
	}{
		{"a device tensor", [][]byte{nil, b}, []*tensor.Dense{device, nil}, cpu.ErrArena},
		{"too few bytes", [][]byte{nil, b}, []*tensor.Dense{short, nil}, cpu.ErrBounds},
		{"bytes and a tensor for one column", [][]byte{a, b}, []*tensor.Dense{ta, nil}, cpu.ErrBounds},
		{"no tensor list", [][]byte{a, b}, nil, cpu.ErrBounds},
	} {
		r, cols := mk()
		before := bytes.Clone(r.Bytes())
		if err := be.ScatterFrom(cols, tc.src, tc.dev, idx); !errors.Is(err, tc.want) {
			t.Fatalf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if !bytes.Equal(r.Bytes(), before) {
			t.Fatalf("%s: a refused ScatterFrom wrote the ring", tc.name)
		}
	}
	for _, tc := range []struct {
		name string
		d    *tensor.Dense
		n    int64
		want error
	}{
		{"host tensor", ta, n * 12, nil},
		{"device tensor", device, n * 12, cpu.ErrArena},
		{"nil", nil, 1, cpu.ErrArena},
		{"more bytes than it has", ta, n*12 + 1, cpu.ErrBounds},
	} {
		if err := be.CheckSource(tc.d, tc.n); !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
			t.Errorf("CheckSource(%s): %v, want %v", tc.name, err, tc.want)
		}
	}
	runtime.KeepAlive(mem)
}
