package tensorbuf

import (
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/trajring/trajring/internal/prefetch"
)

// binTree is the binary sum tree this package used before the 8-ary one
// (a heap-ordered array, one level per bit of the slot), kept as the
// same-run yardstick of BenchmarkSumTreeFindMany.
type binTree struct {
	n   int
	sum []float64
}

func newBinTree(n int) *binTree {
	m := 1
	for m < n {
		m *= 2
	}
	return &binTree{n: m, sum: make([]float64, 2*m)}
}

func (t *binTree) set(slot int, w float64) {
	i := t.n + slot
	t.sum[i] = w
	for i /= 2; i >= 1; i /= 2 {
		t.sum[i] = t.sum[2*i] + t.sum[2*i+1]
	}
}

func (t *binTree) findMany(us []float64, out []int32) {
	for k := range out {
		out[k] = 1
	}
	for span := t.n; span > 1; span /= 2 {
		for k, i := range out {
			l := 2 * i
			if u := us[k]; u < t.sum[l] || t.sum[l+1] <= 0 {
				out[k] = l
			} else {
				us[k] = u - t.sum[l]
				out[k] = l + 1
			}
		}
	}
	for k := range out {
		out[k] -= int32(t.n)
	}
}

// BenchmarkSumTreeFindMany compares the batched descent of the 8-ary tree
// with the binary one over a million weights, run one after the other:
// go test -run '^$' -bench SumTreeFindMany ./tensorbuf/
func BenchmarkSumTreeFindMany(b *testing.B) {
	const slots = 1 << 20
	var t8 sumTree
	t8.grow(slots)
	t2 := newBinTree(slots)
	for s := range slots {
		w := math.Pow(float64(1+s%16), 0.6)
		t8.set(s, w)
		t2.set(s, w)
	}
	for _, n := range []int{256, 4096, 16384, 65536} {
		rng := rand.New(rand.NewPCG(1, 2))
		us, out := make([]float64, n), make([]int32, n)
		fill := func(total float64) {
			for k := range us {
				us[k] = rng.Float64() * total
			}
		}
		b.Run("binary/B="+itoa(n), func(b *testing.B) {
			for b.Loop() {
				fill(t2.sum[1])
				t2.findMany(us, out)
			}
		})
		b.Run("8ary/B="+itoa(n), func(b *testing.B) {
			for b.Loop() {
				fill(t8.total())
				t8.findMany(us, out)
			}
		})
		if n >= 4096 {
			// The descent on one goroutine, whatever treeSplit says.
			b.Run("8ary-unsplit/B="+itoa(n), func(b *testing.B) {
				defer func(s int) { treeSplit = s }(treeSplit)
				treeSplit = math.MaxInt
				for b.Loop() {
					fill(t8.total())
					t8.findMany(us, out)
				}
			})
		}
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// TestSumTreeSpeed times the binary and the 8-ary descents interleaved,
// round after round, and logs the median ratio (a shared machine's noise
// hits both alike). It runs only with TRAJRING_TREEBENCH=1.
func TestSumTreeSpeed(t *testing.T) {
	if os.Getenv("TRAJRING_TREEBENCH") == "" {
		t.Skip("set TRAJRING_TREEBENCH=1")
	}
	const slots = 1 << 20
	var t8 sumTree
	t8.grow(slots)
	t2 := newBinTree(slots)
	for s := range slots {
		w := math.Pow(float64(1+s%16), 0.6)
		t8.set(s, w)
		t2.set(s, w)
	}
	for _, n := range []int{256, 65536} {
		rng := rand.New(rand.NewPCG(1, 2))
		us, out := make([]float64, n), make([]int32, n)
		reps := max(1, 65536/n)
		var ratios, ratiosP, a2, a8, a8p []float64
		for range 21 {
			var d [3]time.Duration
			for which := range 3 {
				treePrefetch = which == 2
				t0 := time.Now()
				for range reps {
					for k := range us {
						us[k] = rng.Float64() * t8.total()
					}
					if which == 0 {
						t2.findMany(us, out)
					} else {
						t8.findMany(us, out)
					}
				}
				d[which] = time.Since(t0) / time.Duration(reps)
			}
			ratios = append(ratios, float64(d[0])/float64(d[1]))
			ratiosP = append(ratiosP, float64(d[0])/float64(d[2]))
			a2, a8, a8p = append(a2, float64(d[0])), append(a8, float64(d[1])), append(a8p, float64(d[2]))
		}
		treePrefetch = prefetch.Enabled
		for _, s := range [][]float64{ratios, ratiosP, a2, a8, a8p} {
			slices.Sort(s)
		}
		t.Logf("B=%d: binary %.0f ns, 8-ary %.0f ns, 8-ary+prefetch %.0f ns (medians); binary over 8-ary: %.2f, over 8-ary+prefetch: %.2f (median ratios)",
			n, a2[10], a8[10], a8p[10], ratios[10], ratiosP[10])
	}
}
