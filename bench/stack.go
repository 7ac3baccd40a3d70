package bench

import (
	"fmt"

	"github.com/trajring/trajring/tensorbuf"
)

// stackedRowName names the stacked-transition row of batch n with K
// frames over a ring of the given suffix (issue 45).
func stackedRowName(k, n int, suffix string) string {
	return fmt.Sprintf("transitions pixels stacked k=%d B=%d%s", k, n, suffix)
}

// stackedBytes returns the bytes of one stacked transition of layout l:
// every observation field K frames twice (observation and next
// observation), the other fields once, reward, discount and done.
func stackedBytes(l Layout, k int) int64 {
	s := int64(4 + 4 + 1)
	for _, f := range l.Fields {
		if f.Role == tensorbuf.Observation {
			s += 2 * int64(k) * int64(f.StepBytes())
		} else {
			s += int64(f.StepBytes())
		}
	}
	return s
}

// stackedScenario samples n one-step transitions with every observation
// field stacked over its last k frames (SampleNStepInto with Horizon 1,
// DiscountFactor 1 and NStepOptions.Stack): DQN's Atari batch drawn from
// single frames. The NumPy and PyTorch peers replay the same draws and
// gather the same windows by fancy indexing of t-k+1..t (and t-k+2..t+1),
// zeroing the frames before an episode's first step from step_type, as a
// Python buffer storing single frames would.
func (r *runner) stackedScenario(f *fixture, group, name string, n, k int) (*scenario, func(), error) {
	sc := &scenario{row: Row{Scenario: name, Group: group, Layout: f.layout.Name, B: n, L: 1, S: stackedBytes(f.layout, k), Capacity: f.steps()}}
	var stack []tensorbuf.FrameStack
	for _, fd := range f.layout.Fields {
		if fd.Role == tensorbuf.Observation {
			stack = append(stack, tensorbuf.FrameStack{Field: fd.Name, K: k})
		}
	}
	opt := tensorbuf.NStepOptions{Horizon: 1, DiscountFactor: 1, Stack: stack}
	tr := new(tensorbuf.Transitions)
	sc.ours = r.syncOp(func() error { return f.buf.SampleNStepInto(tr, n, opt) })
	if !r.want(name) {
		return sc, func() {}, nil // measure skips it: draw nothing
	}
	if f.ceil != nil {
		moved := int64(n) * sc.row.S
		sc.plain = func() error { return f.ceil.Plain(moved) }
		sc.cold = coldOf(f.ceil, moved)
	}
	// The peers replay draws of ours: the ring step of each transition
	// and of its successor.
	c := int64(f.capacity)
	for range drawCount(n, f.steps()) {
		if err := f.buf.SampleNStepInto(tr, n, opt); err != nil {
			_ = tr.Release()
			return nil, nil, err
		}
		idx, next := make([]int64, n), make([]int64, n)
		for i, row := range tr.Rows {
			idx[i] = int64(row)*c + tr.Steps[i]%c
			next[i] = int64(row)*c + (tr.Steps[i]+1)%c
		}
		sc.pyIdx, sc.pyNext = append(sc.pyIdx, idx), append(sc.pyNext, next)
	}
	sc.py = newPyJob(f.layout, f.numEnvs, f.capacity, "stacked", n, 1)
	sc.py.K = k
	return sc, func() { _ = tr.Release() }, nil
}

// stackedBatches are the batch sizes of the stacked rows a run of mode
// measures: DQN's 32 always, 256 in full runs.
func stackedBatches(mode Mode) []int {
	if mode == Quick {
		return []int{32}
	}
	return []int{32, 256}
}
