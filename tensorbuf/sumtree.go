package tensorbuf

import "math"

// sumTree keeps, over slots 0..n-1, a binary tree of sums and minima of
// non-negative weights, for prioritized sampling in O(log n): sample finds
// the slot where a prefix sum crosses u, min gives the smallest positive
// weight for normalising importance weights. Not safe for concurrent use.
type sumTree struct {
	n   int // leaves, a power of two
	sum []float64
	min []float64 // +Inf where no positive weight
}

func (t *sumTree) grow(slots int) {
	if slots <= t.n {
		return
	}
	n := max(1, t.n)
	for n < slots {
		n *= 2
	}
	old, oldN := t.sum, t.n
	t.n = n
	t.sum = make([]float64, 2*n)
	t.min = make([]float64, 2*n)
	for i := range t.min {
		t.min[i] = math.Inf(1)
	}
	for i := range oldN {
		t.set(i, old[oldN+i])
	}
}

// set stores the weight of a slot (0 removes it from sampling).
func (t *sumTree) set(slot int, w float64) {
	i := t.n + slot
	t.sum[i] = w
	if w > 0 {
		t.min[i] = w
	} else {
		t.min[i] = math.Inf(1)
	}
	for i /= 2; i >= 1; i /= 2 {
		t.sum[i] = t.sum[2*i] + t.sum[2*i+1]
		t.min[i] = math.Min(t.min[2*i], t.min[2*i+1])
	}
}

func (t *sumTree) get(slot int) float64 { return t.sum[t.n+slot] }

func (t *sumTree) total() float64 {
	if t.n == 0 {
		return 0
	}
	return t.sum[1]
}

func (t *sumTree) minPositive() float64 {
	if t.n == 0 {
		return math.Inf(1)
	}
	return t.min[1]
}

// find returns the slot whose cumulative range contains u, for
// 0 <= u < total(). Rounding never lands on a zero-weight slot.
func (t *sumTree) find(u float64) int {
	i := 1
	for i < t.n {
		l := 2 * i
		if u < t.sum[l] || t.sum[l+1] <= 0 {
			i = l
		} else {
			u -= t.sum[l]
			i = l + 1
		}
	}
	return i - t.n
}

// findMany is find for many draws at once: it descends the tree one level
// at a time for all of them, so the cache misses of independent draws
// overlap instead of following each other. us is overwritten; out[k]
// receives the slot of us[k], exactly as find(us[k]) would return it.
func (t *sumTree) findMany(us []float64, out []int32) {
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
