package observer_test

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/observer"
	"github.com/trajring/trajring/tensorbuf"
)

// runMetricsLog runs the deterministic collection of TestMetrics (Counting
// rows with episodes of 2 and 3 steps, the reward at iteration n being n)
// for 8 iterations into m, then flushes it. Episodes end at t1 (row 0,
// return 1, length 2), t2 (row 1, 3, 3), t4 (row 0, 7, 2), t6 (row 1, 15,
// 3) and t7 (row 0, 13, 2); the cumulative env steps after t0..t7 are 2,
// 4, 5, 6, 8, 9, 11, 12.
func runMetricsLog(t *testing.T, m *observer.MetricsLog) {
	t.Helper()
	env := counting(t, 2, 3)
	d, err := driver.NewStepDriver(env, newIterPolicy(t, env), 100, driver.WithObservers(m), driver.WithMaxIterations(8))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Run(t.Context(), nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := m.Flush(); err != nil {
		t.Fatal(err)
	}
}

func TestMetricsLogOutput(t *testing.T) {
	for _, tc := range []struct {
		name   string
		format observer.MetricsFormat
		every  int64
		want   string
	}{
		{"jsonl every 4", observer.JSONLines, 4, `{"env_steps":4,"episodes":1,"average_return":1,"average_episode_length":2}
{"env_steps":8,"episodes":3,"average_return":3.6666666666666665,"average_episode_length":2.3333333333333335}
{"env_steps":12,"episodes":5,"average_return":7.8,"average_episode_length":2.4}
`},
		{"jsonl every 5, flushed", 0, 5, `{"env_steps":5,"episodes":2,"average_return":2,"average_episode_length":2.5}
{"env_steps":11,"episodes":4,"average_return":6.5,"average_episode_length":2.5}
{"env_steps":12,"episodes":5,"average_return":7.8,"average_episode_length":2.4}
`},
		{"csv every 4", observer.CSV, 4, `env_steps,episodes,average_return,average_episode_length
4,1,1,2
8,3,3.6666666666666665,2.3333333333333335
12,5,7.8,2.4
`},
		{"csv every 5, flushed", observer.CSV, 5, `env_steps,episodes,average_return,average_episode_length
5,2,2,2.5
11,4,6.5,2.5
12,5,7.8,2.4
`},
		{"csv every 100, flush only", observer.CSV, 100, `env_steps,episodes,average_return,average_episode_length
12,5,7.8,2.4
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			m, err := observer.NewMetricsLog(&out, observer.MetricsLogConfig{BatchSize: 2, Every: tc.every, Format: tc.format})
			if err != nil {
				t.Fatal(err)
			}
			runMetricsLog(t, m)
			if got := out.String(); got != tc.want {
				t.Errorf("output:\n%s\nwant:\n%s", got, tc.want)
			}
			if got := m.Records(); got != int64(strings.Count(tc.want, "\n")-b2i(tc.format == observer.CSV)) {
				t.Errorf("Records() = %d", got)
			}
			// A second Flush with nothing new writes nothing.
			n := out.Len()
			if err := m.Flush(); err != nil || out.Len() != n {
				t.Errorf("second Flush: %v, %d more bytes", err, out.Len()-n)
			}
		})
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestMetricsLogWindowAndSlog(t *testing.T) {
	var out, logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	m, err := observer.NewMetricsLog(&out, observer.MetricsLogConfig{BatchSize: 2, Every: 6, Window: 2, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	runMetricsLog(t, m)
	// Window 2: the last two episodes (t1, t2 at 6 steps; t6, t7 at 12).
	want := `{"env_steps":6,"episodes":2,"average_return":2,"average_episode_length":2.5}
{"env_steps":12,"episodes":5,"average_return":14,"average_episode_length":2.5}
`
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
	wantLogs := `level=INFO msg=metrics env_steps=6 episodes=2 average_return=2 average_episode_length=2.5
level=INFO msg=metrics env_steps=12 episodes=5 average_return=14 average_episode_length=2.5
`
	if logs.String() != wantLogs {
		t.Errorf("logs:\n%s\nwant:\n%s", logs.String(), wantLogs)
	}
	if got := m.Record(); got != (observer.MetricsRecord{EnvSteps: 12, Episodes: 5, AverageReturn: 14, AverageEpisodeLength: 2.5}) {
		t.Errorf("Record() = %+v", got)
	}
}

// failWriter fails its first n writes.
type failWriter struct {
	n   int
	buf bytes.Buffer
}

func (w *failWriter) Write(p []byte) (int, error) {
	if w.n > 0 {
		w.n--
		return 0, errors.New("disk full")
	}
	return w.buf.Write(p)
}

func TestMetricsLogWriteFailure(t *testing.T) {
	w := &failWriter{n: 1}
	m, err := observer.NewMetricsLog(w, observer.MetricsLogConfig{BatchSize: 1, Every: 1})
	if err != nil {
		t.Fatal(err)
	}
	feedOne := func(st, next tensorbuf.StepType) error {
		tr := trajectory([]tensorbuf.StepType{st}, []tensorbuf.StepType{next}, []int64{0})
		tr.Reward[0] = 1
		return m.Observe(tr)
	}
	if err := feedOne(F, M); !errors.Is(err, observer.ErrMetricsWrite) {
		t.Fatalf("first write: %v, want observer.ErrMetricsWrite", err)
	}
	if m.Records() != 0 || m.Record().EnvSteps != 1 {
		t.Fatalf("after a failed write: %d records, %+v", m.Records(), m.Record())
	}
	// The next step writes again.
	if err := feedOne(M, L); err != nil {
		t.Fatal(err)
	}
	want := `{"env_steps":2,"episodes":1,"average_return":2,"average_episode_length":2}` + "\n"
	if w.buf.String() != want || m.Records() != 1 {
		t.Errorf("output %q (%d records), want %q", w.buf.String(), m.Records(), want)
	}
}

func TestMetricsLogRefuses(t *testing.T) {
	var out bytes.Buffer
	for _, tc := range []struct {
		name string
		w    io.Writer
		cfg  observer.MetricsLogConfig
	}{
		{"nil writer", nil, observer.MetricsLogConfig{BatchSize: 1, Every: 1}},
		{"batch 0", &out, observer.MetricsLogConfig{Every: 1}},
		{"every 0", &out, observer.MetricsLogConfig{BatchSize: 1}},
		{"negative window", &out, observer.MetricsLogConfig{BatchSize: 1, Every: 1, Window: -1}},
		{"bad format", &out, observer.MetricsLogConfig{BatchSize: 1, Every: 1, Format: 7}},
	} {
		if _, err := observer.NewMetricsLog(tc.w, tc.cfg); !errors.Is(err, observer.ErrConfig) {
			t.Errorf("%s: %v, want observer.ErrConfig", tc.name, err)
		}
	}
	m, err := observer.NewMetricsLog(&out, observer.MetricsLogConfig{BatchSize: 2, Every: 1})
	if err != nil {
		t.Fatal(err)
	}
	// One row instead of two, then an invalid step type: refused, nothing
	// counted, nothing written.
	bad := []*driver.Trajectory{
		trajectory([]tensorbuf.StepType{F}, []tensorbuf.StepType{M}, []int64{0}),
		trajectory([]tensorbuf.StepType{F, 9}, []tensorbuf.StepType{M, M}, []int64{0, 0}),
		nil,
	}
	for i, tr := range bad {
		if err := m.Observe(tr); !errors.Is(err, observer.ErrTrajectory) {
			t.Errorf("bad trajectory %d: %v, want observer.ErrTrajectory", i, err)
		}
	}
	if m.Record() != (observer.MetricsRecord{}) || out.Len() != 0 {
		t.Errorf("after refused trajectories: %+v, output %q", m.Record(), out.String())
	}
}

func TestParseMetricsFormat(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want observer.MetricsFormat
		ok   bool
	}{{"jsonl", observer.JSONLines, true}, {"json", observer.JSONLines, true}, {"csv", observer.CSV, true}, {"xml", 0, false}, {"", 0, false}} {
		got, err := observer.ParseMetricsFormat(tc.in)
		if got != tc.want || (err == nil) != tc.ok || (!tc.ok && !errors.Is(err, observer.ErrConfig)) {
			t.Errorf("ParseMetricsFormat(%q) = %v, %v", tc.in, got, err)
		}
		if tc.ok && got.String() != map[observer.MetricsFormat]string{observer.JSONLines: "jsonl", observer.CSV: "csv"}[got] {
			t.Errorf("%v.String() = %q", got, got.String())
		}
	}
	if s := observer.MetricsFormat(7).String(); s != "MetricsFormat(7)" {
		t.Errorf("String of an unknown format: %q", s)
	}
}
