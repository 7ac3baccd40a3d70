package kernels

// ColDesc is the device-side descriptor of one column of a multi-column
// launch, laid out as tr_col in kernels.h: six 8-byte words. A launch
// passes the device address of an array of them, so every field moves in
// one launch and every kernel argument stays 8 bytes wide.
//
// Ring step k of the column is at Ring + k*Stride: Ring already includes
// the column's Offset into its record (Column.Offset), so a kernel needs
// no offset of its own.
type ColDesc struct {
	Ring   uint64 // address of the column's bytes of ring step 0 (Column.Offset applied)
	Out    uint64 // address of the first output step (offset applied)
	Next   uint64 // Concat: address of the first successor step; 0 = none
	Aux    uint64 // Scatter: first source step; GatherWindows: pad step, 0 = zeros
	Step   int64  // bytes per step
	Stride int64  // bytes from one ring step to the next; 0 means Step
}

// WinDesc is the device-side form of a Window (tr_win in kernels.h): Start
// is reduced to the slot Start % capacity before the launch.
type WinDesc struct {
	Row   int64
	Start int64
	Len   int64
}

// Sizes in bytes of the device-side descriptors.
const (
	ColDescSize = 48
	WinDescSize = 24
)

// Arguments, in order, of every kernel (each 8 bytes wide):
//
//	trajring_scatter(cols, ncols, idx, n)
//	trajring_gather_rows(cols, ncols, idx, n)
//	trajring_concat(cols, ncols, idx, next, n)
//	trajring_gather_windows(cols, ncols, wins, nwin, seqLen, capacity, mask)
//	trajring_nstep_reward(ring, out, wins, n, capacity, gamma, stride)
//
// (gamma is a double, passed as the 8 bytes of math.Float64bits; ring is
// the address of the reward of ring step 0 and stride the bytes from one
// ring step to the next, 4 for a ring of rewards alone.)
//
// Launch grid: x strides over steps, y over columns (GatherWindows writes
// the mask as column ncols when mask != 0); any grid and block size is
// correct, none needs shared memory or block-level synchronisation.

// Lanes returns how many consecutive threads share one step of words
// words in the kernels (kernels/host/kernels.h, tr_lanes): at least
// min(words, 32), enough that no thread moves more than 4 16-byte words,
// a power of two no greater than words or 256 (the block size). Launchers
// size grids with it.
func Lanes(words int64) int64 {
	want := min(words, 32)
	if u := (words + 3) / 4; u > want {
		want = u
	}
	g := int64(1)
	for g < want && g < 256 {
		g <<= 1
	}
	for g > 1 && g > words {
		g >>= 1
	}
	return g
}
