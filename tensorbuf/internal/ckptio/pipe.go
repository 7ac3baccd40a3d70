package ckptio

import "sync"

// pipe is the two-stage chunk pipeline of StreamSections and
// Reader.ReadSpans: fill prepares one job after another on a new
// goroutine, reporting when it has prepared the last, and drain consumes
// them in order on the caller's, Pipeline jobs (made by newJob) going
// round between the two, so that filling chunk k+1 overlaps draining
// chunk k without a chunk ever being copied. The first error, fill's (in
// its turn after the jobs filled before it are drained) or drain's,
// stops both stages and is returned; pipe returns once the filling
// goroutine has ended.
func pipe[J any](newJob func() *J, fill func(*J) (last bool, err error), drain func(*J) error) error {
	type slot struct {
		j   *J
		err error
	}
	free := make(chan *slot, Pipeline)
	full := make(chan *slot, Pipeline)
	for range Pipeline {
		free <- &slot{j: newJob()}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(full)
		for {
			var s *slot
			select {
			case s = <-free:
			case <-stop:
				return
			}
			last, err := fill(s.j)
			s.err = err
			full <- s
			if err != nil || last {
				return
			}
		}
	}()
	var err error
	for s := range full {
		if err == nil {
			if err = s.err; err == nil {
				err = drain(s.j)
			}
			if err != nil {
				close(stop)
			}
		}
		free <- s
	}
	wg.Wait()
	return err
}
