// Package npy writes arrays in NumPy's .npy format (version 1.0) and
// collects them into .npz archives, as numpy.save and numpy.savez do.
//
// The format: the magic "\x93NUMPY", version bytes 1 and 0, a
// little-endian uint16 header length, an ASCII Python dict literal with
// 'descr' (dtype), 'fortran_order' and 'shape', padded with spaces and a
// final newline so that the data starts at a multiple of 64 bytes, then
// the elements in C order. An .npz file is a zip archive of NAME.npy
// entries. codeberg.org/sbinet/npyio writes only one-dimensional slices
// and two-dimensional gonum matrices; trajring's fields have any rank, so
// this package writes the header itself.
package npy

import (
	"archive/zip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ErrFormat is returned for an array npy cannot describe: an unknown
// dtype, a negative dimension, or data whose length is not the shape's.
var ErrFormat = errors.New("npy: bad array")

// Kind is an element type npy can write.
type Kind int

// The element kinds, with their NumPy dtypes.
const (
	Bool    Kind = iota // |b1
	Uint8               // |u1
	Int32               // <i4 or >i4 (the machine's byte order)
	Int64               // <i8 or >i8
	Float32             // <f4 or >f4
	Float64             // <f8 or >f8
)

var kinds = [...]struct {
	code string
	size int
}{
	Bool: {"b1", 1}, Uint8: {"u1", 1}, Int32: {"i4", 4}, Int64: {"i8", 8}, Float32: {"f4", 4}, Float64: {"f8", 8},
}

// Size returns the size of one element in bytes (0 for an unknown kind).
func (k Kind) Size() int {
	if k < 0 || int(k) >= len(kinds) {
		return 0
	}
	return kinds[k].size
}

// Descr returns the NumPy dtype string of k for data in the machine's
// byte order ("<f4" on little-endian machines).
func (k Kind) Descr() string {
	if k.Size() == 0 {
		return ""
	}
	if kinds[k].size == 1 {
		return "|" + kinds[k].code
	}
	order := "<"
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		order = ">"
	}
	return order + kinds[k].code
}

// Header returns the .npy header of a C-order array of kind k and shape.
func Header(k Kind, shape []int) ([]byte, error) {
	if k.Size() == 0 {
		return nil, fmt.Errorf("%w: kind %d", ErrFormat, int(k))
	}
	var dims []string
	for _, d := range shape {
		if d < 0 {
			return nil, fmt.Errorf("%w: shape %v", ErrFormat, shape)
		}
		dims = append(dims, strconv.Itoa(d))
	}
	tuple := "(" + strings.Join(dims, ", ")
	if len(dims) == 1 {
		tuple += "," // a one-element Python tuple
	}
	tuple += ")"
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", k.Descr(), tuple)
	const prefix = 10 // magic, version, header length
	total := prefix + len(dict) + 1
	if pad := total % 64; pad != 0 {
		total += 64 - pad
	}
	if total-prefix > 0xffff {
		return nil, fmt.Errorf("%w: header of %d bytes (shape %v)", ErrFormat, total-prefix, shape)
	}
	h := make([]byte, 0, total)
	h = append(h, "\x93NUMPY\x01\x00"...)
	h = binary.LittleEndian.AppendUint16(h, uint16(total-prefix))
	h = append(h, dict...)
	for len(h) < total-1 {
		h = append(h, ' ')
	}
	return append(h, '\n'), nil
}

// Write writes one .npy array: the header of kind k and shape, then data,
// the elements' bytes in C order and the machine's byte order.
func Write(w io.Writer, k Kind, shape []int, data []byte) error {
	h, err := Header(k, shape)
	if err != nil {
		return err
	}
	n := int64(k.Size())
	for _, d := range shape {
		n *= int64(d)
	}
	if n != int64(len(data)) {
		return fmt.Errorf("%w: %d bytes of data for shape %v of %d-byte elements", ErrFormat, len(data), shape, k.Size())
	}
	if _, err := w.Write(h); err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}

// Archive writes an .npz file: a zip archive of .npy entries, stored
// uncompressed as numpy.savez does. It is not safe for concurrent use.
type Archive struct {
	z    *zip.Writer
	seen map[string]bool
}

// NewArchive returns an archive writing to w; Close finishes it.
func NewArchive(w io.Writer) *Archive {
	return &Archive{z: zip.NewWriter(w), seen: map[string]bool{}}
}

// Add writes the array name (numpy.load's key; the entry is name.npy).
// A name used twice is refused with ErrFormat.
func (a *Archive) Add(name string, k Kind, shape []int, data []byte) error {
	if name == "" || a.seen[name] {
		return fmt.Errorf("%w: array name %q empty or used twice", ErrFormat, name)
	}
	a.seen[name] = true
	w, err := a.z.CreateHeader(&zip.FileHeader{Name: name + ".npy", Method: zip.Store})
	if err != nil {
		return err
	}
	return Write(w, k, shape, data)
}

// Close writes the archive's central directory; it does not close the
// underlying writer.
func (a *Archive) Close() error { return a.z.Close() }
