//go:build trajring_cuda

package gpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"

	"gorgonia.org/tensor"
)

// The words of an Adam hyper block (kernels/host/adam.h).
const (
	adamHyperT      = 0 // Adam steps taken
	adamHyperTicket = 1 // threads finished, 0 between launches
	adamHyperNegLR  = 2 // float32 bits of -lr
	adamHyperN      = 3 // table entries
	adamHyperTable  = 4 // c1 | c2<<32 of steps 1..n
)

// adamTable is the c1 and c2 of steps 1.. until both are 1 (which they
// stay, as 1-beta^t only grows), computed once.
var adamTable = sync.OnceValue(func() []uint64 {
	var tab []uint64
	for t := int64(1); ; t++ {
		k := adamConsts(0, t)
		tab = append(tab, uint64(math.Float32bits(k.c1))|uint64(math.Float32bits(k.c2))<<32)
		if k.c1 == 1 && k.c2 == 1 {
			return tab
		}
	}
})

// AdamHyperWords returns the uint64 words of an Adam hyper block
// (AdamDevice): four words and the constants of every step until they
// stop changing (about 17,000 steps, 139 KB). It is safe for concurrent
// use.
func AdamHyperWords() int { return adamHyperTable + len(adamTable()) }

// AdamHyper returns the contents of an Adam hyper block whose next
// AdamDevice takes step t+1 (t steps taken) at rate lr, to upload once;
// AdamHyperStep and AdamHyperRate return the words that change them. It
// is safe for concurrent use.
func AdamHyper(lr float64, t int64) []byte {
	tab := adamTable()
	out := make([]byte, 8*(adamHyperTable+len(tab)))
	put := func(i int, v uint64) { binary.LittleEndian.PutUint64(out[8*i:], v) }
	put(adamHyperT, uint64(t))
	put(adamHyperNegLR, uint64(math.Float32bits(-float32(lr))))
	put(adamHyperN, uint64(len(tab)))
	for i, e := range tab {
		put(adamHyperTable+i, e)
	}
	return out
}

// AdamHyperStep returns the byte offset and bytes of a hyper block's step
// count set to t (steps taken), for an Upload queued between launches.
func AdamHyperStep(t int64) (off int64, b []byte) {
	return 8 * adamHyperT, binary.LittleEndian.AppendUint64(nil, uint64(t))
}

// AdamHyperRate returns the byte offset and bytes of a hyper block's
// learning rate set to lr, for an Upload queued between launches.
func AdamHyperRate(lr float64) (off int64, b []byte) {
	return 8 * adamHyperNegLR, binary.LittleEndian.AppendUint64(nil, uint64(math.Float32bits(-float32(lr))))
}

// AdamDevice is Adam with its per-step values in device memory: hyper is
// a uint64 device tensor of AdamHyperWords words (contents from
// AdamHyper) holding the learning rate and the steps taken, t; the launch
// takes step t+1 with the constants Adam would use for it (the same
// bits) and then sets the count to t+1 itself. Its parameters therefore
// do not change from step to step, so a graph captured with it
// (CaptureGraph) replays every step. hyper must not overlap w, m, v, g or
// scale. Every call advances the count by one, n == 0 (no parameters)
// included: that call still launches the kernel, which updates nothing
// else, so the device's count, a graph's replays of the call and the
// caller's own count of steps (which it uploads with AdamHyperStep) stay
// equal whatever the network's size. It is safe for concurrent use, but
// two launches on one hyper block must not run at once (the backend's
// stream orders them).
func (b *Backend) AdamDevice(w, g, m, v *tensor.Dense, n int, scale, hyper *tensor.Dense) error {
	if hyper == nil {
		return fmt.Errorf("%w: AdamDevice without a hyper block", ErrBounds)
	}
	return b.adam(w, g, m, v, n, scale, hyper, 0, 0, 0)
}
