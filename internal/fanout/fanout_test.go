package fanout

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// count is a Job that counts how often each index was run and refuses a
// range that is not one of the chunks Run promises.
type count struct {
	grain int
	hits  []atomic.Int32
	bad   atomic.Value // string: the first wrong range
}

func (c *count) Run(lo, hi int) {
	n := len(c.hits)
	if lo < 0 || hi > n || lo >= hi || (c.grain > 0 && (lo%c.grain != 0 || hi != min(lo+c.grain, n))) {
		c.bad.CompareAndSwap(nil, fmt.Sprintf("Run(%d, %d) of %d in chunks of %d", lo, hi, n, c.grain))
	}
	for i := lo; i < hi; i++ {
		c.hits[i].Add(1)
	}
}

func (c *count) check(t *testing.T) {
	t.Helper()
	if b := c.bad.Load(); b != nil {
		t.Fatal(b)
	}
	for i := range c.hits {
		if h := c.hits[i].Load(); h != 1 {
			t.Fatalf("index %d of %d run %d times", i, len(c.hits), h)
		}
	}
}

func TestRunCoversEveryIndexOnce(t *testing.T) {
	for _, tc := range []struct{ n, grain, ways int }{
		{0, 1, 2}, {1, 1, 2}, {5, 1, 8}, {7, 3, 2}, {8, 4, 2}, {9, 4, 3},
		{1000, 64, 2}, {1000, 1000, 2}, {1000, 2000, 2}, {1000, 0, 2}, {1000, 10, 1}, {1000, 10, 0},
	} {
		c := &count{hits: make([]atomic.Int32, tc.n)}
		if tc.ways > 1 && tc.n > max(tc.grain, 1) && Procs() > 1 {
			c.grain = max(tc.grain, 1)
		}
		if !returns(func() { Run(c, tc.n, tc.grain, tc.ways) }) {
			t.Fatalf("Run(n=%d, grain=%d, ways=%d) has not returned after 10 s", tc.n, tc.grain, tc.ways)
		}
		t.Run(fmt.Sprintf("n=%d/grain=%d/ways=%d", tc.n, tc.grain, tc.ways), c.check)
	}
}

// TestConcurrentRuns runs many splits from several goroutines at once
// (under -race: the workers' writes must be ordered before Run returns).
func TestConcurrentRuns(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range 200 {
				n := 1 + (g*37+r*11)%300
				plain := make([]int, n) // written by chunks, read after Run
				j := jobFunc(func(lo, hi int) {
					for i := lo; i < hi; i++ {
						plain[i] += i + 1
					}
				})
				if !returns(func() { Run(j, n, 1+r%7, Procs()) }) {
					t.Errorf("goroutine %d run %d: Run has not returned after 10 s", g, r)
					return
				}
				for i, v := range plain {
					if v != i+1 {
						t.Errorf("goroutine %d run %d: index %d holds %d", g, r, i, v)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}

// returns runs f and reports whether it returned within ten seconds (a
// split that loses count of its chunks waits forever).
func returns(f func()) bool {
	done := make(chan struct{})
	go func() { f(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(10 * time.Second):
		return false
	}
}

type jobFunc func(lo, hi int)

func (f jobFunc) Run(lo, hi int) { f(lo, hi) }

// TestRunAllocatesNothing: a warm Run with a pointer Job allocates
// nothing (the split states are recycled).
func TestRunAllocatesNothing(t *testing.T) {
	if Procs() < 2 {
		t.Skip("GOMAXPROCS=1: Run never splits")
	}
	c := &count{hits: make([]atomic.Int32, 4096)}
	if !returns(func() { Run(c, len(c.hits), 256, 2) }) {
		t.Fatal("Run has not returned after 10 s")
	}
	if a := testing.AllocsPerRun(100, func() { Run(c, len(c.hits), 256, 2) }); a != 0 {
		t.Fatalf("%v allocations per Run", a)
	}
}
