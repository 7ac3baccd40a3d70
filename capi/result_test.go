//go:build cgo

package capi

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// limitedTable returns a buffer object holding 8 steps of one row and a
// LIFO table of it whose rate limiter (one sample per insert) lets one
// sample through, and the handle of that sample's result. The table's
// next sample waits for an insert.
func limitedTable(t *testing.T) (*bufferObj, *tensorbuf.Table, uint64) {
	t.Helper()
	// The cpu backend in every build: the tests read the views' host
	// memory.
	b, err := tensorbuf.New(tensorbuf.Config{NumEnvs: 1, Capacity: 16, Seed: 1, Backend: cpu.New(),
		Fields: []tensorbuf.Field{{Name: "obs", Role: tensorbuf.Observation, DType: tensorbuf.Float32, Shape: []int{3}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	w, err := b.NewWriter(0)
	if err != nil {
		t.Fatal(err)
	}
	for k := range 8 {
		obs := tensor.New(tensor.WithShape(1, 3), tensor.WithBacking([]float32{float32(k), 0, float32(10 * k)}))
		st := tensorbuf.Mid
		if k == 0 {
			st = tensorbuf.First
		}
		s := &tensorbuf.Step{StepType: []tensorbuf.StepType{st}, NextStepType: []tensorbuf.StepType{tensorbuf.Mid},
			Reward: []float32{1}, Discount: []float32{1}, Values: map[string]*tensor.Dense{"obs": obs}}
		if err := w.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	tab, err := b.NewTable(tensorbuf.TableConfig{Name: "limited", Selector: tensorbuf.LIFO,
		RateLimiter: &tensorbuf.RateLimiter{MinSize: 1, SamplesPerInsert: 1, ErrorBuffer: 1}})
	if err != nil {
		t.Fatal(err)
	}
	insert(t, tab, 0)
	bo := newBufferObj(b)
	h, err := fillHandle(bo, tab, 0, kindBatch, 1, 0, "", sampleOne(context.Background(), tab, nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = freeResult(h) })
	return bo, tab, h
}

func insert(t *testing.T, tab *tensorbuf.Table, start int64) {
	t.Helper()
	if _, err := tab.Insert(tensorbuf.Item{Row: 0, Start: start, Len: 1, Priority: 1}); err != nil {
		t.Fatal(err)
	}
}

// sampleOne is the fill of a one-item table sample; entered, when not
// nil, is closed as the fill begins (without the result's lock).
func sampleOne(ctx context.Context, tab *tensorbuf.Table, entered chan struct{}) func(r *result) error {
	return func(r *result) error {
		if entered != nil {
			close(entered)
		}
		return tab.SampleInto(ctx, r.bt, 1)
	}
}

// startFill starts a sample of one item into handle h, which waits for
// the rate limiter, and returns once the fill has begun; the fill's error
// arrives on the channel. Its wait is bounded by a minute, only so that a
// failing run ends.
func startFill(t *testing.T, bo *bufferObj, tab *tensorbuf.Table, h uint64) <-chan error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	entered, done := make(chan struct{}), make(chan error, 1)
	go func() {
		_, err := fillHandle(bo, tab, h, kindBatch, 1, 0, "", sampleOne(ctx, tab, entered))
		done <- err
	}()
	<-entered
	return done
}

// before runs call in a goroutine and fails the test unless it returns
// before the fill whose error arrives on fill ends (which only the
// test's insert makes it do).
func before(t *testing.T, what string, call func(), fill <-chan error) {
	t.Helper()
	returned := make(chan struct{})
	go func() {
		call()
		close(returned)
	}()
	select {
	case <-returned:
	case err := <-fill:
		t.Fatalf("the sample into the result ended (%v) before %s returned", err, what)
	}
}

// takeGroup takes a DLPack view group of result h, as the first tensor of
// trj_result_dlpack does, and returns its id for dropGroup.
func takeGroup(t *testing.T, h uint64) uint64 {
	t.Helper()
	r, err := lockResult(h)
	if err != nil {
		t.Fatal(err)
	}
	defer r.mu.Unlock()
	g, err := r.viewGroup(h)
	if err != nil {
		t.Fatal(err)
	}
	dlViews.Lock()
	defer dlViews.Unlock()
	for id, vg := range dlViews.m {
		if vg.g == g {
			return id
		}
	}
	t.Fatal("the view group is not registered")
	return 0
}

func pooled(bo *bufferObj, r *result) bool {
	bo.mu.Lock()
	defer bo.mu.Unlock()
	return slices.Contains(bo.pool[kindBatch], r)
}

func firstObs(t *testing.T, r *result) []float32 {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	v := r.views[0]
	if v.name != "obs" || v.data == nil {
		t.Fatalf("view 0 is %q (%v)", v.name, v.data)
	}
	return slices.Clone(unsafe.Slice((*float32)(v.data), 3))
}

// A DLPack deleter of a result's last tensor, the result's descriptions
// and the release of its handle return while a sample into the result
// waits for the rate limiter; the sample, refilling in place, ends as it
// should.
func TestDropDuringWaitingFill(t *testing.T) {
	bo, tab, h := limitedTable(t)
	r, _ := getAs[*result](h, kindResult)
	addr := r.views[0].addr
	id := takeGroup(t, h) // a live tensor: the sample keeps the memory
	fill := startFill(t, bo, tab, h)
	before(t, "the last tensor's deleter", func() { dropGroup(id) }, fill)
	before(t, "a description", func() {
		if r, err := lockResult(h); err == nil {
			_, _ = r.n, len(r.views)
			r.mu.Unlock()
		}
	}, fill)
	insert(t, tab, 5)
	if err := <-fill; err != nil {
		t.Fatal(err)
	}
	if got := firstObs(t, r); !slices.Equal(got, []float32{5, 0, 50}) || r.views[0].addr != addr {
		t.Fatalf("refilled obs %v at %#x, want [5 0 50] in place at %#x", got, r.views[0].addr, addr)
	}
	if err := freeResult(h); err != nil {
		t.Fatal(err)
	}
	if !pooled(bo, r) {
		t.Fatal("the freed result is not back in its buffer's pool")
	}
}

// A result freed while a sample into it waits is left to the sample,
// which fails with ErrHandle and hands the memory back once no tensor of
// it lives: at its end without tensors, at the last deleter with one.
func TestFreeDuringWaitingFill(t *testing.T) {
	for _, withTensor := range []bool{false, true} {
		bo, tab, h := limitedTable(t)
		r, _ := getAs[*result](h, kindResult)
		var id uint64
		if withTensor {
			id = takeGroup(t, h)
		}
		fill := startFill(t, bo, tab, h)
		before(t, "trj_result_free", func() {
			if err := freeResult(h); err != nil {
				t.Error(err)
			}
		}, fill)
		if _, err := lockResult(h); !errors.Is(err, ErrHandle) {
			t.Fatalf("a freed handle during the fill: %v, want ErrHandle", err)
		}
		insert(t, tab, 5)
		if err := <-fill; !errors.Is(err, ErrHandle) {
			t.Fatalf("withTensor %v: the fill of a freed result: %v, want ErrHandle", withTensor, err)
		}
		if withTensor {
			if pooled(bo, r) || r.released {
				t.Fatal("a result with a live tensor was handed back")
			}
			if got := firstObs(t, r); !slices.Equal(got, []float32{5, 0, 50}) {
				t.Fatalf("the tensor's memory holds %v, want the sample drawn into it", got)
			}
			dropGroup(id)
		}
		if !pooled(bo, r) {
			t.Fatalf("withTensor %v: the freed result is not back in its buffer's pool", withTensor)
		}
		// The pooled result serves the next sample.
		insert(t, tab, 6)
		h2, err := fillHandle(bo, tab, 0, kindBatch, 1, 0, "", sampleOne(context.Background(), tab, nil))
		if err != nil {
			t.Fatal(err)
		}
		r2, _ := getAs[*result](h2, kindResult)
		if got := firstObs(t, r2); !slices.Equal(got, []float32{6, 0, 60}) {
			t.Fatalf("a sample into the pooled result: obs %v, want [6 0 60]", got)
		}
		if err := freeResult(h2); err != nil {
			t.Fatal(err)
		}
	}
}

// bound is how long a test waits for what must happen before it fails:
// a bound for a failing run, never a measure of speed.
const bound = 30 * time.Second

// eventually fails the test unless cond, checked with r.mu held, holds
// within bound.
func eventually(t *testing.T, r *result, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		r.mu.Lock()
		ok := cond()
		r.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within %v", what, bound)
		}
		time.Sleep(time.Millisecond)
	}
}

// closed reports whether c is closed.
func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// A second sample into a result waits for the first (the calls on one
// result stay serialised), without holding the result's lock meanwhile:
// it is seen waiting (awaitIdle) while the first waits for the rate
// limiter, its own sample begins only after the first ended, and the
// result then holds the first's item until the second's arrives.
func TestSecondFillWaitsForTheFirst(t *testing.T) {
	bo, tab, h := limitedTable(t)
	r, _ := getAs[*result](h, kindResult)
	id := takeGroup(t, h) // in place: both samples write the same memory
	first := startFill(t, bo, tab, h)
	entered, second := make(chan struct{}), make(chan error, 1)
	go func() {
		_, err := fillHandle(bo, tab, h, kindBatch, 1, 0, "", sampleOne(context.Background(), tab, entered))
		second <- err
	}()
	eventually(t, r, "the second sample's wait for the first", func() bool { return r.waiters == 1 && r.filling })
	if closed(entered) {
		t.Fatal("the second sample began while the first was under way")
	}
	before(t, "a description", func() {
		if r, err := lockResult(h); err == nil {
			r.mu.Unlock()
		}
	}, first)
	insert(t, tab, 5)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered: // the second sample began, and waits for the next insert
	case <-time.After(bound):
		t.Fatal("the second sample did not begin once the first ended")
	}
	eventually(t, r, "the second sample's fill", func() bool { return r.filling && r.waiters == 0 })
	if got := firstObs(t, r); !slices.Equal(got, []float32{5, 0, 50}) {
		t.Fatalf("between the samples obs %v, want the first's [5 0 50]", got)
	}
	insert(t, tab, 6)
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	if got := firstObs(t, r); !slices.Equal(got, []float32{6, 0, 60}) {
		t.Fatalf("obs %v, want the second sample's [6 0 60]", got)
	}
	dropGroup(id)
}

// A call waiting for a fill of result h (here trj_result_copy's wait)
// stops waiting, with ErrHandle, when h is freed: it does not wait for
// the fill, nor, once the freed result is pooled and serves another
// handle, for that handle's fills.
func TestWaiterOfAFreedHandleStops(t *testing.T) {
	bo, tab, h := limitedTable(t)
	r, _ := getAs[*result](h, kindResult)
	fillA := startFill(t, bo, tab, h)
	waited := make(chan error, 1)
	go func() { // trj_result_copy's prologue
		rr, err := lockResult(h)
		if err != nil {
			waited <- err
			return
		}
		err = rr.awaitIdle(h)
		rr.mu.Unlock()
		waited <- err
	}()
	eventually(t, r, "the copy's wait", func() bool { return r.waiters == 1 })
	if err := freeResult(h); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waited:
		if !errors.Is(err, ErrHandle) {
			t.Fatalf("the wait through a freed handle: %v, want ErrHandle", err)
		}
	case err := <-fillA:
		t.Fatalf("the fill ended (%v) before the wait through the freed handle", err)
	case <-time.After(bound):
		t.Fatal("the wait through a freed handle goes on")
	}
	// The freed result goes back to the pool when its fill ends, and
	// serves the next sample, whose wait is no concern of h's.
	insert(t, tab, 5)
	if err := <-fillA; !errors.Is(err, ErrHandle) {
		t.Fatalf("the fill of the freed result: %v, want ErrHandle", err)
	}
	if !pooled(bo, r) {
		t.Fatal("the freed result is not back in its buffer's pool")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	entered, done := make(chan struct{}), make(chan error, 1)
	go func() {
		h2, err := fillHandle(bo, tab, 0, kindBatch, 1, 0, "", sampleOne(ctx, tab, entered))
		if err == nil {
			err = freeResult(h2)
		}
		done <- err
	}()
	<-entered
	r.mu.Lock()
	err := r.awaitIdle(h) // a stale handle's wait for the recycled result's fill
	r.mu.Unlock()
	if !errors.Is(err, ErrHandle) {
		t.Fatalf("a stale handle's wait: %v, want ErrHandle", err)
	}
	insert(t, tab, 6)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
