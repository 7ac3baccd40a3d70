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
// (then in buffer order), so no column needs padding before it. The
// record's packed stride is the sum rounded up to 16 bytes (16-byte vector
// moves on the device) when that costs at most 15% of the sum, else rounded
// up to the largest element size, the least that keeps every element of
// every record aligned.
//
// A random read of a record costs the cache lines it touches, and packed
// records straddle lines: 112-byte records from a line-aligned base touch
// 2.5 lines on average where 128-byte ones touch 2. So the stride is then
// line-aligned (lineStride: a power of two up to 64 bytes, a multiple of
// 64 beyond) when that does not make the product of the record's memory
// and its lines per random read larger: memory grows by at most the factor
// by which the reads shrink. Buffers laid out before line alignment
// (checkpoints and directories whose header has no layout byte) keep the
// packed stride: Config.packedRecords.

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
// depends only on the columns' dtypes and sizes and on packed (the layout
// before line-aligned records), so Load recomputes the layout a checkpoint
// was written with from its field specs and its layout byte.
func planLayout(cols []column, packed bool) (strides []int64) {
	var inRecord []int
	for i := range cols {
		if cols[i].builtin || cols[i].stepBytes <= packMaxBytes {
			inRecord = append(inRecord, i)
		}
	}
	if len(inRecord) > 0 {
		slices.SortStableFunc(inRecord, func(a, b int) int {
			return cols[b].DType.Size() - cols[a].DType.Size()
		})
		var off int64
		for _, i := range inRecord {
			cols[i].ar, cols[i].off = 0, off
			off += cols[i].stepBytes
		}
		stride := recordStride(off, int64(cols[inRecord[0]].DType.Size()), packed)
		for _, i := range inRecord {
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
// element is align bytes: the packed stride, or with packed false the
// line-aligned one where it is no dearer (see the package comment on
// packed records).
func recordStride(sum, align int64, packed bool) int64 {
	s := roundUp(sum, max(align, 1))
	if p := roundUp(sum, recordAlign); float64(p-sum) <= recordMaxPad*float64(sum) {
		s = p
	}
	if packed {
		return s
	}
	if c := lineStride(sum); linesPer64(s, sum)*s >= linesPer64(c, sum)*c {
		return c
	}
	return s
}

// linesPer64 returns the cache lines that 64 consecutive records of sum
// bytes at stride touch from a line-aligned base, together: 64 times what
// a random record touches on average, since their offsets within a line
// repeat every 64/gcd(stride, 64) records.
func linesPer64(stride, sum int64) int64 {
	var n int64
	for k := range int64(cacheLine) {
		start := k * stride
		n += (start+sum-1)/cacheLine - start/cacheLine + 1
	}
	return n
}

// layoutLineAligned is the checkpoint header's layout byte of a buffer
// whose record arena has line-aligned records (planLayout with packed
// false); a header without it has the packed layout.
const layoutLineAligned = 1

// layoutByte returns the checkpoint header's layout byte of b, 0 for none.
func (b *Buffer) layoutByte() uint8 {
	if b.packedRecords {
		return 0
	}
	return layoutLineAligned
}

// cacheLine is the cache line size line-aligned records are laid out for
// (64 bytes on every amd64 and arm64 server core).
const cacheLine = 64

// lineStride returns the smallest stride of at least sum bytes at which
// records from a line-aligned base touch no more lines than they must: a
// power of two up to a line, a multiple of a line beyond.
func lineStride(sum int64) int64 {
	if sum > cacheLine {
		return roundUp(sum, cacheLine)
	}
	c := int64(recordAlign)
	for c < sum {
		c *= 2
	}
	return c
}

func roundUp(n, a int64) int64 { return (n + a - 1) / a * a }

// ringColumn returns column c's ring as a Column (no outputs).
func (b *Buffer) ringColumn(c int) Column {
	col := &b.cols[c]
	return Column{Ring: b.arenas[col.ar].arena, StepBytes: col.stepBytes, Stride: col.stride, Offset: col.off}
}
