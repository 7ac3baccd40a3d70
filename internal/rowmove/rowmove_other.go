//go:build !amd64 || purego

package rowmove

import "unsafe"

const enabled = false

func rows(dst, src unsafe.Pointer, idx []int64, stride, size int64) {
	rowsGo(dst, src, idx, stride, size)
}

func cols(cs unsafe.Pointer, n int, idx []int64, first int64) {
	panic("rowmove: no assembly loop")
}

const useAVX2 = false

func setWide(bool) bool { return false }

const useRep = false

const repMin = 256

func setRep(bool) bool { return false }

func rowsRep(dst, src unsafe.Pointer, idx []int64, stride, size int64) {
	panic("rowmove: no REP MOVSB loop")
}
