package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// pyOurs is the name peer_trajring.py gives ours on the "python ..." rows.
const pyOurs = "trajring"

// trajringPackage returns the absolute directory that holds the trajring
// Python package with its built library (TRAJRING_PYTHON_PACKAGE, else
// python/ of the working directory or of its parent), or "" and why not.
func trajringPackage() (string, string) {
	cands := []string{"python", filepath.Join("..", "python")}
	if d := os.Getenv("TRAJRING_PYTHON_PACKAGE"); d != "" {
		cands = []string{d}
	}
	for _, d := range cands {
		if _, err := os.Stat(filepath.Join(d, "trajring", "libtrajring.so")); err == nil {
			abs, err := filepath.Abs(d)
			if err == nil {
				return abs, ""
			}
		}
	}
	return "", fmt.Sprintf("no trajring/libtrajring.so under %v (make python builds it; make bench-python runs these rows)", cands)
}

// pyRow is one "python ..." row.
type pyRow struct {
	name, group string
	layout      Layout
	numEnvs     int
	capacity    int
	kind        string // the peers' operation (peers.py), or "env"
	op          string // peer_trajring.py's
	b           int
	s           int64
	note        string
}

// pythonRows returns the rows of the python group for a mode, in order.
func pythonRows(mode Mode) []pyRow {
	lowCap, pixCap, addCap, envCap := 62500, 4096, 1<<20, 4096
	if mode == Quick {
		lowCap, pixCap, addCap, envCap = 15625, 512, 1<<16, 512
	}
	low, pix := LowDim(), Pixels()
	lowSteps := fmt.Sprintf("(%s steps)", fmtRate(float64(16*lowCap)))
	pixSteps := fmt.Sprintf("(%s steps)", fmtRate(float64(256*pixCap)))
	seq := func(l Layout) int64 { return l.StepBytes() + 1 }
	return []pyRow{
		{"python table.sample lowdim L=1 B=256 + from_dlpack " + lowSteps, "python", low, 16, lowCap, "windows", "sample", 256, seq(low),
			"a new result, torch.from_dlpack of its 10 tensors, dropped in the call"},
		{"python table.sample into lowdim L=1 B=256 " + lowSteps, "python", low, 16, lowCap, "windows", "sample_into", 256, seq(low),
			"refilled in place, torch views made once"},
		{"python sample_sequences into lowdim L=1 B=256 " + lowSteps, "python", low, 16, lowCap, "windows", "seq_into", 256, seq(low),
			"direct uniform sample (no table), refilled in place, torch views made once"},
		{"python sample_transitions into lowdim B=256 " + lowSteps, "python", low, 16, lowCap, "transitions", "trans_into", 256, transitionBytes(low),
			"refilled in place, torch views made once"},
		{"python table.sample into lowdim L=1 B=1 " + lowSteps, "python", low, 16, lowCap, "windows", "sample_into", 1, seq(low),
			"one foreign call"},
		{"python table.sample lowdim L=1 B=1 " + lowSteps, "python", low, 16, lowCap, "windows", "sample_new", 1, seq(low),
			"a new result, no views"},
		{"python table.sample pixels L=1 B=256 + from_dlpack " + pixSteps, "python", pix, 256, pixCap, "windows", "sample", 256, seq(pix),
			"a new result, torch.from_dlpack of its 10 tensors, dropped in the call"},
		{"python table.sample into pixels L=1 B=256 " + pixSteps, "python", pix, 256, pixCap, "windows", "sample_into", 256, seq(pix),
			"refilled in place, torch views made once"},
		{"python sample_sequences into pixels L=1 B=256 " + pixSteps, "python", pix, 256, pixCap, "windows", "seq_into", 256, seq(pix),
			"direct uniform sample (no table), refilled in place, torch views made once"},
		{"python sample_transitions into pixels B=256 " + pixSteps, "python", pix, 256, pixCap, "transitions", "trans_into", 256, transitionBytes(pix),
			"refilled in place, torch views made once"},
		{fmt.Sprintf("python add lowdim W=1 (%s steps)", fmtRate(float64(addCap))), "python", low, 1, addCap, "scatter", "add", 1, low.StepBytes(),
			"writer.add of one row"},
		{"python env cartpole envs=256 step", "python-env", Layout{}, 256, envCap, "env", "env_step", 256, 0,
			"env.step(actions); go-loop: the same steps in Go (trj_env_run_go); numpy: Gymnasium's CartPoleVectorEnv in NumPy"},
		{"python env cartpole envs=256 step+write (L=2 items)", "python-env", Layout{}, 256, envCap, "env", "env_write", 256, 0,
			"env.step(actions, writer=w); go-loop: the same steps and adds in Go; numpy: the NumPy CartPole and SB3's ReplayBuffer.add"},
	}
}

// pythonGroup measures trajring driven from Python (the python package
// over libtrajring.so) in the Python worker, next to NumPy and PyTorch
// doing the same work on the same data, and the batched env stepped from
// Python next to the same loop in Go and a NumPy CartPole (issues 40 and
// 41, item 5 each).
func (r *runner) pythonGroup(ctx context.Context) error {
	rows := pythonRows(r.opt.Mode)
	var names []string
	for _, row := range rows {
		names = append(names, row.name)
	}
	if !r.anyWanted(names) {
		return nil
	}
	pkg, why := trajringPackage()
	if pkg == "" {
		r.skip("python rows", "%s", why)
		return nil
	}
	r.note("python rows: ours is the trajring Python package (ctypes over libtrajring.so, DLPack views) called from Python in the peers' process, timed around each call with every Python-side cost; its peers take turns with it in the same process (numpy, torch: the same work over arrays of the same layout and contents, replaying uniform draws, none timed); allocs/op not measured there")
	rng := rand.New(rand.NewPCG(5, 6))
	for _, pr := range rows {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !r.want(pr.name) {
			continue
		}
		sc := &scenario{row: Row{Scenario: pr.name, Group: pr.group, Layout: pr.layout.Name, B: pr.b, L: 1, S: pr.s,
			Capacity: int64(pr.numEnvs) * int64(pr.capacity), Note: pr.note}}
		if pr.kind == "env" {
			sc.row.Layout, sc.row.Capacity = "", 0
			sc.py = &pyJob{Layout: "cartpole", NumEnvs: pr.numEnvs, Capacity: pr.capacity, EpisodeLen: EpisodeLen, Kind: "env", B: pr.b, L: 1}
			sc.py.Trajring = &pyTrajring{Path: pkg, Op: pr.op, Env: "CartPole-v1"}
		} else {
			sc.py = newPyJob(pr.layout, pr.numEnvs, pr.capacity, pr.kind, pr.b, 1)
			sc.py.Trajring = &pyTrajring{Path: pkg, Op: pr.op}
			if pr.kind != "scatter" {
				sc.pyIdx, sc.pyNext = uniformDraws(rng, pr, drawCount(pr.b, sc.row.Capacity))
			}
		}
		if err := r.runDriverPy(sc); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// runDriverPy measures a python row; env rows note µs per env step.
func (r *runner) runDriverPy(sc *scenario) error {
	if sc.py.Kind == "env" {
		return r.runDriver(sc, func() {}, nil)
	}
	return r.run(sc, func() {}, nil)
}

// uniformDraws returns k operations of pr.b uniform ring steps (and, for
// transitions, their successors in the same row), for the peers to
// replay: the distribution of trajring's uniform tables over the same
// steps.
func uniformDraws(rng *rand.Rand, pr pyRow, k int) (idx, next [][]int64) {
	span := pr.capacity
	if pr.kind == "transitions" {
		span--
	}
	for range k {
		d := make([]int64, pr.b)
		for i := range d {
			d[i] = int64(rng.IntN(pr.numEnvs))*int64(pr.capacity) + int64(rng.IntN(span))
		}
		idx = append(idx, d)
		if pr.kind == "transitions" {
			n := make([]int64, pr.b)
			for i, v := range d {
				n[i] = v + 1
			}
			next = append(next, n)
		}
	}
	return idx, next
}
