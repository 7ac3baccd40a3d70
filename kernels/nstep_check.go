package kernels

import "fmt"

// TransitionCheck describes one n-step check of drawn table items
// (kernels/nstep_check.cu; the loop is in host/nstep_check.h and
// cpu.Backend.NStepCheck, its reference). A table that selects on its
// backend mirrors the buffer's per-step metadata byte (Meta: Rows*Capacity
// bytes from MetaOff, the host's layout) and the rows' write cursors
// (Cursors: Rows int64s from CursorsOff). For each of the N windows a
// draw wrote (WinDesc records from WinOff of Sel, Start the slot, Len the
// item's length; their importance weights, float64, from WeightOff) the
// check computes the n-step length k with horizon Horizon as
// Buffer.nstepLen does (0 for an item starting at a boundary step or of
// one step) and writes to Sel the n-step windows {Row, Start, k}
// (StepsOff, read by the n-step reward sum), the current and next steps'
// one-step windows {Row, Start, 1} and {Row, (Start+k)%Capacity, 1}
// (CurOff, NextOff, read by the window gather), validity k > 0 (one byte
// each, ValidOff) and the weights as float32, 0 where invalid (MaskedOff);
// and to Out the discounts gamma^k as float32, 0 when step k-1
// terminates or k is 0 (DiscOff), and the IsDone bytes (DoneOff).
// Window, key and weight offsets are multiples of 8, float32 offsets of
// 4; the output runs must not overlap the inputs.
type TransitionCheck struct {
	Meta       Arena
	MetaOff    int64
	Cursors    Arena
	CursorsOff int64
	Rows       int64
	Capacity   int64
	Horizon    int64
	Gamma      float64
	N          int64

	Sel                                                               Arena
	WinOff, WeightOff, StepsOff, CurOff, NextOff, ValidOff, MaskedOff int64

	Out              Arena
	DiscOff, DoneOff int64
}

// Bad describes the first argument of c that does not fit the arena
// sizes given (meta, cursors, sel, out bytes) or the scalar ranges; empty
// when there is none. Backends check every check with it before launching
// or writing anything. The windows themselves are in backend memory: the
// cpu backend checks them, the gpu backend cannot without waiting.
func (c TransitionCheck) Bad(metaSize, cursorsSize, selSize, outSize int64) string {
	steps, ok := Mul(c.Rows, c.Capacity)
	switch {
	case c.Rows <= 0 || c.Capacity <= 0 || !ok:
		return fmt.Sprintf("%d rows of capacity %d", c.Rows, c.Capacity)
	case c.Horizon < 1 || c.N < 0:
		return fmt.Sprintf("horizon %d, %d windows", c.Horizon, c.N)
	case !(c.Gamma >= 0 && c.Gamma <= 1):
		return fmt.Sprintf("gamma %v outside [0, 1]", c.Gamma)
	case c.MetaOff < 0 || !Fits(c.MetaOff, steps, 1, metaSize):
		return fmt.Sprintf("metadata of %d steps at %d in %d bytes", steps, c.MetaOff, metaSize)
	case c.CursorsOff%8 != 0 || !Fits(c.CursorsOff, c.Rows, 8, cursorsSize):
		return fmt.Sprintf("%d cursors at %d in %d bytes", c.Rows, c.CursorsOff, cursorsSize)
	case c.WinOff%8 != 0 || c.WeightOff%8 != 0 || c.StepsOff%8 != 0 || c.CurOff%8 != 0 || c.NextOff%8 != 0 ||
		c.MaskedOff%4 != 0 || c.DiscOff%4 != 0:
		return fmt.Sprintf("misaligned offsets %d/%d/%d/%d/%d/%d/%d", c.WinOff, c.WeightOff, c.StepsOff, c.CurOff, c.NextOff, c.MaskedOff, c.DiscOff)
	case !Fits(c.WinOff, c.N, WinDescSize, selSize) || !Fits(c.WeightOff, c.N, 8, selSize) ||
		!Fits(c.StepsOff, c.N, WinDescSize, selSize) || !Fits(c.CurOff, c.N, WinDescSize, selSize) ||
		!Fits(c.NextOff, c.N, WinDescSize, selSize) || !Fits(c.ValidOff, c.N, 1, selSize) || !Fits(c.MaskedOff, c.N, 4, selSize):
		return fmt.Sprintf("%d windows at %d/%d/%d/%d/%d/%d/%d in %d bytes", c.N, c.WinOff, c.WeightOff, c.StepsOff, c.CurOff, c.NextOff, c.ValidOff, c.MaskedOff, selSize)
	case !Fits(c.DiscOff, c.N, 4, outSize) || !Fits(c.DoneOff, c.N, 1, outSize):
		return fmt.Sprintf("%d discounts and dones at %d/%d in %d bytes", c.N, c.DiscOff, c.DoneOff, outSize)
	}
	return ""
}
