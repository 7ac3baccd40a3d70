package remote

import (
	"testing"
	"time"

	"github.com/trajring/trajring/tensorbuf"
)

// TestBigFramesNotDropped: frames of ~530 KB, more than 64 MiB of them
// at once. With a prefetch bounded by frames (256 x 530 KB) the client
// dropped frames as a slow consumer and they came back only after
// AckWait (30 s); bounded by bytes, all are ingested at once.
func TestBigFramesNotDropped(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir(), -1)
	defer srv.Shutdown()
	_, js := connect(t, srv.ClientURL())
	ensure(t, js, StreamConfig{Memory: true})
	fields := benchFields(1024)
	buf, err := tensorbuf.New(tensorbuf.Config{NumEnvs: 8, Capacity: 64, Fields: fields})
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	const steps = 16 * 140 // 140 frames of 8 rows x 16 steps
	p, err := NewPublisher(PublisherConfig{JetStream: js, Fields: fields, StepsPerFrame: 16, Context: testCtx(t)})
	if err != nil {
		t.Fatal(err)
	}
	g := newGenWidth(8, 1024)
	for range steps {
		if err := p.Observe(g.next()); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	if b := p.Stats().Bytes; b < 70<<20 {
		t.Fatalf("published %d bytes; the test needs more than 64 MiB", b)
	}
	in, _ := runIngester(t, IngesterConfig{JetStream: js, Buffer: buf})
	// Under AckWait (30 s): a dropped frame would come back only after it.
	waitFor(t, 25*time.Second, "every big frame ingested", func() bool { return in.Stats().Steps == 8*steps })
	if st := in.Stats(); st.Duplicates != 0 || st.Frames != steps/16 {
		t.Fatalf("stats %+v", st)
	}
}

// TestPublisherInFlightBytes: the unacknowledged bytes never exceed
// MaxInFlightBytes (one frame is always let through).
func TestPublisherInFlightBytes(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir(), -1)
	defer srv.Shutdown()
	_, js := connect(t, srv.ClientURL())
	ensure(t, js, StreamConfig{Memory: true})
	fields := benchFields(256)
	tests := []struct {
		name  string
		bound int // in frames
	}{{"one frame", 1}, {"three frames", 3}, {"below one frame", 0}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := NewSchema(fields)
			frame := headerSize + int(s.bodySize(4, 8))
			bound := max(tc.bound*frame, frame/2)
			p, err := NewPublisher(PublisherConfig{JetStream: js, Fields: fields, StepsPerFrame: 8, MaxInFlightBytes: bound, Context: testCtx(t)})
			if err != nil {
				t.Fatal(err)
			}
			g := newGenWidth(4, 256)
			peak := 0
			for range 8 * 40 {
				if err := p.Observe(g.next()); err != nil {
					t.Fatal(err)
				}
				p.mu.Lock()
				peak = max(peak, p.qbytes)
				p.mu.Unlock()
			}
			if err := p.Flush(); err != nil {
				t.Fatal(err)
			}
			if want := max(bound, frame); peak > want || peak == 0 {
				t.Fatalf("peak in-flight bytes %d, bound %d (frames of %d)", peak, want, frame)
			}
			if st := p.Stats(); st.Frames != 40 || st.Retries != 0 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}
