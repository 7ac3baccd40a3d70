package remote

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestOutageDoesNotIdleActors stops the server for longer than ActorIdle
// between two frames of each of two live actors:
//
//	A0 E0 | server down 2.5 s | E1 A1
//
// Stored times jump by the outage, so E1 used to make A look idle (in
// stream time) and free its rows just before A1 came: A joined again and
// A1 was written after a cut (or waited GapTimeout). The stream clock
// counts at most a second of a pause, and the wall-clock check counts no
// time before the stream was last found unreachable: nobody leaves.
func TestOutageDoesNotIdleActors(t *testing.T) {
	dir, port := t.TempDir(), freePorts(t, 1)[0]
	srv := startServer(t, dir, port)
	defer func() { srv.Shutdown() }()
	_, js := connect(t, srv.ClientURL())
	ensure(t, js, StreamConfig{})
	buf := newEpisodeBuffer(t, 4, 64)
	s, _ := NewSchema(buf.Fields())
	const a, e = 0xa, 0xe
	in, _ := runIngester(t, IngesterConfig{JetStream: js, Buffer: buf, NewObserver: episodeFactory, ActorIdle: 2 * time.Second, GapTimeout: 10 * time.Second})
	pub := func(actor uint64, data []byte) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err := js.Publish(ctx, fmt.Sprintf("%s.%016x", DefaultSubject, actor), data)
			cancel()
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	fa, fe := handFramesOf(s, a, 2), handFramesOf(s, e, 2)
	pub(a, fa[0])
	pub(e, fe[0])
	waitFor(t, 10*time.Second, "A0 and E0", func() bool { return in.Stats().Steps == 16 })
	srv.Shutdown()
	srv.WaitForShutdown()
	time.Sleep(2500 * time.Millisecond)
	srv = startServer(t, dir, port)
	pub(e, fe[1])
	pub(a, fa[1])
	waitFor(t, 20*time.Second, "E1 and A1", func() bool { return in.Stats().Steps >= 32 })
	time.Sleep(100 * time.Millisecond)
	st := in.Stats()
	want := IngesterStats{Frames: 4, Steps: 32, Bytes: st.Bytes, Duplicates: st.Duplicates, DupFrames: st.DupFrames, Joins: 2}
	if st != want {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
}
