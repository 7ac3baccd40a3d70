package observer_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/driver/envs"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

const (
	F = tensorbuf.First
	M = tensorbuf.Mid
	L = tensorbuf.Last
)

// countingFields are the buffer fields of the Counting environment: its
// observations and its action.
func countingFields(t testing.TB) []tensorbuf.Field {
	t.Helper()
	env, err := envs.NewCounting(1)
	if err != nil {
		t.Fatal(err)
	}
	return append(slices.Clone(env.ObservationSpec()), env.ActionSpec()...)
}

// newBuffer returns a buffer for the Counting environment with a FIFO
// table (insertion order kept) per name.
func newBuffer(t testing.TB, numEnvs, capacity int, tables ...string) *tensorbuf.Buffer {
	t.Helper()
	b, err := tensorbuf.New(tensorbuf.Config{NumEnvs: numEnvs, Capacity: capacity, Fields: countingFields(t), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	for _, n := range tables {
		if _, err := b.NewTable(tensorbuf.TableConfig{Name: n, Selector: tensorbuf.FIFO}); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

func counting(t testing.TB, lengths ...int) *envs.Counting {
	t.Helper()
	env, err := envs.NewCounting(lengths...)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// iterPolicy is a stateful policy for Counting whose action, on every
// row, is the number of Action calls before this one (its state): the
// reward of the trajectory at iteration n is n, or 0 on a boundary.
type iterPolicy struct{ ps driver.PolicyStep }

func newIterPolicy(t testing.TB, env driver.Environment) *iterPolicy {
	t.Helper()
	act, err := driver.NewTensors(env.ActionSpec(), env.BatchSize())
	if err != nil {
		t.Fatal(err)
	}
	return &iterPolicy{ps: driver.PolicyStep{Action: act}}
}

func (p *iterPolicy) InitialState(int) any        { return 0 }
func (p *iterPolicy) InfoSpec() []tensorbuf.Field { return nil }
func (p *iterPolicy) Action(ts *driver.TimeStep, state any) (*driver.PolicyStep, error) {
	n := state.(int)
	a := p.ps.Action[envs.CountActionName].Int64s()
	for r := range a {
		a[r] = int64(n % (envs.CountingMaxAction + 1))
	}
	p.ps.State = n + 1
	return &p.ps, nil
}

// runSteps runs a step driver of numSteps over env with the observers and
// returns its stats.
func runSteps(t testing.TB, env driver.Environment, numSteps int, obs ...driver.Observer) driver.RunStats {
	t.Helper()
	d, err := driver.NewStepDriver(env, newIterPolicy(t, env), numSteps, driver.WithObservers(obs...))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Run(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	return d.Stats()
}

// runEpisodes runs an episode driver of numEpisodes over env.
func runEpisodes(t testing.TB, env driver.Environment, numEpisodes int, obs ...driver.Observer) driver.RunStats {
	t.Helper()
	d, err := driver.NewEpisodeDriver(env, newIterPolicy(t, env), numEpisodes, driver.WithObservers(obs...))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Run(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	return d.Stats()
}

// view is one item of a table read back through Table.All and
// Batch.Host: its metadata and, per step of the batch's window, the
// "count" observation, the step types, the reward and the mask.
type view struct {
	Row        int
	Start      int64
	Len, Pad   int
	Priority   float64
	Count      []int64
	StepType   []tensorbuf.StepType
	NextType   []tensorbuf.StepType
	Reward     []float32
	Discount   []float32
	Mask       []bool
	EpisodeIdx []int64
}

// String renders the item as "row@start [0 1 2 P]" with P for a pad step.
func (v view) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d@%d [", v.Row, v.Start)
	for k := range v.Count {
		if k > 0 {
			sb.WriteByte(' ')
		}
		if v.Mask[k] {
			fmt.Fprintf(&sb, "%d%v", v.Count[k], v.StepType[k])
		} else {
			sb.WriteByte('P')
		}
	}
	sb.WriteByte(']')
	return sb.String()
}

// items reads every item of a table, oldest first; none for an empty
// table.
func items(t testing.TB, b *tensorbuf.Buffer, table string) []view {
	t.Helper()
	tb, err := b.Table(table)
	if err != nil {
		t.Fatal(err)
	}
	if tb.Size() == 0 {
		return nil
	}
	bt, err := tb.All()
	if err != nil {
		t.Fatal(err)
	}
	defer bt.Release()
	return views(t, bt)
}

// views copies a batch to the host and splits it into items.
func views(t testing.TB, bt *tensorbuf.Batch) []view {
	t.Helper()
	vs, err := hostViews(bt)
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// hostViews is views for goroutines other than the test's.
func hostViews(bt *tensorbuf.Batch) ([]view, error) {
	h, err := bt.Host()
	if err != nil {
		return nil, err
	}
	defer h.Release()
	n, l := h.Len()
	count := h.Fields[envs.CountName].Data().([]int64)
	ep := h.Fields[envs.EpisodeStepName].Data().([]int64)
	st := h.StepType.Data().([]int32)
	nst := h.NextStepType.Data().([]int32)
	rew := h.Reward.Data().([]float32)
	disc := h.Discount.Data().([]float32)
	mask := h.Mask.Data().([]bool)
	out := make([]view, n)
	for i := range out {
		it := h.Items[i]
		v := view{Row: it.Row, Start: it.Start, Len: it.Len, Pad: it.Pad, Priority: it.Priority}
		for k := i * l; k < (i+1)*l; k++ {
			v.Count = append(v.Count, count[k])
			v.EpisodeIdx = append(v.EpisodeIdx, ep[k])
			v.StepType = append(v.StepType, tensorbuf.StepType(st[k]))
			v.NextType = append(v.NextType, tensorbuf.StepType(nst[k]))
			v.Reward = append(v.Reward, rew[k])
			v.Discount = append(v.Discount, disc[k])
			v.Mask = append(v.Mask, mask[k])
		}
		out[i] = v
	}
	return out, nil
}

func strs(vs []view) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.String()
	}
	return out
}

// checkPads asserts that every pad step of every item holds exactly what
// tensorbuf's gather writes, and every real step the mask true.
func checkPads(t testing.TB, vs []view) {
	t.Helper()
	for _, v := range vs {
		for k := range v.Count {
			real := k < v.Len
			if v.Mask[k] != real {
				t.Errorf("%v: step %d mask %v, want %v", v, k, v.Mask[k], real)
			}
			if real {
				continue
			}
			if v.Count[k] != 0 || v.EpisodeIdx[k] != 0 || v.StepType[k] != L || v.NextType[k] != F || v.Reward[k] != 0 || v.Discount[k] != 0 {
				t.Errorf("%v: pad step %d holds count %d, episode step %d, types %v->%v, reward %v, discount %v",
					v, k, v.Count[k], v.EpisodeIdx[k], v.StepType[k], v.NextType[k], v.Reward[k], v.Discount[k])
			}
		}
	}
}

// trajectory builds a batched trajectory for Counting's fields by hand.
func trajectory(st, next []tensorbuf.StepType, count []int64) *driver.Trajectory {
	b := len(st)
	obs := map[string]*tensor.Dense{
		envs.CountName:       tensor.New(tensor.WithShape(b), tensor.WithBacking(slices.Clone(count))),
		envs.EpisodeStepName: tensor.New(tensor.WithShape(b), tensor.WithBacking(make([]int64, b))),
	}
	act := map[string]*tensor.Dense{envs.CountActionName: tensor.New(tensor.WithShape(b), tensor.WithBacking(make([]int64, b)))}
	return &driver.Trajectory{
		StepType: slices.Clone(st), NextStepType: slices.Clone(next),
		Observation: obs, Action: act,
		Reward: make([]float32, b), Discount: make([]float32, b),
	}
}

// feed observes a hand-made single-row stream: step types types[k] with
// count from+k, each step's next step type being the following one.
func feed(t testing.TB, o driver.Observer, types []tensorbuf.StepType, from int64) {
	t.Helper()
	for k, st := range types {
		next := F
		if k+1 < len(types) {
			next = types[k+1]
		} else if st != L {
			next = M
		}
		if err := o.Observe(trajectory([]tensorbuf.StepType{st}, []tensorbuf.StepType{next}, []int64{from + int64(k)})); err != nil {
			t.Fatal(err)
		}
	}
}
