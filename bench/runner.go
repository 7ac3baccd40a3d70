package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/trajring/trajring/tensorbuf"
)

// Mode selects the sizes and time budgets of a run.
type Mode string

// The modes of a run.
const (
	// Quick is the CI subset: smaller pixel buffers, no 10M capacity,
	// short budgets.
	Quick Mode = "quick"
	// Full is every scenario at its full size, for humans.
	Full Mode = "full"
)

// Options configure a run.
type Options struct {
	Mode Mode
	// Backend is the engine's backend; nil selects
	// tensorbuf.DefaultBackend() (the gpu backend in cuda builds).
	Backend tensorbuf.Backend
	// Progress receives one progress line per scenario; nil discards.
	Progress io.Writer
	// Python is the interpreter for the NumPy and PyTorch peers; "" finds
	// Debian's /usr/bin/python3 (then python3 on PATH), "none" skips them.
	Python string
	// NoGoPeer skips the slice-of-structs Go peer.
	NoGoPeer bool
	// Filter, when set, runs only the scenarios whose name matches.
	Filter *regexp.Regexp
	// Scenario, when set, is called before each scenario is measured
	// with its name, the number of scenarios measured before it and the
	// number the run plans (Scenarios of the mode and filter); it then
	// replaces the per-scenario status lines on Progress, which keeps
	// the lines that stay (skips, the final summary).
	Scenario func(name string, done, total int)
}

// budget returns the per-contestant budget of a mode and the number of
// interleaved rounds it is split into.
func (m Mode) budget() (Budget, int) {
	if m == Full {
		return Budget{Time: 1500 * time.Millisecond, MinOps: 10, MaxOps: 200000, Warmup: 5}, 10
	}
	return Budget{Time: 150 * time.Millisecond, MinOps: 3, MaxOps: 20000, Warmup: 2}, 3
}

func (m Mode) valid() bool { return m == Quick || m == Full }

// ErrMode reports an unknown mode.
var ErrMode = errors.New("bench: unknown mode")

// op is one timed operation.
type op struct {
	name string
	fn   func() error
}

// scenario is one row to measure: the engine's operation, the ceilings
// and the Go peers, and the Python peers' job.
type scenario struct {
	row    Row
	ours   func() error
	plain  func() error
	gather func() error
	cold   func() error
	peers  []op
	py     *pyJob
	// pyIdx (and pyNext for transitions) are the draws the Python peers
	// replay: per operation, the ring step of each item (and of its
	// successor), the same rows as ours and the gather copy.
	pyIdx, pyNext [][]int64
	// budget overrides the mode's budget when MinOps > 0.
	budget Budget
}

// runner carries one run's state.
type runner struct {
	opt    Options
	be     tensorbuf.Backend
	rep    *Report
	bud    Budget
	rounds int
	start  time.Time
	done   int
	py     pyPeers
	pyDead bool
	tty    bool
	total  int // scenarios planned
}

// Run measures every scenario of the mode and returns the report. It is
// not meant for concurrent use: two runs would time each other. The
// Python peers run in one subprocess, taking turns with the Go
// contestants.
func Run(ctx context.Context, opt Options) (*Report, error) {
	if !opt.Mode.valid() {
		return nil, fmt.Errorf("%w: %q (want quick or full)", ErrMode, opt.Mode)
	}
	be := opt.Backend
	if be == nil {
		var err error
		if be, err = tensorbuf.DefaultBackend(); err != nil {
			return nil, fmt.Errorf("bench: backend: %w", err)
		}
	}
	if opt.Progress == nil {
		opt.Progress = io.Discard
	}
	r := &runner{
		opt:   opt,
		be:    be,
		start: time.Now(),
		rep: &Report{
			Date:     time.Now().UTC(),
			Mode:     string(opt.Mode),
			Backend:  be.Name(),
			Machine:  DescribeMachine(),
			Versions: map[string]string{},
		},
	}
	r.bud, r.rounds = opt.Mode.budget()
	if opt.Filter != nil {
		r.rep.Filter = opt.Filter.String()
	}
	r.total = len(Scenarios(opt.Mode, opt.Filter))
	r.tty = isTerminal(opt.Progress)
	r.note("no peers on table, prioritized and driver rows (no NumPy/PyTorch core of the same work; prioritized rows have the uniform table of the same items as a yardstick), nor Go peers on export; the go-structs-perm peer is not in the plots")
	if be.Name() != "cpu" {
		r.note("ceilings on the %s backend: %s", be.Name(), ceilingNote(be))
	}
	groups := []func(context.Context) error{r.pixelGroup, r.lowDimGroup, r.capacityGroup, r.addGroup, r.driverGroup, r.pythonGroup}
	for _, g := range groups {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := g(ctx); err != nil {
			r.stopPython()
			return nil, err
		}
		// The group's Python arrays are freed with its Go memory.
		r.dropPython()
		releaseMemory()
	}
	r.stopPython()
	for i := range r.rep.Rows {
		r.rep.Rows[i].finish()
	}
	r.notePrioritized()
	r.line("bench: %d scenarios in %s", len(r.rep.Rows), time.Since(r.start).Round(time.Second))
	return r.rep, nil
}

// notePrioritized notes, for each prioritized row, the ratio of its p50
// to the uniform table of the same items sampled in the same rounds (the
// uniform-table peer, which every prioritized row has).
func (r *runner) notePrioritized() {
	for _, row := range r.rep.Rows {
		if !strings.HasPrefix(row.Scenario, "prioritized lowdim ") || row.Ours.P50 <= 0 {
			continue
		}
		if p := row.Peer(PeerUniformTable); p != nil && p.Stats.P50 > 0 {
			r.note("%s: %.2f× the p50 of the uniform table of the same items, sampled in the same rounds", row.Scenario, row.Ours.P50/p.Stats.P50)
		}
	}
}

// status shows a progress line: rewritten in place on a terminal, one
// line each elsewhere (CI logs); none when Options.Scenario reports
// progress.
func (r *runner) status(format string, args ...any) {
	if r.opt.Scenario != nil {
		return
	}
	if r.tty {
		fmt.Fprintf(r.opt.Progress, "\r"+format+"\033[K", args...)
		return
	}
	fmt.Fprintf(r.opt.Progress, format+"\n", args...)
}

// line writes a line that stays.
func (r *runner) line(format string, args ...any) {
	if r.tty {
		format = "\r" + format + "\033[K"
	}
	fmt.Fprintf(r.opt.Progress, format+"\n", args...)
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func (r *runner) stopPython() {
	if r.py != nil {
		r.py.close()
		r.py = nil
	}
}

func ceilingNote(be tensorbuf.Backend) string {
	if _, ok := be.(DeviceCopier); ok {
		return "a device-to-device copy of the same bytes (plain copy column; no gather ceiling on the device)"
	}
	return "none for this backend, fractions left blank"
}

func releaseMemory() {
	runtime.GC()
	debug.FreeOSMemory()
}

func (r *runner) note(format string, args ...any) {
	r.rep.Notes = append(r.rep.Notes, fmt.Sprintf(format, args...))
}

func (r *runner) skip(what, format string, args ...any) {
	r.rep.Skipped = append(r.rep.Skipped, Skip{What: what, Reason: fmt.Sprintf(format, args...)})
	r.line("bench: skipped %s: %s", what, fmt.Sprintf(format, args...))
}

func (r *runner) want(name string) bool { return r.opt.Filter == nil || r.opt.Filter.MatchString(name) }

func (r *runner) progress(name string) {
	r.done++
	if r.opt.Scenario != nil {
		r.opt.Scenario(name, r.done-1, r.total)
		return
	}
	r.status("bench: [%d] %s (%s)", r.done, name, time.Since(r.start).Round(100*time.Millisecond))
}

// syncOp wraps an engine operation so that its time includes finishing
// the backend's work (a no-op on the cpu backend).
func (r *runner) syncOp(fn func() error) func() error {
	return func() error {
		if err := fn(); err != nil {
			return err
		}
		return r.be.Sync()
	}
}

// Within a round the contestants take turns of at most sliceTime or a
// sliceParts-th of the round's operations, so that each meets the shared
// machine's slow stretches as the others do.
const (
	sliceTime  = 10 * time.Millisecond
	sliceParts = 8
)

// roundUse is what a contestant has used of a round's budget.
type roundUse struct {
	ops   int
	spent time.Duration
}

// next returns the budget of a contestant's next turn in a round whose
// budget is per, or false once it has used that budget: per.MaxOps
// operations, or per.MinOps and per.Time.
func (u roundUse) next(per Budget) (Budget, bool) {
	if u.ops >= per.MaxOps || u.ops >= per.MinOps && u.spent >= per.Time {
		return Budget{}, false
	}
	b := per
	b.Time = max(0, min(sliceTime, per.Time-u.spent))
	b.MaxOps = min(per.MaxOps-u.ops, max(1, (per.MaxOps+sliceParts-1)/sliceParts))
	b.MinOps = 1
	return b, true
}

// launchCounter is implemented by device backends that count kernel
// launches.
type launchCounter interface{ Launches() int64 }

// measure runs a scenario: ours, the yardsticks and every peer (Go and
// Python) in the same rounds, taking turns within each round (see
// sliceTime), and appends its row.
func (r *runner) measure(sc *scenario) error {
	if !r.want(sc.row.Scenario) {
		return nil
	}
	r.progress(sc.row.Scenario)
	bud := r.bud
	if sc.budget.MinOps > 0 {
		bud = sc.budget
	}
	per := bud
	per.Time = bud.Time / time.Duration(r.rounds)
	per.MinOps = max(1, bud.MinOps/r.rounds)
	per.MaxOps = max(1, bud.MaxOps/r.rounds)
	type contestant struct {
		name string
		fn   func() error
		rec  recorder
		dst  **Stats
		per  Budget
		py   bool      // a Python peer: its turns run in peers.py
		ns   []float64 // a Python peer's latencies
	}
	sc.row.Backend = r.be.Name()
	cs := []*contestant{{fn: sc.ours, per: per}}
	if sc.plain != nil {
		cs = append(cs, &contestant{fn: sc.plain, dst: &sc.row.Plain, per: per})
	}
	if sc.gather != nil {
		cs = append(cs, &contestant{fn: sc.gather, dst: &sc.row.Gather, per: per})
	}
	if sc.cold != nil {
		cs = append(cs, &contestant{fn: sc.cold, dst: &sc.row.Cold, per: per})
	}
	for _, p := range sc.peers {
		cs = append(cs, &contestant{name: p.name, fn: p.fn, per: per})
	}
	pyNames, cleanup := r.preparePython(sc, per)
	defer cleanup()
	if sc.ours == nil {
		// A "python ..." row: ours is trajring driven from Python, the
		// worker's first contestant, taking turns as the others do.
		if len(pyNames) == 0 || pyNames[0] != pyOurs {
			return nil // no Python worker: skipped, and the run says why
		}
		cs[0] = &contestant{name: pyNames[0], py: true, per: r.pythonBudget(sc, per)}
		pyNames = pyNames[1:]
	}
	for _, name := range pyNames {
		cs = append(cs, &contestant{name: name, py: true, per: r.pythonBudget(sc, per)})
	}
	lc, counts := r.be.(launchCounter)
	var launches int64
	releaseMemory()
	for round := range r.rounds {
		// Every contestant, Go or Python, takes turns (see sliceTime).
		done := make([]roundUse, len(cs))
		for turn := 0; ; turn++ {
			ran := false
			for i, c := range cs {
				b, ok := done[i].next(c.per)
				if !ok {
					continue
				}
				ran = true
				if round > 0 || turn > 0 {
					b.Warmup = 0
				}
				if c.py {
					ns, spent, err := r.py.turn(c.name, b)
					if err != nil {
						// No Python column: a peer measured for part of the
						// row only would not have met the machine as ours did.
						r.pythonFailed(sc, err)
						if cs[0].py {
							return nil // ours ran there: no row
						}
						cs = slices.DeleteFunc(cs, func(c *contestant) bool { return c.py })
						done = done[:len(cs)]
						break
					}
					c.ns = append(c.ns, ns...)
					done[i].ops += len(ns)
					done[i].spent += spent
					continue
				}
				var l0 int64
				if i == 0 && counts {
					l0 = lc.Launches()
				}
				ops, spent, err := c.rec.run(c.fn, b)
				if err != nil {
					if c.name != "" {
						return fmt.Errorf("bench: %s: peer %s: %w", sc.row.Scenario, c.name, err)
					}
					return fmt.Errorf("bench: %s: %w", sc.row.Scenario, err)
				}
				done[i].ops += ops
				done[i].spent += spent
				if i == 0 && counts {
					launches += lc.Launches() - l0
				}
			}
			if !ran {
				break
			}
		}
	}
	for i, c := range cs {
		if c.py {
			s, err := Summarise(c.ns)
			if err != nil {
				continue
			}
			s.AllocsPerOp = -1 // not measured in Python
			if i == 0 {
				sc.row.Ours = s
				continue
			}
			sc.row.Peers = append(sc.row.Peers, PeerResult{Name: c.name, Stats: s})
			continue
		}
		s, err := c.rec.stats()
		if err != nil {
			return fmt.Errorf("bench: %s: %w", sc.row.Scenario, err)
		}
		switch {
		case i == 0:
			sc.row.Ours = s
			if counts {
				// Warm-up launches are counted too: divide by every call.
				sc.row.LaunchesPerOp = float64(launches) / float64(s.Ops+per.Warmup)
			}
		case c.name != "":
			sc.row.Peers = append(sc.row.Peers, PeerResult{Name: c.name, Stats: s})
		default:
			*c.dst = &s
		}
	}
	r.rep.Rows = append(r.rep.Rows, sc.row)
	return nil
}
