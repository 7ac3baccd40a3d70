package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/tensorbuf"
)

func TestPercentile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6} // 1..10 shuffled
	for _, tc := range []struct {
		p    float64
		want float64
	}{
		{0, 1}, {1, 1}, {10, 1}, {11, 2}, {50, 5}, {51, 6}, {90, 9}, {99, 10}, {100, 10},
	} {
		got, err := Percentile(xs, tc.p)
		if err != nil || got != tc.want {
			t.Errorf("Percentile(1..10, %v) = %v, %v; want %v", tc.p, got, err, tc.want)
		}
	}
	if xs[0] != 5 {
		t.Errorf("Percentile sorted its input in place: %v", xs)
	}
	if _, err := Percentile(nil, 50); !errors.Is(err, ErrNoSamples) {
		t.Errorf("Percentile(nil) error = %v, want ErrNoSamples", err)
	}
	for _, p := range []float64{-1, 101, math.NaN()} {
		if _, err := Percentile(xs, p); err == nil {
			t.Errorf("Percentile(p=%v) gave no error", p)
		}
	}
}

func TestSummarise(t *testing.T) {
	ns := make([]float64, 200)
	for i := range ns {
		ns[i] = float64(200 - i) // 200..1
	}
	s, err := Summarise(ns)
	if err != nil {
		t.Fatal(err)
	}
	want := Stats{Ops: 200, P50: 100, P99: 198, Mean: 100.5, Min: 1}
	if s != want {
		t.Errorf("Summarise = %+v, want %+v", s, want)
	}
	if _, err := Summarise(nil); !errors.Is(err, ErrNoSamples) {
		t.Errorf("Summarise(nil) error = %v", err)
	}
}

func TestRatioAndGBps(t *testing.T) {
	for _, tc := range []struct{ a, b, want float64 }{
		{10, 5, 2}, {5, 10, 0.5}, {0, 5, 0}, {5, 0, 0}, {-1, 5, 0},
	} {
		if got := Ratio(tc.a, tc.b); got != tc.want {
			t.Errorf("Ratio(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
	// 2·256·1·3093 bytes in 500 µs is 3.167232 GB/s.
	if got := GBps(2*256*3093, 500e3); math.Abs(got-3.167232) > 1e-12 {
		t.Errorf("GBps = %v, want 3.167232", got)
	}
	if got := GBps(100, 0); got != 0 {
		t.Errorf("GBps(t=0) = %v, want 0", got)
	}
}

func TestRowFinish(t *testing.T) {
	r := Row{B: 256, L: 4, S: 109,
		Ours:   Stats{P50: 1000},
		Plain:  &Stats{P50: 250},
		Gather: &Stats{P50: 800},
		Peers:  []PeerResult{{Name: PeerNumPy, Stats: Stats{P50: 3000}}, {Name: PeerTorch, Stats: Stats{P50: 500}}},
	}
	r.finish()
	if r.Bytes != 2*256*4*109 {
		t.Errorf("Bytes = %d", r.Bytes)
	}
	if r.GBps != float64(r.Bytes)/1000 || r.PlainGBps != float64(r.Bytes)/250 || r.GatherGBps != float64(r.Bytes)/800 {
		t.Errorf("GB/s ours %v plain %v gather %v", r.GBps, r.PlainGBps, r.GatherGBps)
	}
	if r.FracPlain != 0.25 || r.FracGather != 0.8 {
		t.Errorf("fractions %v %v, want 0.25 0.8", r.FracPlain, r.FracGather)
	}
	if r.StepsPerSec != 1024e6 {
		t.Errorf("StepsPerSec = %v, want 1.024e9", r.StepsPerSec)
	}
	if p := r.Peer(PeerNumPy); p == nil || p.Ratio != 3 {
		t.Errorf("numpy ratio = %+v, want 3", p)
	}
	if p := r.Peer(PeerTorch); p == nil || p.Ratio != 0.5 {
		t.Errorf("torch ratio = %+v, want 0.5", p)
	}
	if r.Peer("nope") != nil {
		t.Error("Peer(unknown) != nil")
	}
}

func TestReportJSONShape(t *testing.T) {
	rep := &Report{
		Date: time.Date(2026, 11, 30, 12, 34, 56, 0, time.UTC), Mode: "quick", Backend: "cpu",
		Machine: Machine{Host: "ci/box", CPU: "Test CPU", Cores: 2},
		Rows: []Row{{Scenario: "s", Group: "sample", B: 2, L: 1, S: 10, Ours: Stats{Ops: 3, P50: 100},
			Gather: &Stats{P50: 50}, Peers: []PeerResult{{Name: PeerNumPy, Stats: Stats{P50: 300}}}}},
		Skipped: []Skip{{What: "torch peers", Reason: "import torch failed"}},
	}
	rep.Rows[0].finish()
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := json.Unmarshal(buf.Bytes(), &generic); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"date", "mode", "backend", "machine", "rows", "skipped"} {
		if _, ok := generic[k]; !ok {
			t.Errorf("report JSON lacks %q", k)
		}
	}
	row := generic["rows"].([]any)[0].(map[string]any)
	for _, k := range []string{"scenario", "b", "l", "step_bytes", "bytes_per_op", "ours", "gbps", "gather_copy", "frac_of_gather_copy", "peers", "steps_per_sec"} {
		if _, ok := row[k]; !ok {
			t.Errorf("row JSON lacks %q", k)
		}
	}
	if _, ok := row["plain_copy"]; ok {
		t.Error("row JSON has plain_copy though none was measured")
	}
	if got := row["ours"].(map[string]any)["p50_ns"]; got != 100.0 {
		t.Errorf("ours.p50_ns = %v", got)
	}
	back, err := ReadJSON(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if back.Rows[0].Peer(PeerNumPy).Ratio != 3 || back.Rows[0].FracGather != 0.5 || back.Machine.CPU != "Test CPU" {
		t.Errorf("round trip lost data: %+v", back.Rows[0])
	}
	if got, want := rep.FileName(), "ci_box-20261130-123456.json"; got != want {
		t.Errorf("FileName = %q, want %q", got, want)
	}
}

func TestMarkdown(t *testing.T) {
	rep := &Report{Mode: "quick", Backend: "cpu", Machine: Machine{CPU: "X", Cores: 2},
		Rows:    []Row{{Scenario: "sample x", B: 256, L: 1, S: 3093, Capacity: 1 << 20, Ours: Stats{P50: 200e3, P99: 400e3}, Gather: &Stats{P50: 150e3}, Peers: []PeerResult{{Name: PeerNumPy, Stats: Stats{P50: 500e3}}}}},
		Skipped: []Skip{{What: "torch peers", Reason: "no torch"}}}
	rep.Rows[0].finish()
	var buf bytes.Buffer
	if err := rep.Markdown(&buf); err != nil {
		t.Fatal(err)
	}
	md := buf.String()
	for _, want := range []string{"| sample x | 256 | 1 | 3093 | 1.05M | 200 | 400 |", "| 75% |", "| 2.50× |", "skipped torch peers: no torch"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestLayoutBytes(t *testing.T) {
	if got := Pixels().StepBytes(); got != 3092 {
		t.Errorf("Pixels().StepBytes() = %d, want 3092 (issue 5)", got)
	}
	if got := LowDim().StepBytes(); got != 108 {
		t.Errorf("LowDim().StepBytes() = %d, want 108", got)
	}
	// obs twice, action, reward, discount, is_done.
	if got := transitionBytes(Pixels()); got != 3072*2+4+4+4+1 {
		t.Errorf("transitionBytes(Pixels()) = %d", got)
	}
}

func TestStepTypes(t *testing.T) {
	// Row 0: phase t % 100; row 1 is shifted by 7.
	for _, tc := range []struct {
		r        int
		t        int64
		st, next tensorbuf.StepType
	}{
		{0, 0, tensorbuf.First, tensorbuf.Mid},
		{0, 98, tensorbuf.Mid, tensorbuf.Last},
		{0, 99, tensorbuf.Last, tensorbuf.First},
		{0, 100, tensorbuf.First, tensorbuf.Mid},
		{1, 93, tensorbuf.First, tensorbuf.Mid},
		{1, 92, tensorbuf.Last, tensorbuf.First},
	} {
		st, next := stepTypeAt(tc.r, tc.t)
		if st != tc.st || next != tc.next {
			t.Errorf("stepTypeAt(%d, %d) = %v %v, want %v %v", tc.r, tc.t, st, next, tc.st, tc.next)
		}
	}
}

// TestStepperMatchesStepTypes: the stepper's steps, for consecutive times
// (its phase counters) and after jumps (its divisions), have stepTypeAt's
// step types, reward 1 and discount 0 exactly before a Last step.
func TestStepperMatchesStepTypes(t *testing.T) {
	rows := []int{0, 3, 5}
	st := newStepper(Pixels(), rows)
	times := []int64{0, 1, 2, 250, 251, 97, 98, 99, 100, 101, 7}
	for k := int64(300); k < 520; k++ {
		times = append(times, k)
	}
	for _, tt := range times {
		s := st.at(tt)
		for i, r := range rows {
			want, wantNext := stepTypeAt(r, tt)
			disc := float32(1)
			if wantNext == tensorbuf.Last {
				disc = 0
			}
			if s.StepType[i] != want || s.NextStepType[i] != wantNext || s.Reward[i] != 1 || s.Discount[i] != disc {
				t.Fatalf("at(%d) row %d: %v %v %v %v, want %v %v 1 %v", tt, r,
					s.StepType[i], s.NextStepType[i], s.Reward[i], s.Discount[i], want, wantNext, disc)
			}
		}
	}
}

func TestDrawCount(t *testing.T) {
	for _, tc := range []struct {
		perOp int
		ring  int64
		want  int
	}{
		{256, 1 << 20, 4096},  // 1M rows at 256 per op
		{2048, 1 << 20, 512},  // B=32 L=64
		{65536, 1 << 20, 16},  // B=65536
		{256, 10000, 40},      // a 10k ring: every row, ceil(10000/256)
		{1 << 21, 1 << 20, 1}, // one op covers it
		{1, 100 << 20, 4096},  // bounded
	} {
		if got := drawCount(tc.perOp, tc.ring); got != tc.want {
			t.Errorf("drawCount(%d, %d) = %d, want %d", tc.perOp, tc.ring, got, tc.want)
		}
	}
}

// TestRecorderGroupSize: the calls per latency sample come from the
// fastest warm-up call, so a cold first call of a fast operation does
// not make every sample a single call (which times the clock with it);
// operations slower than minSample, or run without warm-up, are timed
// one call per sample.
func TestRecorderGroupSize(t *testing.T) {
	for _, tc := range []struct {
		name    string
		warmup  int
		slowAll bool // every call sleeps, not only the first
		grouped bool
	}{
		{"cold first call", 3, false, true},
		{"every call slow", 3, true, false},
		{"no warm-up", 0, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			op := func() error {
				calls++
				if calls == 1 || tc.slowAll {
					time.Sleep(2 * minSample)
				}
				return nil
			}
			var r recorder
			if _, _, err := r.run(op, Budget{MinOps: 1, MaxOps: 1, Warmup: tc.warmup}); err != nil {
				t.Fatal(err)
			}
			if tc.grouped && (r.inner < 2 || r.inner > int(minSample)+1) {
				t.Fatalf("%d calls per sample, want 2..%d", r.inner, int(minSample)+1)
			}
			if !tc.grouped && r.inner != 1 {
				t.Fatalf("%d calls per sample, want 1", r.inner)
			}
		})
	}
}

// TestRoundUseTurns: a turn takes at most sliceTime and a sliceParts-th
// of the round's operations, at least one, and a contestant is done once
// it has run MaxOps operations, or MinOps and the round's time.
func TestRoundUseTurns(t *testing.T) {
	per := Budget{Time: 10 * time.Millisecond, MinOps: 3, MaxOps: 80, Warmup: 2}
	for _, tc := range []struct {
		name    string
		use     roundUse
		ok      bool
		time    time.Duration
		maxOps  int
		warmups int
	}{
		{"first turn", roundUse{}, true, sliceTime, 10, 2},
		{"late in the round", roundUse{ops: 75, spent: 9500 * time.Microsecond}, true, 500 * time.Microsecond, 5, 2},
		{"time used, MinOps not", roundUse{ops: 2, spent: 20 * time.Millisecond}, true, 0, 10, 2},
		{"time and MinOps used", roundUse{ops: 3, spent: 10 * time.Millisecond}, false, 0, 0, 0},
		{"MaxOps used", roundUse{ops: 80, spent: time.Millisecond}, false, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, ok := tc.use.next(per)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			if b.Time != tc.time || b.MaxOps != tc.maxOps || b.MinOps != 1 || b.Warmup != tc.warmups {
				t.Fatalf("turn %+v, want time %v, %d ops at most, 1 at least, %d warm-up", b, tc.time, tc.maxOps, tc.warmups)
			}
		})
	}
}

// TestMeasureTakesTurns: ours and a peer alternate within every round, in
// turns of a sliceParts-th of the round's operations, and each runs its
// budget.
func TestMeasureTakesTurns(t *testing.T) {
	var log []byte
	r := &runner{opt: Options{Progress: io.Discard}, be: cpu.New(), rep: &Report{},
		bud: Budget{Time: time.Second, MinOps: 3, MaxOps: 320, Warmup: 2}, rounds: 2}
	sc := &scenario{row: Row{Scenario: "turns"},
		ours:  func() error { log = append(log, 'o'); return nil },
		peers: []op{{"peer", func() error { log = append(log, 'p'); return nil }}}}
	if err := r.measure(sc); err != nil {
		t.Fatal(err)
	}
	if o, p := bytes.Count(log, []byte("o")), bytes.Count(log, []byte("p")); o != 320+2 || p != 320+2 {
		t.Fatalf("%d calls of ours and %d of the peer, want 322 each (320 timed, 2 warm-up)", o, p)
	}
	switches := 0
	for i := 1; i < len(log); i++ {
		if log[i] != log[i-1] {
			switches++
		}
	}
	// Two rounds of 160 operations each, in turns of 20: 8 turns each a
	// round, 32 turns in all.
	if switches != 31 {
		t.Fatalf("%d switches between ours and the peer, want 31:\n%s", switches, log)
	}
	if row := r.rep.Rows[0]; row.Ours.Ops != 320 || row.Peers[0].Stats.Ops != 320 {
		t.Fatalf("ops %d and %d, want 320", row.Ours.Ops, row.Peers[0].Stats.Ops)
	}
}
