package rawbytes

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// TestOf: the bytes are the elements' little-endian encodings, alias the
// slice, and an empty slice gives nil.
func TestOf(t *testing.T) {
	type step int32
	for _, tc := range []struct {
		name string
		got  []byte
		want any
	}{
		{"int32-based", Of([]step{1, -2}), []step{1, -2}},
		{"float32", Of([]float32{1.5, -0.25}), []float32{1.5, -0.25}},
		{"float64", Of([]float64{3, 1e300}), []float64{3, 1e300}},
		{"uint64", Of([]uint64{7, 1 << 63}), []uint64{7, 1 << 63}},
		{"int64", Of([]int64{-1}), []int64{-1}},
	} {
		var w bytes.Buffer
		if err := binary.Write(&w, binary.LittleEndian, tc.want); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(tc.got, w.Bytes()) {
			t.Errorf("%s: % x, want % x", tc.name, tc.got, w.Bytes())
		}
	}
	s := []uint16{0, 0}
	Of(s)[2] = 0xff
	if s[1] != 0xff {
		t.Errorf("the bytes do not alias the slice: %v", s)
	}
	if Of([]float32(nil)) != nil || Of([]float32{}) != nil {
		t.Error("an empty slice does not give nil")
	}
}
