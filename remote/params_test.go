package remote

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"
)

// TestParamsRoundTrip: versions increase, a stale or repeated version is
// refused and changes nothing, and Latest returns the newest only when it
// is above what the actor has.
func TestParamsRoundTrip(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir(), -1)
	defer srv.Shutdown()
	_, js := connect(t, srv.ClientURL())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := OpenParams(ctx, js, "", 1, false); err == nil {
		t.Fatal("opening a bucket the learner has not created succeeded")
	}
	learner, err := OpenParams(ctx, js, "", 1, true)
	if err != nil {
		t.Fatal(err)
	}
	actor, err := OpenParams(ctx, js, "", 1, false)
	if err != nil {
		t.Fatal(err)
	}
	if v, _, ok, err := actor.Latest(ctx, 0); err != nil || ok || v != 0 {
		t.Fatalf("empty bucket: v%d ok %v err %v", v, ok, err)
	}
	steps := []struct {
		name    string
		put     func() (uint64, error)
		version uint64 // newest after the step
		blob    string
		fails   bool
	}{
		{"Put first", func() (uint64, error) { return learner.Put(ctx, []byte("one")) }, 1, "one", false},
		{"Put next", func() (uint64, error) { return learner.Put(ctx, []byte("two")) }, 2, "two", false},
		{"Publish a jump", func() (uint64, error) { return 7, learner.Publish(ctx, 7, []byte("seven")) }, 7, "seven", false},
		{"Publish stale", func() (uint64, error) { return 5, learner.Publish(ctx, 5, []byte("five")) }, 7, "seven", true},
		{"Publish same", func() (uint64, error) { return 7, learner.Publish(ctx, 7, []byte("again")) }, 7, "seven", true},
		{"Put after", func() (uint64, error) { return learner.Put(ctx, []byte("eight")) }, 8, "eight", false},
	}
	for _, st := range steps {
		v, err := st.put()
		if st.fails != (err != nil) || (err != nil && !errors.Is(err, ErrConfig)) {
			t.Fatalf("%s: v%d err %v, want failure %v (ErrConfig)", st.name, v, err, st.fails)
		}
		if !st.fails && v != st.version {
			t.Fatalf("%s: stored v%d, want v%d", st.name, v, st.version)
		}
		got, err := actor.Version(ctx)
		if err != nil || got != st.version {
			t.Fatalf("%s: newest v%d (%v), want v%d", st.name, got, err, st.version)
		}
		for _, have := range []uint64{0, st.version - 1} {
			v, blob, ok, err := actor.Latest(ctx, have)
			if err != nil || !ok || v != st.version || !bytes.Equal(blob, []byte(st.blob)) {
				t.Fatalf("%s: Latest(%d) = v%d %q ok %v err %v, want v%d %q", st.name, have, v, blob, ok, err, st.version, st.blob)
			}
		}
		if _, _, ok, err := actor.Latest(ctx, st.version); ok || err != nil {
			t.Fatalf("%s: Latest(newest) ok %v err %v, want nothing newer", st.name, ok, err)
		}
	}
}
