package bench

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/trajring/trajring/cpu"
)

// fakePeers is a pyPeers that logs each call of its peers' operations
// into the test's log, as the Go contestants' operations do, and fails
// its failAt-th turn (counting from 1; 0: never).
type fakePeers struct {
	log    *[]byte
	names  []string
	turns  int
	failAt int
	closed bool
}

func (f *fakePeers) prepare(*pyJob, int) ([]string, error) { return f.names, nil }

func (f *fakePeers) turn(peer string, b Budget) ([]float64, time.Duration, error) {
	if f.turns++; f.turns == f.failAt {
		return nil, 0, errors.New("peers.py stopped")
	}
	mark := byte('p')
	if peer != f.names[0] {
		mark = 'q'
	}
	ns := make([]float64, b.MaxOps)
	for i := range ns {
		*f.log = append(*f.log, mark)
		ns[i] = 1000
	}
	return ns, time.Duration(b.MaxOps) * time.Microsecond, nil
}

func (f *fakePeers) drop()  {}
func (f *fakePeers) close() { f.closed = true }

// blocks returns the runs of equal bytes of log, in order.
func blocks(log []byte) []byte {
	var b []byte
	for i := range log {
		if i == 0 || log[i] != log[i-1] {
			b = append(b, log[i])
		}
	}
	return b
}

// TestMeasurePythonTakesTurns: the Python peers take turns with ours and
// the Go peer within every round, as the Go contestants do with each
// other, and each runs its budget; a Python peer that fails leaves the
// row with no Python column and the Go contestants with their budget.
func TestMeasurePythonTakesTurns(t *testing.T) {
	for _, tc := range []struct {
		name   string
		failAt int
		blocks string // the order of the turns: o ours, g the Go peer, p and q the Python peers
		py     []int  // the Python peers' timed calls
	}{
		// Two rounds of 160 operations each, in turns of 20: 8 turns of
		// each contestant a round.
		{"all", 0, repeat("ogpq", 16), []int{320, 320}},
		// The fifth Python turn (the third round of turns' p) fails.
		{"peers.py fails", 5, repeat("ogpq", 2) + repeat("og", 14), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log []byte
			fake := &fakePeers{log: &log, names: []string{PeerNumPy, PeerTorch1}, failAt: tc.failAt}
			r := &runner{opt: Options{Progress: io.Discard}, be: cpu.New(), rep: &Report{}, py: fake,
				bud: Budget{Time: time.Second, MinOps: 3, MaxOps: 320, Warmup: 2}, rounds: 2}
			sc := &scenario{row: Row{Scenario: "turns"}, py: &pyJob{Kind: "windows"},
				ours:  func() error { log = append(log, 'o'); return nil },
				peers: []op{{PeerGoIntN, func() error { log = append(log, 'g'); return nil }}}}
			if err := r.measure(sc); err != nil {
				t.Fatal(err)
			}
			// Warm-up calls (two each for ours and the Go peer) open the
			// first turns; the fake's turns have none.
			got := string(blocks(log))
			if got != tc.blocks {
				t.Fatalf("turns %s, want %s", got, tc.blocks)
			}
			row := r.rep.Rows[0]
			if row.Ours.Ops != 320 || row.Peer(PeerGoIntN).Stats.Ops != 320 {
				t.Fatalf("ours %d and the Go peer %d timed calls, want 320", row.Ours.Ops, row.Peer(PeerGoIntN).Stats.Ops)
			}
			var py []int
			for _, name := range fake.names {
				if p := row.Peer(name); p != nil {
					py = append(py, p.Stats.Ops)
					if p.Stats.AllocsPerOp != -1 || p.Stats.P50 != 1000 {
						t.Errorf("%s: %+v, want p50 1000 and allocations not measured (-1)", name, p.Stats)
					}
				}
			}
			if !slices.Equal(py, tc.py) {
				t.Fatalf("Python peers' timed calls %v, want %v", py, tc.py)
			}
			if failed := tc.failAt > 0; fake.closed != failed || (len(r.rep.Skipped) > 0) != failed || r.pyDead != failed {
				t.Fatalf("closed %v, skipped %v, pyDead %v; want all %v", fake.closed, r.rep.Skipped, r.pyDead, failed)
			}
		})
	}
}

func repeat(s string, n int) string { return string(bytes.Repeat([]byte(s), n)) }

// TestPeersScriptTurns runs peers.py itself (Debian's python3 with NumPy;
// TRAJRING_REQUIRE_NUMPY=1, as in CI, makes its absence a failure): a
// prepared job names its peers, a turn times at most MaxOps calls and at
// least MinOps, a timed turn lasts its budget, and a turn of an unknown
// peer is an error that leaves the worker answering.
func TestPeersScriptTurns(t *testing.T) {
	py, why := findPython("")
	if py != "" {
		if err := exec.Command(py, "-c", "import numpy").Run(); err != nil {
			py, why = "", "cannot import numpy: "+err.Error()
		}
	}
	if py == "" {
		if os.Getenv("TRAJRING_REQUIRE_NUMPY") == "1" {
			t.Fatalf("numpy is required (TRAJRING_REQUIRE_NUMPY=1): %s", why)
		}
		t.Skipf("no Python peers here: %s", why)
	}
	r := &runner{opt: Options{Progress: io.Discard}, rep: &Report{Versions: map[string]string{}}}
	w := r.startPython(t.Context())
	if w == nil {
		t.Fatalf("peers.py did not start: %+v", r.rep.Skipped)
	}
	defer w.close()
	j := newPyJob(LowDim(), 2, 64, "windows", 4, 1)
	j.ID = "7"
	peers, err := w.prepare(j, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(peers) == 0 || peers[0] != PeerNumPy {
		t.Fatalf("peers %v, want numpy first", peers)
	}
	for _, p := range peers {
		ns, _, err := w.turn(p, Budget{Time: time.Hour, MinOps: 1, MaxOps: 5})
		if err != nil || len(ns) != 5 {
			t.Fatalf("%s: %d calls, %v; want 5 (MaxOps)", p, len(ns), err)
		}
		ns, _, err = w.turn(p, Budget{MinOps: 3, MaxOps: 100})
		if err != nil || len(ns) != 3 {
			t.Fatalf("%s: %d calls, %v; want 3 (MinOps, no time)", p, len(ns), err)
		}
	}
	ns, spent, err := w.turn(PeerNumPy, Budget{Time: 20 * time.Millisecond, MinOps: 1, MaxOps: 1 << 30})
	if err != nil || spent < 20*time.Millisecond || len(ns) < 2 {
		t.Fatalf("a 20 ms turn: %d calls in %v, %v", len(ns), spent, err)
	}
	if _, _, err := w.turn("no-such-peer", Budget{MinOps: 1, MaxOps: 1}); err == nil {
		t.Fatal("a turn of an unknown peer succeeded")
	}
	if ns, _, err := w.turn(PeerNumPy, Budget{MinOps: 1, MaxOps: 1}); err != nil || len(ns) != 1 {
		t.Fatalf("after an error: %d calls, %v; want 1", len(ns), err)
	}
}
