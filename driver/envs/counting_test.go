package envs

import (
	"errors"
	"slices"
	"testing"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

func countActions(vals ...int64) map[string]*tensor.Dense {
	return map[string]*tensor.Dense{CountActionName: tensor.New(tensor.WithBacking(vals), tensor.WithShape(len(vals)))}
}

func TestCounting(t *testing.T) {
	c, err := NewCounting(1, 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Step(countActions(0, 0)); !errors.Is(err, driver.ErrNotReset) {
		t.Errorf("step before reset: %v", err)
	}
	ts, err := c.Reset()
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		st        tensorbuf.StepType
		count, ep int64
		rew, disc float32
	}
	got := [2][]row{}
	record := func(ts *driver.TimeStep) {
		cnt, ep := ts.Observation[CountName].Int64s(), ts.Observation[EpisodeStepName].Int64s()
		for r := range 2 {
			got[r] = append(got[r], row{ts.StepType[r], cnt[r], ep[r], ts.Reward[r], ts.Discount[r]})
		}
	}
	record(ts)
	for k := int64(1); k <= 5; k++ {
		if ts, err = c.Step(countActions(10*k, 10*k+1)); err != nil {
			t.Fatal(err)
		}
		record(ts)
	}
	F, M, L := tensorbuf.First, tensorbuf.Mid, tensorbuf.Last
	want := [2][]row{
		{{F, 0, 0, 0, 1}, {L, 1, 1, 10, 0}, {F, 2, 0, 0, 1}, {L, 3, 1, 30, 0}, {F, 4, 0, 0, 1}, {L, 5, 1, 50, 0}},
		{{F, 0, 0, 0, 1}, {M, 1, 1, 11, 1}, {M, 2, 2, 21, 1}, {L, 3, 3, 31, 0}, {F, 4, 0, 0, 1}, {M, 5, 1, 51, 1}},
	}
	for r := range 2 {
		if !slices.Equal(got[r], want[r]) {
			t.Errorf("row %d:\n%v\nwant\n%v", r, got[r], want[r])
		}
	}
	// Row 0 is at Last: its action is ignored, even out of range; row 1's
	// out-of-range action is refused and nothing changes.
	cur := c.Current()
	_, err = c.Step(countActions(-1, CountingMaxAction+1))
	var re *driver.RowError
	if !errors.Is(err, driver.ErrSpec) || !errors.As(err, &re) || re.Row != 1 || c.Current() != cur || c.count[0] != 5 {
		t.Errorf("out-of-range action: %v", err)
	}
	if _, err := c.Step(countActions(-1, CountingMaxAction)); err != nil {
		t.Errorf("ignored action on a boundary row: %v", err)
	}
	for _, lengths := range [][]int{nil, {3, 0}, {-1}} {
		if _, err := NewCounting(lengths...); !errors.Is(err, driver.ErrConfig) {
			t.Errorf("lengths %v: %v", lengths, err)
		}
	}
}

func TestNoop(t *testing.T) {
	e, err := NewNoop(3)
	if err != nil {
		t.Fatal(err)
	}
	act, _ := driver.NewTensors(e.ActionSpec(), 3)
	if _, err := e.Step(act); !errors.Is(err, driver.ErrNotReset) {
		t.Errorf("step before reset: %v", err)
	}
	ts, err := e.Reset()
	if err != nil || !slices.Equal(ts.StepType, []tensorbuf.StepType{0, 0, 0}) {
		t.Fatalf("reset: %v %v", ts, err)
	}
	for range 3 {
		ts, err = e.Step(act)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ts.StepType, []tensorbuf.StepType{1, 1, 1}) || !slices.Equal(ts.Discount, []float32{1, 1, 1}) ||
			!slices.Equal(ts.Reward, []float32{0, 0, 0}) {
			t.Errorf("step: %v %v %v", ts.StepType, ts.Reward, ts.Discount)
		}
	}
	if _, err := e.Step(nil); !errors.Is(err, driver.ErrSpec) {
		t.Errorf("missing action: %v", err)
	}
	if _, err := NewNoop(0); !errors.Is(err, driver.ErrConfig) {
		t.Errorf("zero envs: %v", err)
	}
}
