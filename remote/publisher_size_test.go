package remote

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// noJetStream is a JetStream client that must not be used: a test that
// expects a refusal before anything is published panics if it is.
type noJetStream struct{ jetstream.JetStream }

// TestPublisherRefusesFramesPastTheLimit: an actor whose frames would
// exceed MaxFrameBytes is refused at its first Observe, before anything is
// published; before, it published frames every learner dead-letters.
func TestPublisherRefusesFramesPastTheLimit(t *testing.T) {
	for _, tc := range []struct {
		rows, k int
		ok      bool
	}{
		{100, 1 << 20, false}, {1, 1 << 40, false}, {100, 8, true},
	} {
		g := newGen(tc.rows)
		p, err := NewPublisher(PublisherConfig{JetStream: noJetStream{}, Fields: testFields(), StepsPerFrame: tc.k})
		if err != nil {
			t.Fatal(err)
		}
		err = p.Observe(g.next())
		if tc.ok {
			if err != nil {
				t.Errorf("%d rows x %d steps: %v", tc.rows, tc.k, err)
			}
			continue
		}
		if !errors.Is(err, ErrConfig) {
			t.Errorf("%d rows x %d steps: %v, want ErrConfig", tc.rows, tc.k, err)
		}
		if st := p.Stats(); st.Steps != 0 || st.Frames != 0 {
			t.Errorf("a refused Observe counted %+v", st)
		}
		if err := p.Observe(g.next()); !errors.Is(err, ErrConfig) {
			t.Errorf("second Observe: %v, want ErrConfig again (nothing changed)", err)
		}
	}
}
