package tensorbuf_test

import (
	"fmt"

	"github.com/trajring/trajring/tensorbuf"
)

// Import shuffled experiences (S, A, R, S', D), as MATLAB's append takes
// them, built from plain slices: an experience that does not continue its
// row's previous one (same observation as its next observation, episode
// not over) is stored as a fragment of its own (two steps), and
// AllExperiences gives every one back as appended.
func ExampleExperienceOptions() {
	b, err := tensorbuf.New(tensorbuf.Config{NumEnvs: 1, Capacity: 16, Fields: []tensorbuf.Field{
		{Name: "obs", Role: tensorbuf.Observation, DType: tensorbuf.Float32, Shape: []int{2}},
		{Name: "act", Role: tensorbuf.Action, DType: tensorbuf.Int64},
	}})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	ew, err := b.NewExperienceWriterOptions(tensorbuf.ExperienceOptions{AnyOrder: true})
	if err != nil {
		panic(err)
	}
	for _, x := range []struct {
		s, next []float32
		a       int64
		r       float32
		d       uint8
	}{
		{[]float32{5, 5}, []float32{6, 6}, 1, 0.5, tensorbuf.Running},
		{[]float32{6, 6}, []float32{7, 7}, 1, 2, tensorbuf.Running},    // continues the first: one step
		{[]float32{1, 1}, []float32{2, 2}, 0, 1, tensorbuf.Terminated}, // a fragment: two steps
	} {
		e, err := b.NewExperience(tensorbuf.ExperienceSlices{
			Observation:     map[string]any{"obs": x.s},
			Action:          map[string]any{"act": []int64{x.a}},
			NextObservation: map[string]any{"obs": x.next},
			Reward:          []float32{x.r},
			IsDone:          []uint8{x.d},
		})
		if err != nil {
			panic(err)
		}
		if err := ew.Append(e); err != nil {
			panic(err)
		}
	}
	all, err := b.AllExperiences(tensorbuf.ExportBatch)
	if err != nil {
		panic(err)
	}
	defer all[0].Release()
	h, err := all[0].Host()
	if err != nil {
		panic(err)
	}
	defer h.Release()
	fmt.Println("steps stored:", b.Cursor(0))
	fmt.Println("obs:", h.Observation["obs"].Data())
	fmt.Println("next obs:", h.NextObservation["obs"].Data())
	fmt.Println("reward:", h.Reward.Data(), "is_done:", h.IsDone.Data())
	// Output:
	// steps stored: 5
	// obs: [5 5 6 6 1 1]
	// next obs: [6 6 7 7 2 2]
	// reward: [0.5 2 1] is_done: [0 0 1]
}
