package kernels

import "fmt"

// FrameStackGather describes one frame-stack gather of device-selected
// table transitions (kernels/stack_gather.cu; the loop is in
// host/stack_gather.h and cpu.Backend.StackGather, its reference). For
// each of N transitions it writes the K frames of the observation column
// Col that end at the transition's current step (the WinDesc records at
// CurOff of Sel, Start the slot, as TransitionCheck writes them) to Out
// from OutOff, and the K frames that end at its next step (NextOff of
// Sel) to NextOut from NextOutOff (skipped when NextOut is nil): frame f
// of transition i at output step i*K+f, f = K-1 the step itself. A frame
// before the episode's first step (a later step of the K is First), before
// a cut or before the row's first step is zeros; the edge is found in the
// table's mirror of the per-step metadata (Meta, Rows*Capacity bytes from
// MetaOff) and cursors (Cursors, Rows int64s from CursorsOff). A
// transition whose current frames reach a step the ring has overwritten
// (before cursor-Capacity) gets those frames as zeros and, when Mark is
// set, its validity byte (ValidOff of Sel) and masked float32 weight
// (MaskedOff) set to 0. 1 <= K <= Capacity.
type FrameStackGather struct {
	Col        Column
	NextOut    Arena
	NextOutOff int64
	K          int64
	N          int64
	Rows       int64
	Capacity   int64

	Sel                                  Arena
	CurOff, NextOff, ValidOff, MaskedOff int64
	Mark                                 bool

	Meta       Arena
	MetaOff    int64
	Cursors    Arena
	CursorsOff int64
}

// Bad describes the first argument of g that does not fit the arena
// sizes given (ring, out, next out, sel, meta, cursors bytes; nextSize is
// ignored without NextOut) or the scalar ranges; empty when there is
// none. Backends check every gather with it before launching or writing
// anything. The windows are in backend memory: the cpu backend checks
// them, the gpu backend cannot without waiting.
func (g FrameStackGather) Bad(ringSize, outSize, nextSize, selSize, metaSize, cursorsSize int64) string {
	steps, ok := Mul(g.Rows, g.Capacity)
	frames, fok := Mul(g.N, g.K)
	ringSteps, rok := g.Col.RingSteps(ringSize)
	switch {
	case g.Rows <= 0 || g.Capacity <= 0 || !ok:
		return fmt.Sprintf("%d rows of capacity %d", g.Rows, g.Capacity)
	case g.K < 1 || g.K > g.Capacity || g.N < 0 || !fok:
		return fmt.Sprintf("%d transitions of %d frames, capacity %d", g.N, g.K, g.Capacity)
	case !rok || ringSteps < steps:
		return fmt.Sprintf("ring of %d bytes for %d steps of %d bytes (stride %d, offset %d)", ringSize, steps, g.Col.StepBytes, g.Col.Stride, g.Col.Offset)
	case !Fits(g.Col.OutOff, frames, g.Col.StepBytes, outSize):
		return fmt.Sprintf("%d frames at %d in %d bytes", frames, g.Col.OutOff, outSize)
	case g.NextOut != nil && !Fits(g.NextOutOff, frames, g.Col.StepBytes, nextSize):
		return fmt.Sprintf("%d next frames at %d in %d bytes", frames, g.NextOutOff, nextSize)
	case g.CurOff%8 != 0 || g.NextOff%8 != 0 || g.MaskedOff%4 != 0 || g.CursorsOff%8 != 0:
		return fmt.Sprintf("misaligned offsets %d/%d/%d/%d", g.CurOff, g.NextOff, g.MaskedOff, g.CursorsOff)
	case !Fits(g.CurOff, g.N, WinDescSize, selSize) || (g.NextOut != nil && !Fits(g.NextOff, g.N, WinDescSize, selSize)):
		return fmt.Sprintf("%d windows at %d/%d in %d bytes", g.N, g.CurOff, g.NextOff, selSize)
	case g.Mark && (!Fits(g.ValidOff, g.N, 1, selSize) || !Fits(g.MaskedOff, g.N, 4, selSize)):
		return fmt.Sprintf("%d validity bytes and weights at %d/%d in %d bytes", g.N, g.ValidOff, g.MaskedOff, selSize)
	case g.MetaOff < 0 || !Fits(g.MetaOff, steps, 1, metaSize):
		return fmt.Sprintf("metadata of %d steps at %d in %d bytes", steps, g.MetaOff, metaSize)
	case !Fits(g.CursorsOff, g.Rows, 8, cursorsSize):
		return fmt.Sprintf("%d cursors at %d in %d bytes", g.Rows, g.CursorsOff, cursorsSize)
	}
	return ""
}
