package bench

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"time"
)

// ErrNoSamples is returned when statistics are asked of no measurements.
// The functions below (Percentile, Summarise, GBps, Ratio) are pure and
// safe for concurrent use.
var ErrNoSamples = errors.New("bench: no measurements")

// Stats summarises the latencies of one contestant in one scenario. It is
// a plain value.
// Times are in nanoseconds.
type Stats struct {
	Ops         int     `json:"ops"`
	P50         float64 `json:"p50_ns"`
	P99         float64 `json:"p99_ns"`
	Mean        float64 `json:"mean_ns"`
	Min         float64 `json:"min_ns"`
	AllocsPerOp float64 `json:"allocs_per_op"`
	BytesPerOp  float64 `json:"alloc_bytes_per_op"`
}

// Percentile returns the p-th percentile (0 <= p <= 100) of xs by the
// nearest-rank method on a sorted copy: the smallest value such that at
// least p percent of the values are at or below it. It returns
// ErrNoSamples for no values and an error for p outside [0, 100].
func Percentile(xs []float64, p float64) (float64, error) {
	if len(xs) == 0 {
		return 0, ErrNoSamples
	}
	if p < 0 || p > 100 || math.IsNaN(p) {
		return 0, fmt.Errorf("bench: percentile %v outside [0, 100]", p)
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return percentileSorted(s, p), nil
}

func percentileSorted(s []float64, p float64) float64 {
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[max(rank, 1)-1]
}

// Summarise computes Stats of latencies in nanoseconds; allocation
// counts are filled in by the caller.
func Summarise(ns []float64) (Stats, error) {
	if len(ns) == 0 {
		return Stats{}, ErrNoSamples
	}
	s := slices.Clone(ns)
	slices.Sort(s)
	var sum float64
	for _, v := range s {
		sum += v
	}
	return Stats{
		Ops:  len(s),
		P50:  percentileSorted(s, 50),
		P99:  percentileSorted(s, 99),
		Mean: sum / float64(len(s)),
		Min:  s[0],
	}, nil
}

// GBps returns the effective bandwidth of moving bytes in ns nanoseconds,
// in GB/s (10^9 bytes per second); 0 when ns is not positive.
func GBps(bytes, ns float64) float64 {
	if ns <= 0 {
		return 0
	}
	return bytes / ns
}

// Ratio returns a/b, or 0 when either is not positive (a missing value).
func Ratio(a, b float64) float64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	return a / b
}

// Budget bounds how long one contestant is measured.
type Budget struct {
	// Time is the wall time of the timed operations (warm-up excluded).
	Time time.Duration
	// MinOps and MaxOps bound the number of timed operations; MinOps wins
	// over Time.
	MinOps, MaxOps int
	// Warmup operations run before timing.
	Warmup int
}

// minSample is the shortest time one latency sample covers: faster
// operations are timed in groups of calls (a sample is the group's time
// over its size), so that reading the clock does not count as their cost.
const minSample = 5 * time.Microsecond

// recorder accumulates the latencies of one contestant over the turns of
// several rounds, and its allocations.
type recorder struct {
	inner   int // calls per latency sample, fixed by the first run's warm-up
	ns      []float64
	mallocs uint64
	bytes   uint64
	ops     int
}

// run times op until the budget is used, appending to r, and returns
// the number of timed calls and the time they took (a turn of a round,
// see roundUse). ReadMemStats brackets the timed loop, so allocations
// are exact counts per op (as testing.B reports them), and the loop
// itself allocates nothing.
func (r *recorder) run(op func() error, bud Budget) (ops int, spent time.Duration, err error) {
	// Groups are sized from the fastest warm-up call: a contestant's
	// first calls run from cold caches.
	per := time.Duration(math.MaxInt64)
	for range bud.Warmup {
		w0 := time.Now()
		if err := op(); err != nil {
			return 0, 0, err
		}
		per = min(per, time.Since(w0))
	}
	if r.inner == 0 {
		r.inner = 1
		if bud.Warmup > 0 && per < minSample {
			r.inner = int(minSample/max(per, 1)) + 1
		}
	}
	if cap(r.ns)-len(r.ns) < bud.MaxOps {
		r.ns = slices.Grow(r.ns, bud.MaxOps)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m0, b0 := ms.Mallocs, ms.TotalAlloc
	start := time.Now()
	n := 0
	for n < bud.MaxOps && (n < bud.MinOps || time.Since(start) < bud.Time) {
		k := min(r.inner, bud.MaxOps-n) // the last group may be short: no more than MaxOps
		t0 := time.Now()
		for range k {
			if err := op(); err != nil {
				return 0, 0, err
			}
		}
		r.ns = append(r.ns, float64(time.Since(t0).Nanoseconds())/float64(k))
		n += k
	}
	spent = time.Since(start)
	runtime.ReadMemStats(&ms)
	r.mallocs += ms.Mallocs - m0
	r.bytes += ms.TotalAlloc - b0
	r.ops += n
	return n, spent, nil
}

func (r *recorder) stats() (Stats, error) {
	s, err := Summarise(r.ns)
	if err != nil {
		return s, err
	}
	s.Ops = r.ops
	s.AllocsPerOp = float64(r.mallocs) / float64(r.ops)
	s.BytesPerOp = float64(r.bytes) / float64(r.ops)
	return s, nil
}

func isErr(err, target error) bool { return errors.Is(err, target) }
