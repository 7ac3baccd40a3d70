package dqn

import (
	"bytes"
	"encoding/gob"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
)

// savedBytes returns the network file of an untrained network of the
// given hidden layers (4 inputs, 2 actions).
func savedBytes(t *testing.T, hidden ...int) []byte {
	t.Helper()
	c := DefaultConfig()
	c.ObsDim, c.NumActions, c.Hidden, c.Seed = 4, 2, hidden, 3
	a, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := a.Save(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// legacyBytes returns s as the files written before the versioned header
// were: the savedNet gob alone.
func legacyBytes(t *testing.T, s savedNet) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(s); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestNetworkFileRoundTrip: a saved network starts with the versioned
// header and reads back as the same network; a headerless file of the
// earlier format still loads.
func TestNetworkFileRoundTrip(t *testing.T) {
	data := savedBytes(t, 8, 8)
	if !bytes.HasPrefix(data, []byte(netMagic)) {
		t.Fatalf("a saved network starts %q, want the magic %q", data[:8], netMagic)
	}
	n, err := ReadNetwork(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(n.Dims(), []int{4, 8, 8, 2}) {
		t.Fatalf("dims %v", n.Dims())
	}
	var again bytes.Buffer
	if err := n.Save(&again); err != nil || !bytes.Equal(again.Bytes(), data) {
		t.Fatalf("saved again: %v, equal %v", err, bytes.Equal(again.Bytes(), data))
	}
	old := legacyBytes(t, savedNet{Format: netFormat, Dims: n.m.dims, Weights: n.m.w, Biases: n.m.b})
	m, err := ReadNetwork(bytes.NewReader(old))
	if err != nil {
		t.Fatalf("a headerless network file: %v", err)
	}
	for l := range m.m.w {
		if !slices.Equal(m.m.w[l], n.m.w[l]) || !slices.Equal(m.m.b[l], n.m.b[l]) {
			t.Fatalf("layer %d of the headerless file differs", l)
		}
	}
	if _, _, err := LoadNetwork(bytes.NewReader(old)); err != nil {
		t.Fatalf("LoadNetwork of a headerless file: %v", err)
	}
}

// TestNetworkFileBitFlips: every single-bit flip of a small saved
// network (header, CRC and length included), and a sample of those of a
// larger one, is refused; before the header about a third of them
// loaded as a different network. A truncated file and one with a byte
// appended are refused too.
func TestNetworkFileBitFlips(t *testing.T) {
	for _, tc := range []struct {
		hidden []int
		stride int // flip every stride-th bit
	}{{[]int{4}, 1}, {[]int{64, 64}, 97}} {
		data := savedBytes(t, tc.hidden...)
		flips := 0
		for bit := 0; bit < 8*len(data); bit += tc.stride {
			d := slices.Clone(data)
			d[bit/8] ^= 1 << (bit % 8)
			if _, err := ReadNetwork(bytes.NewReader(d)); err == nil {
				t.Fatalf("hidden %v: the flip of bit %d (byte %d of %d) loads", tc.hidden, bit, bit/8, len(data))
			} else if !errors.Is(err, ErrConfig) {
				t.Fatalf("hidden %v: bit %d: %v, want ErrConfig", tc.hidden, bit, err)
			}
			flips++
		}
		for _, d := range [][]byte{data[:len(data)-1], data[:netHeaderSize], data[:3], append(slices.Clone(data), 0)} {
			if _, err := ReadNetwork(bytes.NewReader(d)); !errors.Is(err, ErrConfig) {
				t.Fatalf("hidden %v: a file of %d bytes (saved: %d): %v, want ErrConfig", tc.hidden, len(d), len(data), err)
			}
		}
		t.Logf("hidden %v: %d bytes, %d flips refused", tc.hidden, len(data), flips)
	}
	// A payload flip is reported as corruption.
	data := savedBytes(t, 4)
	data[len(data)-5] ^= 0x10
	if _, err := ReadNetwork(bytes.NewReader(data)); !errors.Is(err, tensorbuf.ErrCorrupt) {
		t.Fatalf("a flipped payload bit: %v, want tensorbuf.ErrCorrupt", err)
	}
}

// TestNetworkFileNonFinite: a network holding NaN or an infinity, in a
// weight or a bias, with the header or headerless, is refused with
// ErrNonFinite.
func TestNetworkFileNonFinite(t *testing.T) {
	for _, v := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		for _, bias := range []bool{false, true} {
			n, err := ReadNetwork(bytes.NewReader(savedBytes(t, 4)))
			if err != nil {
				t.Fatal(err)
			}
			if bias {
				n.m.b[1][1] = v
			} else {
				n.m.w[0][5] = v
			}
			var b bytes.Buffer
			if err := n.Save(&b); err != nil {
				t.Fatal(err)
			}
			legacy := legacyBytes(t, savedNet{Format: netFormat, Dims: n.m.dims, Weights: n.m.w, Biases: n.m.b})
			for _, d := range [][]byte{b.Bytes(), legacy} {
				if _, err := ReadNetwork(bytes.NewReader(d)); !errors.Is(err, ErrNonFinite) || !errors.Is(err, ErrConfig) {
					t.Errorf("value %v (bias %v): %v, want ErrNonFinite and ErrConfig", v, bias, err)
				}
				if _, _, err := LoadNetwork(bytes.NewReader(d)); !errors.Is(err, ErrNonFinite) {
					t.Errorf("LoadNetwork, value %v (bias %v): %v, want ErrNonFinite", v, bias, err)
				}
			}
		}
	}
}

// TestNetworkFileShapes: ReadNetwork refuses layer sizes below 1 (a
// hidden layer of 0 units, negative sizes whose products look right,
// math.MinInt64, whose product with 2 wraps to 0), sizes whose products
// overflow to a slice's length, and lengths that differ from the
// products, in either format; before, [4 0 2] loaded and played.
func TestNetworkFileShapes(t *testing.T) {
	f32 := func(n int) []float32 { return make([]float32, n) }
	for _, tc := range []struct {
		name string
		s    savedNet
	}{
		{"a hidden layer of 0 units", savedNet{Dims: []int{4, 0, 2}, Weights: [][]float32{f32(0), f32(0)}, Biases: [][]float32{f32(0), f32(2)}}},
		{"MinInt64 inputs", savedNet{Dims: []int{math.MinInt64, 2}, Weights: [][]float32{f32(0)}, Biases: [][]float32{f32(2)}}},
		{"negative sizes", savedNet{Dims: []int{-1, -1}, Weights: [][]float32{f32(1)}, Biases: [][]float32{f32(0)}}},
		{"a product that overflows to 0", savedNet{Dims: []int{1 << 32, 1 << 32}, Weights: [][]float32{f32(0)}, Biases: [][]float32{f32(0)}}},
		{"a product that overflows to 1", savedNet{Dims: []int{3, -6148914691236517205}, Weights: [][]float32{f32(1)}, Biases: [][]float32{f32(0)}}},
		{"weights too short", savedNet{Dims: []int{4, 2}, Weights: [][]float32{f32(7)}, Biases: [][]float32{f32(2)}}},
		{"biases too long", savedNet{Dims: []int{4, 2}, Weights: [][]float32{f32(8)}, Biases: [][]float32{f32(3)}}},
		{"one layer", savedNet{Dims: []int{4}}},
		{"a layer missing", savedNet{Dims: []int{4, 2, 2}, Weights: [][]float32{f32(8)}, Biases: [][]float32{f32(2)}}},
	} {
		tc.s.Format = netFormat
		var b bytes.Buffer
		(&mlp{dims: tc.s.Dims, w: tc.s.Weights, b: tc.s.Biases}).save(&b)
		for _, d := range [][]byte{b.Bytes(), legacyBytes(t, tc.s)} {
			if n, err := ReadNetwork(bytes.NewReader(d)); !errors.Is(err, ErrConfig) {
				t.Errorf("%s: ReadNetwork = %v, %v; want ErrConfig", tc.name, n, err)
			}
		}
	}
	// The smallest real network loads.
	s := savedNet{Format: netFormat, Dims: []int{1, 1}, Weights: [][]float32{f32(1)}, Biases: [][]float32{f32(1)}}
	if _, err := ReadNetwork(bytes.NewReader(legacyBytes(t, s))); err != nil {
		t.Fatalf("a 1-1 network: %v", err)
	}
}
