package remote

import (
	"testing"

	"github.com/trajring/trajring/tensorbuf"
)

// BenchmarkIngestWrite measures the ingester's decode and write of one
// low-dim frame (8 rows x 32 steps of a 4-float observation and an int64
// action) into a buffer through the default observer, without a server:
// the learner-side CPU cost of a frame, per row step: through
// observer.Shared (an ObserverFactory) and through the default path
// (plain.go).
func BenchmarkIngestWrite(b *testing.B) {
	b.Run("observer", func(b *testing.B) { benchIngestWrite(b, PlainObserver) })
	b.Run("plain", func(b *testing.B) { benchIngestWrite(b, nil) })
}

func benchIngestWrite(b *testing.B, factory ObserverFactory) {
	buf, err := tensorbuf.New(tensorbuf.Config{NumEnvs: benchRows, Capacity: 4096, Fields: benchFields(4)})
	if err != nil {
		b.Fatal(err)
	}
	defer buf.Close()
	s, err := NewSchema(buf.Fields())
	if err != nil {
		b.Fatal(err)
	}
	in := &Ingester{cfg: IngesterConfig{Buffer: buf, NewObserver: factory, Rows: []int{0, 1, 2, 3, 4, 5, 6, 7}}, schema: s}
	a := &actorState{rows: in.cfg.Rows, next: make([]int64, benchRows)}
	if err := in.open(a); err != nil {
		b.Fatal(err)
	}
	defer a.obs.Close()
	g := newGenWidth(benchRows, 4)
	frames := make([][]byte, 64)
	rows := []int{0, 1, 2, 3, 4, 5, 6, 7}
	for i := range frames {
		cols := make([][]byte, len(s.colBytes))
		first := make([]int64, benchRows)
		for r := range first {
			first[r] = int64(i * benchK)
		}
		for range benchK {
			t := g.next()
			cols[0] = append(cols[0], t.Action["action"].Header.Raw...)
			cols[1] = append(cols[1], t.Observation["obs"].Header.Raw...)
			for r := range benchRows {
				cols[2] = append(cols[2], byte(t.StepType[r]), 0, 0, 0)
				cols[3] = append(cols[3], byte(t.NextStepType[r]), 0, 0, 0)
				cols[4] = append(cols[4], 0, 0, 0x80, 0x3f)
				cols[5] = append(cols[5], 0, 0, 0x80, 0x3f)
			}
		}
		frames[i], _ = s.encode(nil, nil, false, 1, uint64(i), benchRows, rows, first, benchK, cols)
	}
	var f Frame
	b.ResetTimer()
	for i := range b.N {
		j := i % len(frames)
		if j == 0 {
			clear(a.next) // the frames again, as new steps
		}
		if err := s.Decode(frames[j], &f); err != nil {
			b.Fatal(err)
		}
		in.write(a, &f)
	}
	b.StopTimer()
	if in.stats.ObserveErr != 0 || in.stats.Steps != int64(b.N)*benchRows*benchK {
		b.Fatalf("stats %+v after %d frames", in.stats, b.N)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(in.stats.Steps), "ns/row-step")
}
