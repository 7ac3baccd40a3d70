package npy

import (
	"bytes"
	"errors"
	"testing"
)

func TestHeader(t *testing.T) {
	for _, tc := range []struct {
		k     Kind
		shape []int
		dict  string
	}{
		{Float32, []int{3, 1, 4}, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 1, 4), }"},
		{Uint8, []int{5}, "{'descr': '|u1', 'fortran_order': False, 'shape': (5,), }"},
		{Bool, nil, "{'descr': '|b1', 'fortran_order': False, 'shape': (), }"},
		{Int64, []int{0, 2}, "{'descr': '<i8', 'fortran_order': False, 'shape': (0, 2), }"},
	} {
		h, err := Header(tc.k, tc.shape)
		if err != nil {
			t.Fatal(err)
		}
		if len(h)%64 != 0 || h[len(h)-1] != '\n' {
			t.Errorf("%v: header of %d bytes, want a multiple of 64 ending in a newline", tc.shape, len(h))
		}
		if string(h[:8]) != "\x93NUMPY\x01\x00" || int(h[8])|int(h[9])<<8 != len(h)-10 {
			t.Errorf("%v: prefix % x", tc.shape, h[:10])
		}
		if got := string(bytes.TrimRight(h[10:], " \n")); got != tc.dict {
			t.Errorf("%v: dict %q, want %q", tc.shape, got, tc.dict)
		}
	}
}

func TestRefused(t *testing.T) {
	var b bytes.Buffer
	for _, err := range []error{
		Write(&b, Kind(99), []int{1}, []byte{0}),
		Write(&b, Float32, []int{-1}, nil),
		Write(&b, Float32, []int{2}, make([]byte, 4)),
		Write(&b, Int32, []int{1 << 20, 1 << 20}, nil),
	} {
		if !errors.Is(err, ErrFormat) {
			t.Errorf("got %v, want ErrFormat", err)
		}
	}
	if b.Len() != 0 {
		t.Errorf("a refused array wrote %d bytes", b.Len())
	}
	a := NewArchive(&b)
	if err := a.Add("x", Uint8, []int{1}, []byte{7}); err != nil {
		t.Fatal(err)
	}
	if err := a.Add("x", Uint8, []int{1}, []byte{7}); !errors.Is(err, ErrFormat) {
		t.Errorf("a name used twice: %v, want ErrFormat", err)
	}
}
