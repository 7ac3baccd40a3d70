package tensorbuf

import (
	"slices"
)

// Packed records.
//
// One arena per field costs one cache miss per field per random row, where
// a Go slice of structs costs one per row. So the small fields
// (at most packMaxBytes per step) and the four built-in columns of a
// buffer share one ring arena, one record per step; large fields (pixels)
// keep an arena each. Every column reads and writes its bytes of step k at
// k*stride+offset of its arena (kernels.Column.Stride and Offset); outputs
// stay per field and dense.
//
// Within a record the columns are ordered by element size, largest first
// (then in buffer order), so no column needs padding before it; the
// record's stride is the sum rounded up to 16 bytes (16-byte vector moves
// on the device, whole records per 64-byte cache line pair) when that
// costs at most 15% of the sum, else rounded up to the largest element
// size, the least that keeps every element of every record aligned.

// packMaxBytes is the largest step of a user field stored in the shared
// record arena; larger fields keep their own arenas. A field of more than
// a few cache lines gains nothing from sharing its rows' lines with the
// built-in columns, and would make the record arena's rows, read whole by
// the prefetcher, long for gathers that do not need that field (the
// hindsight goal gathers, n-step rewards).
const packMaxBytes = 256

// recordAlign is the alignment of a record's stride when it costs at most
// recordMaxPad of the record's bytes.
const (
	recordAlign  = 16
	recordMaxPad = 0.15
)

// ringArena is one ring arena of a buffer: numEnvs*capacity steps of
// stride bytes, holding one column, or the record of several.
type ringArena struct {
	arena  Arena
	stride int64
}

// planLayout assigns every column its arena (col.ar), its offset in that
// arena's steps (col.off) and the arena's stride (col.stride), and returns
// the strides of the arenas in order: the record arena first (when any
// column is packed), then one arena per large field in field order. It
// depends only on the columns' dtypes and sizes, so Load recomputes the
// layout a checkpoint was written with from its field specs.
func planLayout(cols []column) (strides []int64) {
	var packed []int
	for i := range cols {
		if cols[i].builtin || cols[i].stepBytes <= packMaxBytes {
			packed = append(packed, i)
		}
	}
	if len(packed) > 0 {
		slices.SortStableFunc(packed, func(a, b int) int {
			return cols[b].DType.Size() - cols[a].DType.Size()
		})
		var off int64
		for _, i := range packed {
			cols[i].ar, cols[i].off = 0, off
			off += cols[i].stepBytes
		}
		stride := recordStride(off, int64(cols[packed[0]].DType.Size()))
		for _, i := range packed {
			cols[i].stride = stride
		}
		strides = append(strides, stride)
	}
	for i := range cols {
		if !cols[i].builtin && cols[i].stepBytes > packMaxBytes {
			cols[i].ar, cols[i].off, cols[i].stride = len(strides), 0, cols[i].stepBytes
			strides = append(strides, cols[i].stepBytes)
		}
	}
	return strides
}

// recordStride returns the stride of a record of sum bytes whose largest
// element is align bytes (see the package comment on packed records).
func recordStride(sum, align int64) int64 {
	if s := roundUp(sum, recordAlign); float64(s-sum) <= recordMaxPad*float64(sum) {
		return s
	}
	return roundUp(sum, max(align, 1))
}

func roundUp(n, a int64) int64 { return (n + a - 1) / a * a }

// ringColumn returns column c's ring as a Column (no outputs).
func (b *Buffer) ringColumn(c int) Column {
	col := &b.cols[c]
	return Column{Ring: b.arenas[col.ar].arena, StepBytes: col.stepBytes, Stride: col.stride, Offset: col.off}
}
