package ckptio

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzRead corrupts a small stream (two byte changes and a cut, on the
// plain or the compressed form) and reads it every way a checkpoint is
// read: nothing may panic, a read that succeeds must give exactly what
// was written, and every failure must be ErrCorrupt (the stream is in
// memory, so no failure is the reader's own). Length must agree: a
// stream it measures as whole and a successful read cover the same
// bytes.
func FuzzRead(f *testing.F) {
	ts := newTestStream()
	data := [2][]byte{ts.write(f, false), ts.write(f, true)}
	f.Add(false, uint32(0), byte(0), uint32(0), byte(0), uint32(0))
	f.Add(true, uint32(30), byte(1), uint32(0), byte(0), uint32(0))
	f.Add(false, uint32(100), byte(0x80), uint32(101), byte(0x80), uint32(400))
	f.Add(true, uint32(21), byte(4), uint32(44), byte(2), uint32(0))
	f.Add(false, uint32(9), byte(0xff), uint32(77), byte(0x10), uint32(0))
	f.Fuzz(func(t *testing.T, compress bool, p1 uint32, x1 byte, p2 uint32, x2 byte, cut uint32) {
		k := 0
		if compress {
			k = 1
		}
		in := bytes.Clone(data[k])
		in[int(p1)%len(in)] ^= x1
		in[int(p2)%len(in)] ^= x2
		if cut != 0 {
			in = in[:int(cut)%len(in)]
		}
		n, lerr := Length(bytes.NewReader(in), int64(len(in)))
		if lerr != nil && !errors.Is(lerr, ErrCorrupt) {
			t.Fatalf("Length: %v, not ErrCorrupt", lerr)
		}
		for _, inPlace := range []bool{false, true} {
			got, err := ts.read(in, inPlace)
			switch {
			case err != nil && !errors.Is(err, ErrCorrupt):
				t.Fatalf("in place %v: %v, not ErrCorrupt", inPlace, err)
			case err == nil && !ts.equal(got):
				t.Fatalf("in place %v: read without error but differs", inPlace)
			case err == nil && (lerr != nil || n != int64(len(in))):
				t.Fatalf("in place %v: read whole, Length %d, %v of %d bytes", inPlace, n, lerr, len(in))
			}
		}
	})
}
