package remote

import (
	"context"
	"encoding/binary"
	"math"
	"testing"
	"time"
)

// TestPublisherReusesFrameMemory publishes 40 frames with at most 2 in
// flight, so that acknowledged frames' memory is reused for later ones,
// and checks every stored frame's content: frame sequence, rows, first
// steps and each step's observation (row, step) and action (step % 2).
func TestPublisherReusesFrameMemory(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir(), -1)
	defer srv.Shutdown()
	_, js := connect(t, srv.ClientURL())
	ensure(t, js, StreamConfig{Memory: true})
	const rows, k, frames = 3, 4, 40
	p, err := NewPublisher(PublisherConfig{JetStream: js, Fields: testFields(), StepsPerFrame: k, MaxInFlight: 2, Context: testCtx(t)})
	if err != nil {
		t.Fatal(err)
	}
	g := newGen(rows)
	for range k * frames {
		if err := p.Observe(g.next()); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Frames != frames || st.Retries != 0 {
		t.Fatalf("publisher stats %+v, want %d frames, no retries", st, frames)
	}
	if len(p.spare) == 0 {
		t.Fatal("no frame memory kept for reuse")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	var f Frame
	le := binary.LittleEndian
	for seq := uint64(1); seq <= frames; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Schema().Decode(m.Data, &f); err != nil {
			t.Fatal(err)
		}
		if f.Seq != seq-1 || f.K != k || len(f.Rows) != rows {
			t.Fatalf("stream message %d: frame %d, %d steps, rows %v", seq, f.Seq, f.K, f.Rows)
		}
		for i, r := range f.Rows {
			first := int64(seq-1) * k
			if r != i || f.First[i] != first {
				t.Fatalf("frame %d: row %d first step %d, want row %d from %d", f.Seq, r, f.First[i], i, first)
			}
			for j := range k {
				step := first + int64(j)
				n := j*rows + i
				obs := f.Cols[1][16*n:]
				if gr, gs := math.Float32frombits(le.Uint32(obs)), math.Float32frombits(le.Uint32(obs[4:])); gr != float32(r) || gs != float32(step) {
					t.Fatalf("frame %d row %d step %d: observation (%v, %v)", f.Seq, r, step, gr, gs)
				}
				if a := int64(le.Uint64(f.Cols[0][8*n:])); a != step%2 {
					t.Fatalf("frame %d row %d step %d: action %d", f.Seq, r, step, a)
				}
			}
		}
	}
}
