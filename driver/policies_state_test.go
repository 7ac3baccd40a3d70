package driver_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/tensorbuf"
)

// actions returns the actions of n calls on a 16-row time step.
func actions(t *testing.T, p *driver.EpsilonGreedyPolicy, n int) []int64 {
	t.Helper()
	var out []int64
	for range n {
		ps, err := p.Action(timeStep(16), nil)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ps.Action["a"].Int64s()...)
	}
	return out
}

// TestEpsilonGreedyStateResumes: a policy restored from MarshalBinary
// (into one of another seed) continues exactly the original's actions and
// clock; a malformed state is refused and changes nothing.
func TestEpsilonGreedyStateResumes(t *testing.T) {
	sched := driver.LinearSchedule{Start: 1, End: 0.1, Steps: 200}
	q := tableQ([]float32{0, 1, 0, 0})
	orig, err := driver.NewEpsilonGreedyPolicy("a", tensorbuf.Int64, 4, q, sched, 5)
	if err != nil {
		t.Fatal(err)
	}
	actions(t, orig, 3)
	state, err := orig.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	want := actions(t, orig, 10)
	restored, err := driver.NewEpsilonGreedyPolicy("a", tensorbuf.Int64, 4, q, sched, 99)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]byte{nil, state[:7], state[:len(state)-1], append([]byte{1}, state...)} {
		if err := restored.UnmarshalBinary(bad); !errors.Is(err, driver.ErrConfig) {
			t.Errorf("state of %d bytes: %v, want ErrConfig", len(bad), err)
		}
	}
	if restored.Steps() != 0 {
		t.Fatalf("a refused state changed the clock to %d", restored.Steps())
	}
	if err := restored.UnmarshalBinary(state); err != nil {
		t.Fatal(err)
	}
	if restored.Steps() != 48 || restored.Epsilon() != sched.At(48) {
		t.Fatalf("restored clock %d, epsilon %v; want 48, %v", restored.Steps(), restored.Epsilon(), sched.At(48))
	}
	if got := actions(t, restored, 10); !slices.Equal(got, want) {
		t.Fatalf("restored actions differ:\n got %v\nwant %v", got, want)
	}
}
