package remote

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestHeldFramesBoundedByReorderBytes stores frames 1..200 of an actor (1
// row, 1 step: 100-byte frames) before frame 0, on a consumer with
// Prefetch 1. The held-frame limit used to be 64 x Prefetch frames
// whatever ReorderBytes allowed, with MaxAckPending 68 x Prefetch: 64
// frames were held, 4 handed back filled the consumer's window, and
// frame 0 could not come before GapTimeout (then its steps were lost as
// duplicates after a cut). Now ReorderBytes alone bounds the held frames
// (each counted at least heldFrameCost bytes) and MaxAckPending leaves
// room for as many besides 4 x Prefetch: all 200 are held, none handed
// back, and all 201 steps are written exactly once.
func TestHeldFramesBoundedByReorderBytes(t *testing.T) {
	t.Parallel()
	const actor, n = 0x5, 201
	srv := startServer(t, t.TempDir(), -1)
	defer srv.Shutdown()
	_, js := connect(t, srv.ClientURL())
	ensure(t, js, StreamConfig{Memory: true})
	buf := newTestBuffer(t, 1, 256)
	s, _ := NewSchema(buf.Fields())
	frames := make([][]byte, n)
	for seq := range frames {
		frames[seq] = smallFrame(s, actor, uint64(seq))
	}
	if len(frames[0]) >= heldFrameCost {
		t.Fatalf("frames of %d bytes, want small ones", len(frames[0]))
	}
	in, _ := runIngester(t, IngesterConfig{JetStream: js, Buffer: buf, Prefetch: 1, GapDelay: 20 * time.Millisecond, GapTimeout: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := in.cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := (64<<20)/heldFrameCost + 4; info.Config.MaxAckPending != want {
		t.Fatalf("MaxAckPending %d, want %d", info.Config.MaxAckPending, want)
	}
	subject := DefaultSubject + ".0000000000000005"
	for _, f := range append(frames[1:], frames[0]) {
		if _, err := js.Publish(ctx, subject, f); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 20*time.Second, "every step", func() bool { return in.Stats().Steps == n })
	st := in.Stats()
	if st.Frames != n || st.Duplicates != 0 || st.Gaps != 0 || st.Dead != 0 || buf.Cursor(0) != n {
		t.Fatalf("stats %+v, cursor %d: want %d frames and steps exactly once", st, buf.Cursor(0), n)
	}
	if st.Held != n-1 || st.Deferred != 0 {
		t.Fatalf("held %d frames, handed back %d: want %d held, none handed back", st.Held, st.Deferred, n-1)
	}
}

// smallFrame returns frame seq of an actor with 1 row and 1 step (step
// seq; 100 bytes).
func smallFrame(s *Schema, actor, seq uint64) []byte {
	cols := fullCols(s, 1, 1)
	cols[len(cols)-2][3], cols[len(cols)-1][3] = 0x3f, 0x3f // reward, discount 0.5
	data, _ := s.encode(nil, nil, false, actor, seq, 1, []int{0}, []int64{int64(seq)}, 1, cols)
	return data
}

// dataMsg is a message with only its data (hold reads nothing else).
type dataMsg struct {
	jetstream.Msg
	data []byte
}

func (m dataMsg) Data() []byte { return m.data }

// TestHoldCountsEachFrameAtLeastHeldFrameCost holds small frames until
// the reorder bound refuses one: each 100-byte frame counts
// heldFrameCost, so ReorderBytes of 10 x heldFrameCost holds 10, not 25;
// releasing one makes room for one more.
func TestHoldCountsEachFrameAtLeastHeldFrameCost(t *testing.T) {
	s, err := NewSchema(testFields())
	if err != nil {
		t.Fatal(err)
	}
	reorder := 10 * heldFrameCost
	in := &Ingester{cfg: IngesterConfig{ReorderBytes: reorder}, schema: s, ro: newReorderState(reorder)}
	if in.ro.maxHeld != 10 {
		t.Fatalf("maxHeldFrames(%d) = %d, want 10", reorder, in.ro.maxHeld)
	}
	a := &actorState{id: 5, seqKnown: true}
	var f Frame
	held := 0
	for seq := uint64(1); seq <= 30; seq++ {
		data := smallFrame(s, 5, seq)
		if err := s.Decode(data, &f); err != nil {
			t.Fatal(err)
		}
		if !in.hold(a, dataMsg{data: data}, seq, &f, time.Now()) {
			break
		}
		held++
	}
	if held != 10 || in.ro.heldBytes != 10*heldFrameCost || len(a.held) != 10 {
		t.Fatalf("held %d frames (%d bytes counted, %d in the actor), want 10 (%d bytes)", held, in.ro.heldBytes, len(a.held), 10*heldFrameCost)
	}
	if _, _, err := in.unhold(a); err != nil {
		t.Fatal(err)
	}
	data := smallFrame(s, 5, 40)
	if err := s.Decode(data, &f); err != nil {
		t.Fatal(err)
	}
	if !in.hold(a, dataMsg{data: data}, 40, &f, time.Now()) || in.ro.heldBytes != 10*heldFrameCost {
		t.Fatalf("after a release: not held again, or %d bytes counted", in.ro.heldBytes)
	}
	if maxHeldFrames(1<<40) != 1<<24 || maxHeldFrames(heldFrameCost-1) != 0 {
		t.Fatalf("maxHeldFrames bounds: %d, %d", maxHeldFrames(1<<40), maxHeldFrames(heldFrameCost-1))
	}
}
