package bench

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"slices"
	"testing"

	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/kernels"
	"github.com/trajring/trajring/tensorbuf"
)

func smallCeiling(t *testing.T) (*hostCeiling, Layout) {
	t.Helper()
	l := LowDim()
	c, err := NewCeiling(nil, CeilingConfig{Layout: l, NumEnvs: 3, Capacity: 10, OutSteps: 12, PlainBytes: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*hostCeiling), l
}

// ringStep returns column c's bytes of ring step ix.
func ringStep(h *hostCeiling, c int, ix int64) []byte {
	s := h.step[c]
	return h.ring[c][ix*s : (ix+1)*s]
}

func TestCeilingWindows(t *testing.T) {
	h, _ := smallCeiling(t)
	// Row 1 from step 18 (slot 8): wraps after two steps; row 2 cut at 1.
	wins := []tensorbuf.Window{{Row: 1, Start: 18, Len: 4}, {Row: 2, Start: 3, Len: 1}, {Row: 0, Start: 0, Len: 4}}
	if err := h.Windows(wins, 4); err != nil {
		t.Fatal(err)
	}
	for c, s := range h.step {
		for b, w := range wins {
			for k := int64(0); k < 4; k++ {
				got := h.out[c][(int64(b)*4+k)*s : (int64(b)*4+k+1)*s]
				want := make([]byte, s)
				if k < w.Len {
					want = ringStep(h, c, w.Row*10+(w.Start+k)%10)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("column %d window %d step %d: got %v, want %v", c, b, k, got, want)
				}
			}
		}
	}
	wantMask := []byte{1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1}
	if !bytes.Equal(h.mask[:12], wantMask) {
		t.Errorf("mask = %v, want %v", h.mask[:12], wantMask)
	}
	if err := h.Windows(make([]tensorbuf.Window, 4), 4); err == nil {
		t.Error("16 steps into a ceiling of 12 gave no error")
	}
}

func TestCeilingTransitionsAndScatter(t *testing.T) {
	h, l := smallCeiling(t)
	idx, next := []int64{0, 15, 29}, []int64{1, 16, 20}
	if err := h.Transitions(idx, next); err != nil {
		t.Fatal(err)
	}
	for c, s := range h.step {
		for i := range idx {
			if got := h.out[c][int64(i)*s : int64(i+1)*s]; !bytes.Equal(got, ringStep(h, c, idx[i])) {
				t.Errorf("column %d transition %d: wrong step", c, i)
			}
			isObs := c < len(l.Fields) && l.Fields[c].Role == tensorbuf.Observation
			if isObs {
				if got := h.next[c][int64(i)*s : int64(i+1)*s]; !bytes.Equal(got, ringStep(h, c, next[i])) {
					t.Errorf("column %d transition %d: wrong successor", c, i)
				}
			} else if h.next[c] != nil {
				t.Errorf("column %d is no observation but has a successor arena", c)
			}
		}
	}
	for c := range h.out {
		for i := range h.out[c] {
			h.out[c][i] = byte(c + 100)
		}
	}
	if err := h.Scatter([]int64{7, 27}); err != nil {
		t.Fatal(err)
	}
	for c, s := range h.step {
		for _, ix := range []int64{7, 27} {
			if !bytes.Equal(ringStep(h, c, ix), bytes.Repeat([]byte{byte(c + 100)}, int(s))) {
				t.Errorf("column %d ring step %d not written by Scatter", c, ix)
			}
		}
	}
	if err := h.Plain(64); err != nil || !bytes.Equal(h.plainDst[:64], h.plainSrc[:64]) {
		t.Errorf("Plain(64): %v", err)
	}
	if err := h.Plain(65); err == nil {
		t.Error("Plain beyond its size gave no error")
	}
}

func TestSequenceDrawsMatchBuffer(t *testing.T) {
	b, err := Filled(LowDim(), 4, 300, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	d, err := SequenceDraws(b, 3, 8, 5, tensorbuf.SequenceOptions{EpisodeAware: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Windows) != 3 || len(d.Windows[0]) != 8 {
		t.Fatalf("draws shaped %d x %d, want 3 x 8", len(d.Windows), len(d.Windows[0]))
	}
	for _, ws := range d.Windows {
		for _, w := range ws {
			// An episode-aware window ends at its episode's boundary step.
			for k := int64(0); k < w.Len-1; k++ {
				if st, _, _ := b.StepTypeAt(int(w.Row), w.Start+k); st == tensorbuf.Last {
					t.Errorf("window %+v runs past the boundary at %d", w, w.Start+k)
				}
			}
			if w.Len < 5 {
				if st, _, _ := b.StepTypeAt(int(w.Row), w.Start+w.Len-1); st != tensorbuf.Last {
					t.Errorf("window %+v cut before its boundary", w)
				}
			}
		}
	}
	tr, err := TransitionDraws(b, 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	for k := range tr.Idx {
		for i := range tr.Idx[k] {
			if tr.Next[k][i]-tr.Idx[k][i] != 1 && tr.Idx[k][i]%300 != 299 {
				t.Errorf("successor of %d is %d", tr.Idx[k][i], tr.Next[k][i])
			}
		}
	}
}

func TestGoPeerStart(t *testing.T) {
	s := &structBuffer[lowDimStep]{numEnvs: 2, capacity: 10}
	for _, tc := range []struct{ i, l, want int }{{0, 4, 0}, {6, 4, 6}, {9, 4, 6}, {19, 1, 19}, {15, 10, 10}} {
		if got := s.start(tc.i, tc.l); got != tc.want {
			t.Errorf("start(%d, %d) = %d, want %d", tc.i, tc.l, got, tc.want)
		}
	}
}

// TestRunSmoke runs one small scenario end to end (no Python) and checks
// the row's shape, never its speed.
func TestRunSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a buffer and measures for a second; skipped in -short")
	}
	rep, err := Run(context.Background(), Options{Mode: Quick, Python: "none", Filter: regexp.MustCompile(`capacity 10\.0k|driver noop envs=16`)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 2 {
		t.Fatalf("%d rows, want 2: %+v", len(rep.Rows), rep.Rows)
	}
	r := rep.Rows[0]
	if r.Group != "capacity-sweep" || r.B != 256 || r.L != 1 || r.S != 109 || r.Capacity != 10000 || r.Bytes != 2*256*109 {
		t.Errorf("row %+v", r)
	}
	cpuBackend := rep.Backend == "cpu" // cuda builds run on the gpu backend
	if r.Ours.Ops < 3 || r.Plain == nil || (r.Gather == nil) == cpuBackend || r.Ours.P50 <= 0 || r.Ours.P99 < r.Ours.P50 {
		t.Errorf("row stats %+v plain %v gather %v", r.Ours, r.Plain, r.Gather)
	}
	if r.Peer(PeerGoPerm) == nil || r.Peer(PeerGoIntN) == nil {
		t.Errorf("Go peers missing: %+v", r.Peers)
	}
	if len(rep.Skipped) != 1 || rep.Skipped[0].What != "numpy and torch peers" {
		t.Errorf("skipped = %+v, want the Python peers", rep.Skipped)
	}
	if d := rep.Rows[1]; d.Group != "driver" || d.B != 16 || d.StepsPerSec <= 0 {
		t.Errorf("driver row %+v", d)
	}
}

// TestPrioritizedYardstick: a prioritized row samples the uniform table of
// the same items in its own rounds (the uniform-table peer), and the run
// notes their ratio from it, even when the uniform table's own rows are not
// wanted.
func TestPrioritizedYardstick(t *testing.T) {
	if testing.Short() {
		t.Skip("fills two tables of 250k items and measures; skipped in -short")
	}
	if cudaBuild {
		// What it checks (the harness pairing rows) does not depend on the
		// backend, and the default build runs it.
		t.Skip("cuda build: filling the 1M-step fixture on the stand-in driver takes over 10 minutes " +
			"(a host sync and a re-protection of device memory per add); the default build runs this test")
	}
	rep, err := Run(context.Background(), Options{Mode: Quick, Python: "none", NoGoPeer: true, Filter: regexp.MustCompile(`prioritized lowdim B=256 `)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 1 {
		t.Fatalf("%d rows, want 1: %+v", len(rep.Rows), rep.Rows)
	}
	r := rep.Rows[0]
	p := r.Peer(PeerUniformTable)
	if p == nil || p.Stats.Ops < 3 || p.Stats.P50 <= 0 || p.Ratio <= 0 {
		t.Fatalf("uniform-table yardstick %+v in row %+v", p, r)
	}
	want := fmt.Sprintf("%s: %.2f× the p50 of the uniform table of the same items, sampled in the same rounds", r.Scenario, r.Ours.P50/p.Stats.P50)
	if !slices.Contains(rep.Notes, want) {
		t.Errorf("notes %q lack %q", rep.Notes, want)
	}
}

// fakeDevice is the cpu backend dressed as a device backend: it copies
// between arenas, counts syncs and kernel launches.
type fakeDevice struct {
	*cpu.Backend
	syncs, launches int64
}

func (f *fakeDevice) Name() string { return "fake-device" }

func (f *fakeDevice) Copy(dst tensorbuf.Arena, dstOff int64, src tensorbuf.Arena, srcOff, n int64) error {
	copy(dst.(*cpu.Arena).Bytes()[dstOff:dstOff+n], src.(*cpu.Arena).Bytes()[srcOff:srcOff+n])
	return nil
}

func (f *fakeDevice) Sync() error { f.syncs++; return nil }

func (f *fakeDevice) Launches() int64 { return f.launches }

func (f *fakeDevice) GatherWindows(cols []kernels.Column, wins []kernels.Window, seqLen, capacity int64, mask kernels.Arena, maskOff int64) error {
	f.launches++
	return f.Backend.GatherWindows(cols, wins, seqLen, capacity, mask, maskOff)
}

func TestDeviceCeiling(t *testing.T) {
	be := &fakeDevice{Backend: cpu.New()}
	c, err := NewCeiling(be, CeilingConfig{Layout: LowDim(), NumEnvs: 2, Capacity: 10, OutSteps: 4, PlainBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	d := c.(*deviceCeiling)
	if d.src.Size() != 2*10*108 || d.dst.Size() != 100 {
		t.Errorf("source %d bytes (want the ring's 2160), destination %d (want 100)", d.src.Size(), d.dst.Size())
	}
	src := d.src.(*cpu.Arena).Bytes()
	for i := range src {
		src[i] = byte(i)
	}
	for k, want := range []int64{0, 100, 200} {
		if err := c.Plain(100); err != nil {
			t.Fatal(err)
		}
		if got := d.dst.(*cpu.Arena).Bytes()[0]; got != byte(want) {
			t.Errorf("copy %d started at byte %d, want %d (rotating source)", k, got, want)
		}
	}
	if be.syncs != 3 {
		t.Errorf("%d syncs for 3 copies", be.syncs)
	}
	if c.Gathers() || c.Windows(nil, 1) == nil || c.Scatter(nil) == nil || c.Transitions(nil, nil) == nil {
		t.Error("device ceiling claims gathers")
	}
	if err := c.Plain(101); err == nil {
		t.Error("Plain beyond the destination gave no error")
	}
	if _, err := NewCeiling(struct{ tensorbuf.Backend }{be}, CeilingConfig{Layout: LowDim(), NumEnvs: 1, Capacity: 1}); err == nil {
		t.Error("a backend without Copy got a ceiling")
	}
}

func TestRunOnDeviceBackend(t *testing.T) {
	be := &fakeDevice{Backend: cpu.New()}
	rep, err := Run(context.Background(), Options{Mode: Quick, Backend: be, Python: "none", NoGoPeer: true, Filter: regexp.MustCompile(`capacity 10\.0k`)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 1 || rep.Backend != "fake-device" {
		t.Fatalf("rows %+v on %q", rep.Rows, rep.Backend)
	}
	r := rep.Rows[0]
	if r.Plain == nil || r.Gather != nil || r.FracPlain <= 0 || r.FracGather != 0 {
		t.Errorf("device row: plain %v gather %v fractions %v %v", r.Plain, r.Gather, r.FracPlain, r.FracGather)
	}
	if r.LaunchesPerOp != 1 {
		t.Errorf("launches per op = %v, want 1 (one GatherWindows per sample)", r.LaunchesPerOp)
	}
	if len(r.Peers) != 0 {
		t.Errorf("peers ran though disabled: %+v", r.Peers)
	}
}
