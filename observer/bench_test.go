package observer_test

import (
	"fmt"
	"testing"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/observer"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// BenchmarkObserve measures the cost of one batched Observe (one step of
// every row) for each item-writing observer, next to a plain
// tensorbuf.Writer.Add of the same step: the observer's own overhead is
// the difference. Episodes are 10 steps (boundary included) on every row.
func BenchmarkObserve(b *testing.B) {
	for _, envs := range []int{1, 16, 256} {
		st := make([]tensorbuf.StepType, envs)
		trajs := make([]*driver.Trajectory, 10)
		for k := range trajs {
			typ, next := M, M
			switch k {
			case 0:
				typ = F
			case 8:
				next = L
			case 9:
				typ, next = L, F
			}
			for i := range st {
				st[i] = typ
			}
			nx := make([]tensorbuf.StepType, envs)
			for i := range nx {
				nx[i] = next
			}
			trajs[k] = trajectory(st, nx, make([]int64, envs))
		}
		mk := map[string]func(*tensorbuf.Buffer) (driver.Observer, error){
			"TrajectorySequence": func(buf *tensorbuf.Buffer) (driver.Observer, error) {
				return observer.NewTrajectorySequence(buf, observer.SequenceConfig{Tables: []string{"q"}, SequenceLength: 4})
			},
			"AddTrajectory": func(buf *tensorbuf.Buffer) (driver.Observer, error) {
				return observer.NewAddTrajectory(buf, observer.AddTrajectoryConfig{
					Tables: []observer.TableSequence{{Table: "q", SequenceLength: 4}}, PadEndOfEpisodes: true, TileEndOfEpisodes: true})
			},
			"AddEpisode": func(buf *tensorbuf.Buffer) (driver.Observer, error) {
				return observer.NewAddEpisode(buf, observer.AddEpisodeConfig{Tables: []string{"q"}, MaxSequenceLength: 10})
			},
			"WriterAdd": func(buf *tensorbuf.Buffer) (driver.Observer, error) {
				w, err := buf.NewWriter()
				if err != nil {
					return nil, err
				}
				return driver.ObserverFunc(func(t *driver.Trajectory) error {
					return w.Add(&tensorbuf.Step{StepType: t.StepType, NextStepType: t.NextStepType, Reward: t.Reward, Discount: t.Discount,
						Values: map[string]*tensor.Dense{"count": t.Observation["count"], "episode_step": t.Observation["episode_step"], "action": t.Action["action"]}})
				}), nil
			},
		}
		for _, name := range []string{"WriterAdd", "TrajectorySequence", "AddTrajectory", "AddEpisode"} {
			b.Run(fmt.Sprintf("%s/envs=%d", name, envs), func(b *testing.B) {
				buf := newBuffer(b, envs, 128, "q") // small: the tables reach their steady size fast
				o, err := mk[name](buf)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				k := 0
				for b.Loop() {
					if err := o.Observe(trajs[k]); err != nil {
						b.Fatal(err)
					}
					if k++; k == len(trajs) {
						k = 0
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(envs), "ns/env-step")
			})
		}
	}
}
