package tensorbuf

import (
	"fmt"
	"testing"

	"github.com/trajring/trajring/cpu"
)

// TestRecordLayout checks the record of several field sets, in both
// layouts: every small field and the built-in columns are in arena 0,
// large fields in an arena each; columns do not overlap and each is
// aligned to its element size. The packed layout's stride is a multiple
// of 16 whenever that costs at most 15% of the record, and otherwise the
// padding is less than the largest element (the least that keeps every
// element aligned); the line-aligned layout's stride is the packed one or
// the line stride (TestRecordStride checks which).
func TestRecordLayout(t *testing.T) {
	for _, tc := range []struct {
		name           string
		fields         []Field
		stride, packed int64 // of the record arena, line-aligned and packed
		arenas         int
		largest        int64 // the pixel field's arena stride, 0 for none
	}{
		{"built-ins only", nil, 16, 16, 1, 0},
		{"low-dim 108 bytes", []Field{
			{Name: "obs", DType: Float32, Shape: []int{22}},
			{Name: "act", Role: Action, DType: Int32},
		}, 128, 112, 1, 0},
		{"CartPole 40 bytes: too dear", []Field{
			{Name: "obs", DType: Float32, Shape: []int{4}},
			{Name: "act", Role: Action, DType: Int64},
		}, 40, 40, 1, 0},
		{"48 bytes: one line", []Field{{Name: "obs", DType: Float32, Shape: []int{8}}}, 64, 48, 1, 0},
		{"176 bytes: three lines", []Field{{Name: "obs", DType: Float32, Shape: []int{40}}}, 192, 176, 1, 0},
		{"96 bytes: nothing to gain", []Field{{Name: "obs", DType: Float32, Shape: []int{20}}}, 96, 96, 1, 0},
		{"pixels", []Field{
			{Name: "pix", DType: Uint8, Shape: []int{32, 32, 3}},
			{Name: "act", Role: Action, DType: Int32},
		}, 20, 20, 2, 3072},
		{"odd bytes and a float64", []Field{
			{Name: "flag", DType: Uint8},
			{Name: "v", DType: Float64, Shape: []int{3}},
			{Name: "obs", DType: Float32, Shape: []int{5}},
		}, 64, 64, 1, 0},
		{"one byte over the built-ins", []Field{{Name: "b", DType: Uint8}}, 20, 20, 1, 0},
		{"a field at the threshold", []Field{{Name: "o", DType: Uint8, Shape: []int{packMaxBytes}}}, 272, 272, 1, 0},
		{"a field above the threshold", []Field{{Name: "o", DType: Uint8, Shape: []int{packMaxBytes + 1}}}, 16, 16, 2, packMaxBytes + 1},
	} {
		for _, packed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/packed=%v", tc.name, packed), func(t *testing.T) {
				want := tc.stride
				if packed {
					want = tc.packed
				}
				recordLayoutCase(t, tc.fields, packed, want, tc.arenas, tc.largest)
			})
		}
	}
}

// recordLayoutCase is one case of TestRecordLayout: a buffer of fields
// whose record arena must have stride want, in the given layout.
func recordLayoutCase(t *testing.T, fields []Field, packed bool, want int64, arenas int, largest int64) {
	t.Helper()
	b, err := New(Config{NumEnvs: 2, Capacity: 4, Fields: fields, Backend: cpu.New(), packedRecords: packed})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if len(b.arenas) != arenas || b.arenas[0].stride != want {
		t.Fatalf("%d arenas, record stride %d; want %d, %d", len(b.arenas), b.arenas[0].stride, arenas, want)
	}
	var sum, align int64
	used := make([]bool, b.arenas[0].stride)
	for i := range b.cols {
		c := &b.cols[i]
		if c.stride != b.arenas[c.ar].stride || b.ring[i].Stride != c.stride || b.ring[i].Offset != c.off {
			t.Fatalf("column %q: stride %d, ring column %+v, arena stride %d", c.Name, c.stride, b.ring[i], b.arenas[c.ar].stride)
		}
		if c.ar != 0 {
			if c.stepBytes <= packMaxBytes || c.off != 0 || c.stride != c.stepBytes || c.stride != largest {
				t.Fatalf("column %q (%d bytes) in arena %d at %d, stride %d", c.Name, c.stepBytes, c.ar, c.off, c.stride)
			}
			continue
		}
		if c.off%int64(c.DType.Size()) != 0 {
			t.Fatalf("column %q at offset %d: not aligned to %d", c.Name, c.off, c.DType.Size())
		}
		for j := c.off; j < c.off+c.stepBytes; j++ {
			if used[j] {
				t.Fatalf("column %q overlaps another at byte %d", c.Name, j)
			}
			used[j] = true
		}
		sum += c.stepBytes
		align = max(align, int64(c.DType.Size()))
	}
	stride := b.arenas[0].stride
	pad := stride - sum
	if stride%align != 0 {
		t.Fatalf("stride %d is not a multiple of the largest element %d", stride, align)
	}
	if !packed && stride != recordStride(sum, align, true) {
		if stride != lineStride(sum) {
			t.Fatalf("stride %d of %d bytes: neither the packed stride nor the line stride", stride, sum)
		}
	} else if p16 := (sum+15)/16*16 - sum; float64(p16) <= 0.15*float64(sum) {
		if stride != sum+p16 {
			t.Fatalf("stride %d: 16-byte records of %d bytes cost %d bytes (at most 15%%) but were not chosen", stride, sum, p16)
		}
	} else if pad >= align {
		t.Fatalf("stride %d: padding %d of %d is over 15%% and not below the element size %d", stride, pad, sum, align)
	}
	if got, want := b.MemoryBytes(), 8*(stride+largest)+8; got != want {
		t.Fatalf("MemoryBytes %d, want %d", got, want)
	}
}

// TestRecordStride checks the line-aligned stride of records of 1 to 600
// bytes with elements of 1 to 8 bytes against lines counted byte by byte:
// the stride is the line stride exactly when, over 64 consecutive records
// from a line-aligned base, the packed stride's bytes times the lines a
// record touches are at least the line stride's (memory grows by at most
// the factor the lines a random read costs shrink), and either way it
// holds the record and keeps its elements and 16-byte moves aligned.
func TestRecordStride(t *testing.T) {
	lines := func(stride, sum int64) int64 { // distinct lines of each of 64 records, added up
		var n int64
		for k := range int64(64) {
			last := int64(-1)
			for b := k * stride; b < k*stride+sum; b++ {
				if b/64 != last {
					n, last = n+1, b/64
				}
			}
		}
		return n
	}
	for _, align := range []int64{1, 2, 4, 8} {
		for sum := align; sum <= 600; sum += align {
			p, got := recordStride(sum, align, true), recordStride(sum, align, false)
			l := lineStride(sum)
			if l < sum || l%16 != 0 || (l <= 64 && l&(l-1) != 0) || (l > 64 && l%64 != 0) || l-sum >= max(sum, 64) {
				t.Fatalf("lineStride(%d) = %d", sum, l)
			}
			want := p
			if lines(p, sum)*p >= lines(l, sum)*l {
				want = l
			}
			if got != want {
				t.Fatalf("sum %d align %d: stride %d, want %d (packed %d: %d lines per 64 records; line stride %d: %d)",
					sum, align, got, want, p, lines(p, sum), l, lines(l, sum))
			}
			if got < sum || got%align != 0 || (p%16 == 0 && got%16 != 0) {
				t.Fatalf("sum %d align %d: stride %d", sum, align, got)
			}
		}
	}
}
