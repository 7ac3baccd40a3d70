package remote

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestRunReturnsWhenConsumerGone checks Run's promise: it returns an
// error when its durable consumer is deleted, or when the client's
// connection is closed, and nil when its context ends.
func TestRunReturnsWhenConsumerGone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		end  func(nc *nats.Conn, js jetstream.JetStream, cancel context.CancelFunc) error
		want error
	}{
		{"context done", func(_ *nats.Conn, _ jetstream.JetStream, cancel context.CancelFunc) error { cancel(); return nil }, nil},
		{"consumer deleted", func(_ *nats.Conn, js jetstream.JetStream, _ context.CancelFunc) error {
			return js.DeleteConsumer(context.Background(), DefaultStream, DefaultDurable)
		}, jetstream.ErrConsumerNotFound},
		{"connection closed", func(nc *nats.Conn, _ jetstream.JetStream, _ context.CancelFunc) error { nc.Close(); return nil }, nats.ErrConnectionClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startServer(t, t.TempDir(), -1)
			defer srv.Shutdown()
			nc, js := connect(t, srv.ClientURL())
			ensure(t, js, StreamConfig{Memory: true})
			buf := newTestBuffer(t, 2, 16)
			in, err := NewIngester(context.Background(), IngesterConfig{JetStream: js, Buffer: buf})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- in.Run(ctx) }()
			publishSteps(t, js, buf, newGen(2), 4, 4, false)
			waitFor(t, 10*time.Second, "the steps", func() bool { return in.Stats().Steps == 8 })
			if err := tc.end(nc, js, cancel); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
					t.Fatalf("Run returned %v, want %v", err, tc.want)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("Run did not return within 20 s")
			}
		})
	}
}
