//go:build cgo

package host

/*
#include "select.h"
*/
import "C"

import (
	"math"
	"unsafe"
)

// cSizes returns the C sizes of tr_item, tr_item_patch and tr_live_patch.
func cSizes() [3]uintptr {
	return [3]uintptr{unsafe.Sizeof(C.tr_item{}), unsafe.Sizeof(C.tr_item_patch{}), unsafe.Sizeof(C.tr_live_patch{})}
}

func math64(f float64) uint64 { return math.Float64bits(f) }
