package tensorbuf

import (
	"testing"

	"github.com/trajring/trajring/cpu"
)

// TestRecordLayout checks the packed record of several field sets: every
// small field and the built-in columns are in arena 0, large fields in an
// arena each; columns do not overlap and each is aligned to its element
// size; the stride is a multiple of 16 whenever that costs at most 15% of
// the record, and otherwise the padding is less than the largest element
// (the least that keeps every element aligned).
func TestRecordLayout(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fields  []Field
		stride  int64 // of the record arena
		arenas  int
		largest int64 // the pixel field's arena stride, 0 for none
	}{
		{"built-ins only", nil, 16, 1, 0},
		{"low-dim 108 bytes", []Field{
			{Name: "obs", DType: Float32, Shape: []int{22}},
			{Name: "act", Role: Action, DType: Int32},
		}, 112, 1, 0},
		{"pixels", []Field{
			{Name: "pix", DType: Uint8, Shape: []int{32, 32, 3}},
			{Name: "act", Role: Action, DType: Int32},
		}, 20, 2, 3072},
		{"odd bytes and a float64", []Field{
			{Name: "flag", DType: Uint8},
			{Name: "v", DType: Float64, Shape: []int{3}},
			{Name: "obs", DType: Float32, Shape: []int{5}},
		}, 64, 1, 0},
		{"one byte over the built-ins", []Field{{Name: "b", DType: Uint8}}, 20, 1, 0},
		{"a field at the threshold", []Field{{Name: "o", DType: Uint8, Shape: []int{packMaxBytes}}}, 272, 1, 0},
		{"a field above the threshold", []Field{{Name: "o", DType: Uint8, Shape: []int{packMaxBytes + 1}}}, 16, 2, packMaxBytes + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := New(Config{NumEnvs: 2, Capacity: 4, Fields: tc.fields, Backend: cpu.New()})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if len(b.arenas) != tc.arenas || b.arenas[0].stride != tc.stride {
				t.Fatalf("%d arenas, record stride %d; want %d, %d", len(b.arenas), b.arenas[0].stride, tc.arenas, tc.stride)
			}
			var sum, align int64
			used := make([]bool, b.arenas[0].stride)
			for i := range b.cols {
				c := &b.cols[i]
				if c.stride != b.arenas[c.ar].stride || b.ring[i].Stride != c.stride || b.ring[i].Offset != c.off {
					t.Fatalf("column %q: stride %d, ring column %+v, arena stride %d", c.Name, c.stride, b.ring[i], b.arenas[c.ar].stride)
				}
				if c.ar != 0 {
					if c.stepBytes <= packMaxBytes || c.off != 0 || c.stride != c.stepBytes || c.stride != tc.largest {
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
			if p16 := (sum+15)/16*16 - sum; float64(p16) <= 0.15*float64(sum) {
				if stride != sum+p16 {
					t.Fatalf("stride %d: 16-byte records of %d bytes cost %d bytes (at most 15%%) but were not chosen", stride, sum, p16)
				}
			} else if pad >= align {
				t.Fatalf("stride %d: padding %d of %d is over 15%% and not below the element size %d", stride, pad, sum, align)
			}
			if got, want := b.MemoryBytes(), 8*(stride+tc.largest)+8; got != want {
				t.Fatalf("MemoryBytes %d, want %d", got, want)
			}
		})
	}
}
