package bench

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/trajring/trajring/cpu"
)

// TestMeasurePythonOurs: on a "python ..." row ours is the Python
// worker's first contestant, timed there and taking turns with its peers;
// a worker that fails drops the row (ours ran there) and is not used
// again.
func TestMeasurePythonOurs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		failAt int
		rows   int
	}{
		{"all", 0, 1},
		{"peers.py fails", 3, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log []byte
			fake := &fakePeers{log: &log, names: []string{pyOurs, PeerNumPy}, failAt: tc.failAt}
			r := &runner{opt: Options{Progress: io.Discard}, be: cpu.New(), rep: &Report{}, py: fake,
				bud: Budget{Time: time.Second, MinOps: 3, MaxOps: 320, Warmup: 2}, rounds: 2}
			sc := &scenario{row: Row{Scenario: "python turns"}, py: &pyJob{Kind: "windows", Trajring: &pyTrajring{Op: "sample_into"}}}
			if err := r.measure(sc); err != nil {
				t.Fatal(err)
			}
			if len(r.rep.Rows) != tc.rows {
				t.Fatalf("%d rows, want %d", len(r.rep.Rows), tc.rows)
			}
			if tc.rows == 0 {
				if !fake.closed || !r.pyDead {
					t.Fatalf("closed %v, pyDead %v after a failed turn", fake.closed, r.pyDead)
				}
				return
			}
			// Turns alternate: 'p' is ours (the fake's first name), 'q' numpy.
			if got := string(blocks(log)); got != repeat("pq", 16) {
				t.Fatalf("turns %s, want %s", got, repeat("pq", 16))
			}
			row := r.rep.Rows[0]
			if row.Ours.Ops != 320 || row.Ours.P50 != 1000 || row.Ours.AllocsPerOp != -1 {
				t.Fatalf("ours %+v, want 320 calls of 1000 ns, allocations not measured", row.Ours)
			}
			if row.Peer(pyOurs) != nil || row.Peer(PeerNumPy) == nil || len(row.Peers) != 1 {
				t.Fatalf("peers %+v, want numpy alone", row.Peers)
			}
		})
	}
}

// TestPythonRowsPlanned: every python row is named "python ...", in both
// modes' plans, after the Go rows.
func TestPythonRowsPlanned(t *testing.T) {
	for _, m := range []Mode{Quick, Full} {
		rows := pythonRows(m)
		all := Scenarios(m, nil)
		tail := all[len(all)-len(rows):]
		for i, pr := range rows {
			if !strings.HasPrefix(pr.name, "python ") || tail[i] != pr.name {
				t.Errorf("%s: python row %d %q, plan has %q", m, i, pr.name, tail[i])
			}
		}
	}
}
