package bench

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/tensorbuf"
)

// ErrNoCeiling reports a backend for which no ceiling is implemented; its
// rows are printed without ceiling fractions.
var ErrNoCeiling = errors.New("bench: no copy ceiling for this backend")

// Ceiling moves the same bytes as the engine does in a scenario with the
// tightest loops the backend allows, from arenas of the same sizes and
// page kind: the yardstick every row is judged against. A Ceiling is not
// safe for concurrent use.
type Ceiling interface {
	// Plain copies n contiguous bytes into a contiguous destination.
	Plain(n int64) error
	// Windows gathers, for every column, each window's Len real steps of
	// its row (slot Start % capacity on), zeroes its seqLen-Len pad steps,
	// and writes the mask: the work of a sequence sample.
	Windows(wins []tensorbuf.Window, seqLen int64) error
	// Transitions gathers ring steps idx of every column and steps next of
	// the observation columns: the work of a transition sample or export.
	Transitions(idx, next []int64) error
	// Scatter writes len(idx) steps of every column to ring steps idx:
	// the work of an add.
	Scatter(idx []int64) error
	// Gathers reports whether Windows, Transitions and Scatter are
	// implemented; a device ceiling is only a plain device-to-device copy.
	Gathers() bool
	// Close frees the ceiling's memory.
	Close() error
}

// CeilingConfig sizes a Ceiling. It is a plain value, safe to copy.
type CeilingConfig struct {
	Layout   Layout
	NumEnvs  int
	Capacity int
	// OutSteps is the most steps one operation writes (B·L, or the
	// number of transitions).
	OutSteps int64
	// PlainBytes is the largest Plain copy.
	PlainBytes int64
}

// DeviceCopier is implemented by device backends (the gpu backend) that
// can copy between their arenas: the device ceiling is that copy. Its
// concurrency is the backend's.
type DeviceCopier interface {
	// Copy queues a copy of n bytes from src at srcOff to dst at dstOff.
	Copy(dst tensorbuf.Arena, dstOff int64, src tensorbuf.Arena, srcOff, n int64) error
}

// NewCeiling returns the ceiling of a backend: host arenas and copy()
// loops for the cpu backend; a device-to-device copy for a backend that
// implements DeviceCopier; ErrNoCeiling otherwise. It is safe for
// concurrent use; the Ceiling it returns is not.
func NewCeiling(be tensorbuf.Backend, cfg CeilingConfig) (Ceiling, error) {
	if be == nil || be.Name() == "cpu" {
		return newHostCeiling(cfg)
	}
	if _, ok := be.(DeviceCopier); ok {
		return newDeviceCeiling(be, cfg)
	}
	return nil, fmt.Errorf("%w: %q", ErrNoCeiling, be.Name())
}

// parallelBytes mirrors the cpu backend's threshold for splitting a data
// movement over goroutines, so the ceiling uses the same goroutines as
// the engine does at every size.
const parallelBytes = 2 << 20

// hostCeiling is the cpu ceiling: one mmapped arena per column (the cpu
// backend's own allocator, so the same page kind: MADV_HUGEPAGE above
// 1 MiB), written once so that every page is backed.
type hostCeiling struct {
	be       *cpu.Backend
	step     []int64
	obs      []bool
	capacity int64
	ring     [][]byte
	out      [][]byte
	next     [][]byte
	mask     []byte
	plainSrc []byte
	plainDst []byte
	coldSrc  []byte
	coldOff  int64
	arenas   []*cpu.Arena
	workers  int
}

func newHostCeiling(cfg CeilingConfig) (*hostCeiling, error) {
	h := &hostCeiling{
		be:       cpu.New(),
		step:     cfg.Layout.ColumnBytes(),
		capacity: int64(cfg.Capacity),
		workers:  runtime.GOMAXPROCS(0),
	}
	for _, f := range cfg.Layout.Fields {
		h.obs = append(h.obs, f.Role == tensorbuf.Observation)
	}
	for len(h.obs) < len(h.step) {
		h.obs = append(h.obs, false)
	}
	steps := int64(cfg.NumEnvs) * int64(cfg.Capacity)
	out := max(cfg.OutSteps, 1)
	alloc := func(n int64, fill bool) ([]byte, error) {
		a, err := h.be.Alloc(max(n, 1))
		if err != nil {
			return nil, err
		}
		ha := a.(*cpu.Arena)
		h.arenas = append(h.arenas, ha)
		b := ha.Bytes()
		if fill {
			pattern(b)
		}
		return b, nil
	}
	for c, s := range h.step {
		r, err := alloc(steps*s, true)
		if err != nil {
			h.Close()
			return nil, err
		}
		o, err := alloc(out*s, true)
		if err != nil {
			h.Close()
			return nil, err
		}
		var nx []byte
		if h.obs[c] {
			if nx, err = alloc(out*s, true); err != nil {
				h.Close()
				return nil, err
			}
		}
		h.ring, h.out, h.next = append(h.ring, r), append(h.out, o), append(h.next, nx)
	}
	var err error
	if h.mask, err = alloc(out, true); err != nil {
		h.Close()
		return nil, err
	}
	if h.plainSrc, err = alloc(cfg.PlainBytes, true); err != nil {
		h.Close()
		return nil, err
	}
	if h.plainDst, err = alloc(cfg.PlainBytes, true); err != nil {
		h.Close()
		return nil, err
	}
	if h.coldSrc, err = alloc(max(coldBytes, 2*cfg.PlainBytes), true); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

// pattern writes non-zero bytes everywhere, so that no page of an arena
// is the shared zero page.
func pattern(b []byte) {
	if len(b) == 0 {
		return
	}
	for i := range min(len(b), 4096) {
		b[i] = byte(i*131 + 17)
	}
	for n := min(len(b), 4096); n < len(b); n *= 2 {
		copy(b[n:], b[:n])
	}
}

// Gathers reports true: every operation has a host ceiling.
func (h *hostCeiling) Gathers() bool { return true }

func (h *hostCeiling) Close() error {
	var errs []error
	for _, a := range h.arenas {
		errs = append(errs, h.be.Free(a))
	}
	h.arenas = nil
	return errors.Join(errs...)
}

func (h *hostCeiling) Plain(n int64) error {
	if n > int64(len(h.plainSrc)) {
		return fmt.Errorf("bench: plain copy of %d bytes, ceiling sized for %d", n, len(h.plainSrc))
	}
	if n < parallelBytes || h.workers < 2 {
		copy(h.plainDst[:n], h.plainSrc[:n])
		return nil
	}
	h.split(int(n), func(lo, hi int) { copy(h.plainDst[lo:hi], h.plainSrc[lo:hi]) })
	return nil
}

// coldBytes is the least size of the cold copy's source: eight times the
// 32 MiB last-level cache of the machines this suite is run on, so that
// walking it leaves nothing of a copy's source in the cache by the time
// the walk comes back to it.
const coldBytes = 256 << 20

// ColdCopier is implemented by ceilings that measure a cold contiguous
// copy: the memory-bandwidth bound of a random-row gather.
type ColdCopier interface {
	// Cold copies n contiguous bytes into the plain copy's destination
	// from a source larger than the last-level cache, at the next offset
	// of a walk through it, so that every copy reads memory, not cache.
	Cold(n int64) error
}

// Cold copies n bytes from the next stretch of the cold source (see
// ColdCopier); it splits the copy as Plain does.
func (h *hostCeiling) Cold(n int64) error {
	if n > int64(len(h.plainDst)) || 2*n > int64(len(h.coldSrc)) {
		return fmt.Errorf("bench: cold copy of %d bytes, ceiling sized for %d", n, len(h.plainDst))
	}
	if h.coldOff+n > int64(len(h.coldSrc)) {
		h.coldOff = 0
	}
	src := h.coldSrc[h.coldOff : h.coldOff+n]
	h.coldOff += (n + 63) &^ 63
	if n < parallelBytes || h.workers < 2 {
		copy(h.plainDst[:n], src)
		return nil
	}
	h.split(int(n), func(lo, hi int) { copy(h.plainDst[lo:hi], src[lo:hi]) })
	return nil
}

// split runs fn over [0, n) in up to h.workers chunks on fresh goroutines,
// as the cpu backend does.
func (h *hostCeiling) split(n int, fn func(lo, hi int)) {
	w := min(h.workers, n)
	var wg sync.WaitGroup
	chunk := (n + w - 1) / w
	for lo := chunk; lo < n; lo += chunk {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			fn(lo, hi)
		}(lo, min(lo+chunk, n))
	}
	fn(0, min(chunk, n))
	wg.Wait()
}

func (h *hostCeiling) Windows(wins []tensorbuf.Window, seqLen int64) error {
	var total int64
	for _, s := range h.step {
		total += int64(len(wins)) * seqLen * s
	}
	if int64(len(wins))*seqLen > int64(len(h.mask)) {
		return fmt.Errorf("bench: %d windows of %d steps, ceiling sized for %d steps", len(wins), seqLen, len(h.mask))
	}
	if total < parallelBytes || h.workers < 2 {
		h.windows(wins, seqLen, 0, len(wins))
		return nil
	}
	h.split(len(wins), func(lo, hi int) { h.windows(wins, seqLen, lo, hi) })
	return nil
}

// windows is the tightest gather of windows: one copy per contiguous run
// of real steps (two when a window wraps the ring), one clear for the pad.
func (h *hostCeiling) windows(wins []tensorbuf.Window, seqLen int64, lo, hi int) {
	capacity := h.capacity
	for c, s := range h.step {
		ring, out := h.ring[c], h.out[c]
		for b := lo; b < hi; b++ {
			w := wins[b]
			dst := out[int64(b)*seqLen*s : int64(b+1)*seqLen*s]
			slot := w.Start % capacity
			first := min(w.Len, capacity-slot)
			base := (w.Row*capacity + slot) * s
			copy(dst[:first*s], ring[base:base+first*s])
			if first < w.Len {
				base = w.Row * capacity * s
				copy(dst[first*s:w.Len*s], ring[base:base+(w.Len-first)*s])
			}
			clear(dst[w.Len*s:])
		}
	}
	for b := lo; b < hi; b++ {
		m := h.mask[int64(b)*seqLen : int64(b+1)*seqLen]
		l := wins[b].Len
		for t := range m {
			m[t] = b2u(int64(t) < l)
		}
	}
}

func b2u(b bool) byte {
	if b {
		return 1
	}
	return 0
}

func (h *hostCeiling) Transitions(idx, next []int64) error {
	if len(idx) != len(next) || int64(len(idx)) > int64(len(h.mask)) {
		return fmt.Errorf("bench: %d transitions (%d successors), ceiling sized for %d", len(idx), len(next), len(h.mask))
	}
	var total int64
	for c, s := range h.step {
		total += int64(len(idx)) * s
		if h.obs[c] {
			total += int64(len(idx)) * s
		}
	}
	if total < parallelBytes || h.workers < 2 {
		h.transitions(idx, next, 0, len(idx))
		return nil
	}
	h.split(len(idx), func(lo, hi int) { h.transitions(idx, next, lo, hi) })
	return nil
}

func (h *hostCeiling) transitions(idx, next []int64, lo, hi int) {
	for c, s := range h.step {
		ring, out := h.ring[c], h.out[c]
		for i := lo; i < hi; i++ {
			ix := idx[i]
			copy(out[int64(i)*s:int64(i+1)*s], ring[ix*s:(ix+1)*s])
		}
		if !h.obs[c] {
			continue
		}
		nx := h.next[c]
		for i := lo; i < hi; i++ {
			ix := next[i]
			copy(nx[int64(i)*s:int64(i+1)*s], ring[ix*s:(ix+1)*s])
		}
	}
}

func (h *hostCeiling) Scatter(idx []int64) error {
	if int64(len(idx)) > int64(len(h.mask)) {
		return fmt.Errorf("bench: scatter of %d steps, ceiling sized for %d", len(idx), len(h.mask))
	}
	for c, s := range h.step {
		ring, src := h.ring[c], h.out[c]
		for i, ix := range idx {
			copy(ring[ix*s:(ix+1)*s], src[int64(i)*s:int64(i+1)*s])
		}
	}
	return nil
}
