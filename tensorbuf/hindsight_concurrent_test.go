package tensorbuf_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// TestHindsightConcurrent runs a collector adding walker episodes to
// three rows of a small ring while relabelers generate, sample (uniform,
// prioritized, at sample time) and n-step samplers read, and checks every
// sample for consistency: the next observation is the step after the
// observation (marker + 1), and a relabeled transition's goal, reward and
// IsDone agree with the reward and is-done functions. Run with -race.
func TestHindsightConcurrent(t *testing.T) {
	const rows, capacity, adds = 3, 24, 400
	b, err := tensorbuf.New(tensorbuf.Config{NumEnvs: rows, Capacity: capacity, Fields: goalFields, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	tbl, err := b.NewTable(tensorbuf.TableConfig{Name: "per", Selector: tensorbuf.Prioritized, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	endCfg := lineConfig(tensorbuf.GoalFuture, 2, tensorbuf.RelabelAtEpisodeEnd)
	endCfg.Table = tbl
	atEnd, err := tensorbuf.NewHindsight(b, endCfg)
	if err != nil {
		t.Fatal(err)
	}
	atSample, err := tensorbuf.NewHindsight(b, lineConfig(tensorbuf.GoalRandom, 3, tensorbuf.RelabelAtSample))
	if err != nil {
		t.Fatal(err)
	}
	w, err := b.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 4)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // collector: episodes of 1-6 transitions, goal 50+row
		defer wg.Done()
		defer cancel()
		rng := rand.New(rand.NewPCG(1, 2))
		pos := make([]float32, rows)
		next := make([]tensorbuf.StepType, rows)
		for i := range adds {
			s := &tensorbuf.Step{Values: map[string]*tensor.Dense{}}
			obs := make([]float32, 0, 3*rows)
			act := make([]int32, rows)
			for r := range rows {
				st := next[r]
				nt, rew, disc := tensorbuf.Mid, float32(-1), float32(1)
				switch {
				case st == tensorbuf.Last:
					nt, rew = tensorbuf.First, 0
				case rng.IntN(5) == 0:
					nt = tensorbuf.Last
				}
				s.StepType, s.NextStepType = append(s.StepType, st), append(s.NextStepType, nt)
				s.Reward, s.Discount = append(s.Reward, rew), append(s.Discount, disc)
				obs = append(obs, pos[r], float32(50+r), float32(100+i))
				next[r] = nt
				pos[r]++
			}
			s.Values["obs"] = tensor.New(tensor.WithShape(rows, 3), tensor.WithBacking(obs))
			s.Values["act"] = tensor.New(tensor.WithShape(rows), tensor.WithBacking(act))
			if err := w.Add(s); err != nil {
				errc <- err
				return
			}
		}
	}()
	check := func(what string, tr *tensorbuf.Transitions, relabeled []bool) error {
		if _, err := tr.Host(); err != nil {
			return err
		}
		for i, x := range readHindsight(t, tr, relabeled) {
			if x.marker != float64(100+x.step) || x.nextPos != x.pos+1 {
				return fmt.Errorf("%s %d: %+v mixes steps", what, i, x)
			}
			if x.goal != x.nextGoal {
				return fmt.Errorf("%s %d: goals %v and %v differ", what, i, x.goal, x.nextGoal)
			}
			if !x.relabeled {
				continue
			}
			wantR, wantD := -1.0, 0.0
			if x.nextPos == x.goal {
				wantR, wantD = 0, 1
			}
			if x.reward != wantR || (wantD == 1) != (x.done == 1) {
				return fmt.Errorf("%s %d: relabeled %+v", what, i, x)
			}
		}
		return nil
	}
	wg.Add(2)
	go func() { // relabeler and prioritized learner
		defer wg.Done()
		ht := new(tensorbuf.HindsightTransitions)
		for ctx.Err() == nil {
			if _, err := atEnd.Generate(); err != nil {
				errc <- err
				return
			}
			err := atEnd.SampleTable(ctx, ht, 8)
			if errors.Is(err, tensorbuf.ErrEmpty) {
				continue
			}
			if err == nil {
				err = check("table sample", &ht.Transitions, ht.Relabeled)
			}
			if err == nil {
				if err = atEnd.SampleInto(ht, 8); err == nil {
					err = check("uniform sample", &ht.Transitions, ht.Relabeled)
				}
			}
			if err == nil && len(ht.Keys) > 0 {
				prios := make([]float64, len(ht.Keys))
				for i := range prios {
					prios[i] = float64(1 + i%3)
				}
				// Items the ring evicted meanwhile are unknown by now.
				if err = tbl.UpdatePriorities(ht.Keys, prios); errors.Is(err, tensorbuf.ErrUnknownKey) {
					err = nil
				}
			}
			if err != nil && !errors.Is(err, tensorbuf.ErrEmpty) && !errors.Is(err, context.Canceled) {
				errc <- err
				return
			}
		}
	}()
	go func() { // sample-time relabeling and n-step samples
		defer wg.Done()
		ht := new(tensorbuf.HindsightTransitions)
		tr := new(tensorbuf.Transitions)
		for ctx.Err() == nil {
			err := atSample.SampleInto(ht, 8)
			if err == nil {
				err = check("sample-time", &ht.Transitions, ht.Relabeled)
			}
			if err == nil {
				err = b.SampleNStepInto(tr, 8, tensorbuf.NStepOptions{Horizon: 3, DiscountFactor: 0.5})
			}
			if err != nil && !errors.Is(err, tensorbuf.ErrEmpty) {
				errc <- err
				return
			}
		}
	}()
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if _, err := atEnd.Generate(); err != nil {
		t.Fatal(err)
	}
	if n := atEnd.Stored(); n == 0 {
		t.Fatal("nothing relabeled")
	}
	exp, rel, err := atEnd.AllExperiences(tensorbuf.ExportBatch)
	if err != nil {
		t.Fatal(err)
	}
	if err := check("export", exp[0], rel); err != nil {
		t.Fatal(err)
	}
}
