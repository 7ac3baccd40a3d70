// Package fanout runs a range of indices on the calling goroutine and on
// process-wide worker goroutines at once, in chunks that whoever is free
// claims next: a worker that wakes late (a parked thread on a busy or
// virtual machine can take tens of microseconds) takes fewer chunks, and
// the caller never waits for one that has not started. The workers
// (GOMAXPROCS-1 of them, as GOMAXPROCS was at the first call) start with
// the first Run and live as long as the process; a Run allocates nothing
// once warm.
//
// The cpu backend splits its large gathers with it and tensorbuf the sum
// tree descent of a large prioritized sample; their callers give the
// figures.
package fanout

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// A Job is work over a range of indices whose parts can run at once:
// Run(lo, hi) does indices lo..hi-1 and must not touch what another
// part's range does.
type Job interface {
	Run(lo, hi int)
}

// split is one Run's shared state. A worker holds a reference from the
// moment the split is sent to it until it has found no chunk left, so a
// split is reused only after its last worker has let go (the caller's Job
// is not touched after Run returns: a late worker claims nothing).
type split struct {
	j        Job
	n, grain int64
	next     atomic.Int64 // the first index not claimed yet
	done     atomic.Int64 // indices completed
	refs     atomic.Int32
	fin      chan struct{} // a worker completing the last chunk says so here
}

var (
	once  sync.Once
	work  chan *split
	procs int
	free  struct {
		sync.Mutex
		list []*split
	}
)

func start() {
	procs = max(1, runtime.GOMAXPROCS(0))
	work = make(chan *split, procs)
	for range procs - 1 {
		go func() {
			for s := range work {
				if s.claim() {
					s.fin <- struct{}{}
				}
				s.release()
			}
		}()
	}
}

// Procs returns how many goroutines can run a Job's chunks at once: the
// workers and the caller. It is safe for concurrent use.
func Procs() int {
	once.Do(start)
	return procs
}

// Run runs j over [0, n) in chunks of grain indices (the last shorter),
// claimed in order by the calling goroutine and by up to ways-1 workers,
// and returns when every chunk has returned. With ways <= 1, one worker
// or n <= grain it is j.Run(0, n) on the calling goroutine. It is safe
// for concurrent use; concurrent Runs share the workers.
func Run(j Job, n, grain, ways int) {
	once.Do(start)
	grain = max(grain, 1)
	ways = min(ways, procs, (n+grain-1)/grain)
	if ways <= 1 {
		if n > 0 {
			j.Run(0, n)
		}
		return
	}
	s := get()
	s.j, s.n, s.grain = j, int64(n), int64(grain)
	s.next.Store(0)
	s.done.Store(0)
	s.refs.Store(int32(ways))
	for range ways - 1 {
		work <- s
	}
	if !s.claim() {
		<-s.fin // a worker completed the last chunk
	}
	s.j = nil
	s.release()
}

// claim runs chunks until none is left and reports whether the caller
// completed the last one.
func (s *split) claim() (last bool) {
	for {
		lo := s.next.Add(s.grain) - s.grain
		if lo >= s.n {
			return last
		}
		hi := min(lo+s.grain, s.n)
		s.j.Run(int(lo), int(hi))
		last = s.done.Add(hi-lo) == s.n
	}
}

// release drops a reference; the last returns s to the free list.
func (s *split) release() {
	if s.refs.Add(-1) == 0 {
		free.Lock()
		free.list = append(free.list, s)
		free.Unlock()
	}
}

// get returns a split from the free list (not a sync.Pool, which every
// garbage collection empties) or a new one.
func get() *split {
	free.Lock()
	defer free.Unlock()
	if n := len(free.list); n > 0 {
		s := free.list[n-1]
		free.list = free.list[:n-1]
		return s
	}
	return &split{fin: make(chan struct{}, 1)}
}
