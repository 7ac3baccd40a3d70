// Package rawbytes views the memory of a slice of numbers as bytes,
// without copying: for uploads, downloads and scatters that take bytes.
package rawbytes

import "unsafe"

// Number is a fixed-size value without pointers.
type Number interface {
	~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~float32 | ~float64
}

// Of returns the bytes of s's elements in memory order (len(s) times the
// element size), sharing s's memory, or nil for an empty s. It is safe
// for concurrent use; the bytes alias s.
func Of[T Number](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(s[0])))
}
