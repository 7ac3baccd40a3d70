package philox

import (
	"math"
	"testing"
)

// TestFillRange: Fill's counters k..k+len(dst)-1 must stay below 2^32; a
// call past that (which would wrap and repeat draws) panics naming the
// request, and one that ends exactly at 2^32 fills every draw.
func TestFillRange(t *testing.T) {
	for _, tc := range []struct {
		k     uint32
		n     int
		panic string // "" when Fill must succeed
	}{
		{math.MaxUint32, 1, ""},
		{math.MaxUint32 - 99, 100, ""},
		{0, 0, ""},
		{math.MaxUint32, 0, ""},
		{math.MaxUint32, 2, "philox: internal error: Fill of 2 draws from k=4294967295 passes 2^32"},
		{math.MaxUint32 - 99, 101, "philox: internal error: Fill of 101 draws from k=4294967196 passes 2^32"},
	} {
		dst := make([]uint64, tc.n)
		got := func() (msg string) {
			defer func() {
				if r := recover(); r != nil {
					msg, _ = r.(string)
					if msg == "" {
						msg = "non-string panic"
					}
				}
			}()
			Fill(dst, 5, 6, 7, tc.k)
			return ""
		}()
		if got != tc.panic {
			t.Errorf("Fill(n=%d, k=%d): panic %q, want %q", tc.n, tc.k, got, tc.panic)
			continue
		}
		for i, v := range dst {
			if tc.panic != "" {
				if v != 0 {
					t.Fatalf("Fill(n=%d, k=%d) wrote %#x at %d before panicking", tc.n, tc.k, v, i)
				}
				continue
			}
			if want := Draw(5, 6, 7, tc.k+uint32(i)); v != want {
				t.Fatalf("Fill(n=%d, k=%d)[%d] = %#x, want %#x", tc.n, tc.k, i, v, want)
			}
		}
	}
}
