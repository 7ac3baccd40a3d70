// Package kernelargs checks the arguments of the gather kernels (row and
// window gathers, transitions) the way every backend must: the cpu and
// the gpu backend run these same checks, so that both refuse exactly the
// same calls, in the same order, with the same messages, before touching
// any memory. A backend supplies its own out-of-bounds sentinel and how
// it resolves an arena (its foreign-or-freed error stays its own).
package kernelargs

import (
	"fmt"
	"math"

	"github.com/trajring/trajring/kernels"
)

// Arenas resolves a backend's arenas: Arena returns the backend's own
// arena behind a and its size in bytes, or an error (the backend's
// foreign-or-freed error) for an arena it does not own or has freed.
type Arenas[A any] interface {
	Arena(a kernels.Arena) (A, int64, error)
}

// Checker runs the checks for one backend. A plain value, safe for
// concurrent use when Arenas is.
type Checker[A any, R Arenas[A]] struct {
	// Bounds is the backend's sentinel for out-of-bounds arguments,
	// which every error about sizes, offsets and indices wraps.
	Bounds error
	// Arenas resolves the backend's arenas.
	Arenas R
}

// Index checks that every index is a step of a ring of steps steps.
func (k Checker[A, R]) Index(idx []int64, steps int64) error {
	for i, ix := range idx {
		if ix < 0 || ix >= steps {
			return fmt.Errorf("%w: index %d is %d, arena holds %d steps", k.Bounds, i, ix, steps)
		}
	}
	return nil
}

// Indices checks one index list against the rings of several columns,
// reading the list once while every ring holds all the indices (most
// columns share a ring, packed records, or hold as many steps). Not safe
// for concurrent use.
type Indices[A any, R Arenas[A]] struct {
	k       Checker[A, R]
	idx     []int64
	hi      int64 // the largest index
	neg     bool  // whether an index is negative
	scanned bool
}

// Indices returns a check of idx.
func (k Checker[A, R]) Indices(idx []int64) Indices[A, R] { return Indices[A, R]{k: k, idx: idx} }

// Check is Index(idx, steps).
func (c *Indices[A, R]) Check(steps int64) error {
	if !c.scanned {
		c.hi, c.scanned = -1, true
		for _, ix := range c.idx {
			c.hi = max(c.hi, ix)
			c.neg = c.neg || ix < 0
		}
	}
	if !c.neg && c.hi < steps {
		return nil
	}
	return c.k.Index(c.idx, steps)
}

// Gather checks the columns of a gather of n output steps from the ring
// steps idx (GatherRows, Concat): no column writes a ring, every ring
// holds whole steps of its column and every index, every output n
// steps, and, when next is set, every NextOut n steps. It stores each
// column's ring, output and (next set, NextOut not nil) successor output
// in rings[c], outs[c] and nexts[c] (any of them may be nil) and returns
// the bytes the outputs receive, n*StepBytes summed over the columns.
// Concat's successor indices are checked by the caller (Indices).
func (k Checker[A, R]) Gather(cols []kernels.Column, idx []int64, n int64, next bool, rings, outs, nexts []A) (int64, error) {
	if c, bad := kernels.WritesRing(cols); bad {
		return 0, fmt.Errorf("%w: column %d writes a ring arena", k.Bounds, c)
	}
	ic := k.Indices(idx)
	var total int64
	for c := range cols {
		col := &cols[c]
		ring, size, err := k.Arenas.Arena(col.Ring)
		if err != nil {
			return 0, fmt.Errorf("column %d ring: %w", c, err)
		}
		s := col.StepBytes
		steps, ok := col.RingSteps(size)
		if !ok {
			return 0, fmt.Errorf("%w: column %d: step of %d bytes at offset %d of a stride of %d", k.Bounds, c, s, col.Offset, col.Stride)
		}
		out, size, err := k.Arenas.Arena(col.Out)
		if err != nil {
			return 0, fmt.Errorf("column %d output: %w", c, err)
		}
		if !kernels.Fits(col.OutOff, n, s, size) {
			return 0, fmt.Errorf("%w: column %d: %d steps of %d at %d into %d", k.Bounds, c, n, s, col.OutOff, size)
		}
		if next && col.NextOut != nil {
			no, size, err := k.Arenas.Arena(col.NextOut)
			if err != nil {
				return 0, fmt.Errorf("column %d successor output: %w", c, err)
			}
			if !kernels.Fits(col.NextOff, n, s, size) {
				return 0, fmt.Errorf("%w: column %d: %d successors of %d at %d into %d", k.Bounds, c, n, s, col.NextOff, size)
			}
			if nexts != nil {
				nexts[c] = no
			}
		}
		if err := ic.Check(steps); err != nil {
			return 0, fmt.Errorf("column %d: %w", c, err)
		}
		if rings != nil {
			rings[c] = ring
		}
		if outs != nil {
			outs[c] = out
		}
		total += n * s
	}
	return total, nil
}

// Windows checks the arguments of a window gather (GatherWindows,
// GatherWindowsAt) that do not depend on the windows' values:
// kernels.WindowSteps, then every column (windowCols). It returns the
// output steps, len(wins)*seqLen, the rows the smallest ring holds and
// the bytes the outputs receive; rings and outs receive the columns'
// arenas as in Gather. The caller then checks the windows against the
// rows (kernels.BadWindow, or on the device) and the mask (Mask).
func (k Checker[A, R]) Windows(cols []kernels.Column, wins []kernels.Window, seqLen, capacity int64, rings, outs []A) (n, rows, total int64, err error) {
	n, problem := kernels.WindowSteps(cols, wins, seqLen, capacity)
	if problem != "" {
		return 0, 0, 0, fmt.Errorf("%w: %s", k.Bounds, problem)
	}
	rows, total, err = k.WindowCols(cols, n, capacity, rings, outs)
	return n, rows, total, err
}

// WindowCols checks the columns of a window gather of n output steps
// from rings of rows of capacity steps: every ring holds whole steps of
// its column and at least one row, every output n steps, every pad one
// step. It returns the rows the smallest ring holds and the bytes the
// outputs receive; rings and outs receive the columns' arenas as in
// Gather.
func (k Checker[A, R]) WindowCols(cols []kernels.Column, n, capacity int64, rings, outs []A) (rows, total int64, err error) {
	rows = math.MaxInt64
	for c := range cols {
		col := &cols[c]
		ring, size, err := k.Arenas.Arena(col.Ring)
		if err != nil {
			return 0, 0, fmt.Errorf("column %d ring: %w", c, err)
		}
		out, outSize, err := k.Arenas.Arena(col.Out)
		if err != nil {
			return 0, 0, fmt.Errorf("column %d output: %w", c, err)
		}
		s := col.StepBytes
		steps, ok := col.RingSteps(size)
		if !ok || steps/capacity < 1 {
			return 0, 0, fmt.Errorf("%w: column %d: step of %d bytes at offset %d of a stride of %d, capacity %d", k.Bounds, c, s, col.Offset, col.Stride, capacity)
		}
		if !kernels.Fits(col.OutOff, n, s, outSize) {
			return 0, 0, fmt.Errorf("%w: column %d: %d steps of %d bytes at %d into %d", k.Bounds, c, n, s, col.OutOff, outSize)
		}
		if col.Pad != nil && int64(len(col.Pad)) != s {
			return 0, 0, fmt.Errorf("%w: column %d: pad of %d bytes for steps of %d", k.Bounds, c, len(col.Pad), s)
		}
		if rings != nil {
			rings[c] = ring
		}
		if outs != nil {
			outs[c] = out
		}
		rows = min(rows, steps/capacity)
		total += n * s
	}
	return rows, total, nil
}

// Window checks the windows of a gather against the rows the rings hold
// (WindowCols) and the sequence length: kernels.BadWindow.
func (k Checker[A, R]) Window(wins []kernels.Window, rows, seqLen, capacity int64) error {
	if i, bad := kernels.BadWindow(wins, rows, min(seqLen, capacity)); bad {
		return fmt.Errorf("%w: window %d %+v (rows %d, capacity %d, length %d)", k.Bounds, i, wins[i], rows, capacity, seqLen)
	}
	return nil
}

// Mask checks a mask of n bytes at byte off of mask and returns its
// arena; a nil mask is no mask (the zero A, no error).
func (k Checker[A, R]) Mask(mask kernels.Arena, off, n int64) (A, error) {
	var m A
	if mask == nil {
		return m, nil
	}
	m, size, err := k.Arenas.Arena(mask)
	if err != nil {
		return m, fmt.Errorf("mask: %w", err)
	}
	if !kernels.Fits(off, n, 1, size) {
		return m, fmt.Errorf("%w: mask of %d at %d into %d", k.Bounds, n, off, size)
	}
	return m, nil
}
