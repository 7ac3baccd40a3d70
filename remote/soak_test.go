package remote

import (
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// TestSoak (TRAJRING_REMOTE_SOAK=2m, any time.ParseDuration) runs actors
// that come and go (some leave with a bye, some are killed) against a
// learner while the NATS server is restarted now and then, for the given
// time, then checks that the buffer holds exactly the steps the actors
// published: nothing lost, nothing written twice, no gap.
// TRAJRING_REMOTE_SOAK_NO_RESTART=1 leaves the server running.
//
// It used to lose steps under a sustained backlog: with rows short, the
// frames of actors waiting for rows were handed back to the stream and
// filled the consumer's window, and ActorIdle in wall time freed the rows
// of live actors whose frames were behind; both now wait in the ingester
// or are measured in stream time (see reorder.go). With the reorder
// buffer full, frames handed back were then given up as gaps after
// GapTimeout and dropped as duplicates when they came again (24 rows,
// 10 s: 748,756 of 762,642 steps, 36 gaps); a handed-back frame is now
// always waited for (TestScarceRowsLoseNothing). With server restarts
// (2 min, 24 rows, 28 restarts of up to 7 s) it wrote 30 steps twice: a
// frame redelivered after its acknowledgement was lost in a restart made
// a killed actor, freed as idle, join again (TestIdleActorLateCopy); and
// live actors were freed as idle across an outage, then cut
// (TestOutageDoesNotIdleActors). Held frames were limited to 64 x
// Prefetch (16,384) whatever ReorderBytes allowed, reached at about 12 MB
// of these small frames: 30 s, 24 rows handed back 6,130 frames (17,025
// with 7 server restarts), each redelivered a second later; with
// ReorderBytes alone bounding them (heldFrameCost), none (exact both
// times; TestHeldFramesBoundedByReorderBytes).
func TestSoak(t *testing.T) {
	env := os.Getenv("TRAJRING_REMOTE_SOAK")
	if env == "" {
		t.Skip("set TRAJRING_REMOTE_SOAK=2m")
	}
	dur, err := time.ParseDuration(env)
	if err != nil || dur <= 0 {
		t.Fatalf("TRAJRING_REMOTE_SOAK=%q: want a duration such as 2m", env)
	}
	opts := &server.Options{ServerName: "soak", Host: "127.0.0.1", Port: freePorts(t, 1)[0], JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true}
	srv, err := StartServer(opts.Clone())
	if err != nil {
		t.Fatal(err)
	}
	var srvMu sync.Mutex
	defer func() {
		srvMu.Lock()
		srv.Shutdown()
		srvMu.Unlock()
	}()
	_, js := connect(t, srv.ClientURL())
	ensure(t, js, StreamConfig{MaxBytes: 4 << 30})
	// Rows are scarce (TRAJRING_REMOTE_SOAK_ROWS, default 24): about 9
	// actors a second are killed and keep their rows (2.5 on average) for
	// ActorIdle (3 s) of stream time, besides the live ones, so actors
	// queue for rows and their frames fill the reorder buffer: frames are
	// handed back (Nak) and must still be written exactly once.
	rows := 24
	if v := os.Getenv("TRAJRING_REMOTE_SOAK_ROWS"); v != "" {
		if rows, err = strconv.Atoi(v); err != nil || rows < 4 {
			t.Fatalf("TRAJRING_REMOTE_SOAK_ROWS=%q: want a number of rows, at least 4", v)
		}
	}
	buf := newEpisodeBuffer(t, rows, 4096)
	in, stop := runIngester(t, IngesterConfig{JetStream: js, Buffer: buf, NewObserver: episodeFactory, ActorIdle: 3 * time.Second, GapTimeout: 10 * time.Second})
	end := time.Now().Add(dur)
	var published, actorsRun, killed atomic.Int64
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for time.Now().Before(end) && !t.Failed() {
				_, ajs := connect(t, srv.ClientURL())
				p, err := NewPublisher(PublisherConfig{JetStream: ajs, Fields: buf.Fields(), StepsPerFrame: 1 + rng.IntN(16), MaxInFlight: 32, AckTimeout: time.Second, Context: testCtx(t)})
				if err != nil {
					t.Error(err)
					return
				}
				g := newGen(1 + rng.IntN(4))
				n := 50 + rng.IntN(2000)
				for i := range n {
					if err := p.Observe(g.next()); err != nil {
						t.Error(err)
						return
					}
					if i%16 == 0 {
						time.Sleep(time.Millisecond)
					}
				}
				if err := p.Flush(); err != nil {
					t.Error(err)
					return
				}
				published.Add(sum(p.Published()))
				actorsRun.Add(1)
				if rng.IntN(3) == 0 {
					killed.Add(1) // no bye: its rows are freed after ActorIdle
					continue
				}
				if err := p.Close(); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	restarts := 0
	for os.Getenv("TRAJRING_REMOTE_SOAK_NO_RESTART") == "" && time.Now().Before(end) && !t.Failed() {
		time.Sleep(time.Duration(2+rand.IntN(4)) * time.Second)
		if !time.Now().Before(end) {
			break
		}
		srvMu.Lock()
		srv.Shutdown()
		srv.WaitForShutdown()
		time.Sleep(200 * time.Millisecond)
		srv, err = StartServer(opts.Clone())
		srvMu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		restarts++
	}
	wg.Wait()
	want := published.Load()
	deadline := time.Now().Add(60 * time.Second)
	for buf.Stats().Steps < want {
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s the buffer holds %d of %d published steps; ingester %+v", buf.Stats().Steps, want, in.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	st := in.Stats()
	stop()
	t.Logf("%v: %d actors (%d killed), %d server restarts, %d steps; ingester %+v", dur, actorsRun.Load(), killed.Load(), restarts, want, st)
	if got := buf.Stats().Steps; got != want || st.Gaps != 0 || st.Dead != 0 {
		t.Fatalf("buffer wrote %d steps, actors published %d; gaps %d, dead %d", got, want, st.Gaps, st.Dead)
	}
}
