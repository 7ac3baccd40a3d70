package tensorbuf_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/trajring/trajring/tensorbuf"
)

// FuzzOps drives a buffer and one table through a sequence of operations
// decoded from the fuzzer's bytes (valid and invalid adds, including steps
// that contradict the previous step and so make cuts; valid and invalid
// inserts; table samples; priority updates; deletes; direct samples of
// sequences, transitions and n-step transitions; exports) and checks every
// result against the slice-of-steps model of helpers_test.go:
//   - no sample, window or transition reaches outside [oldest, cursor) of
//     its row, crosses a cut, or starts at a boundary step where it must not;
//   - no item whose first step was overwritten comes back, and a table
//     sample returns exactly the model's items (FIFO/LIFO order,
//     MaxTimesSampled counts applied one draw after another, prioritized
//     probabilities p_i / sum p);
//   - a call the model says is invalid fails with a sentinel error and
//     changes nothing; a valid one succeeds;
//   - AllExperiences returns exactly the model's transitions, time-major.
//
// `go test` runs the seed corpus; `go test -fuzz FuzzOps -fuzztime 30s`
// explores (.ci/run does, bounded).
func FuzzOps(f *testing.F) {
	for _, seed := range fuzzSeeds {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// A hang is a failure too: the fuzzer keeps an input that crashes its
		// worker, so panic (from another goroutine, which nothing recovers)
		// with the goroutines' stacks.
		watchdog := time.AfterFunc(20*time.Second, func() {
			buf := make([]byte, 1<<20)
			panic(fmt.Sprintf("FuzzOps: input %x still running after 20 s\n%s", data, buf[:runtime.Stack(buf, true)]))
		})
		defer watchdog.Stop()
		runOps(t, &byteReader{b: data})
	})
}

// fuzzSeeds hold the boundary cases of the reliability issue and a few
// plain runs.
var fuzzSeeds = [][]byte{
	// plain: adds, inserts, samples, export.
	seed(2, 4, tensorbuf.Uniform, 0, 0, op(opAdd, 3), op(opAdd, 3), op(opAdd, 3), op(opInsert, 0, 0, 1, 0, 1),
		op(opSample, 2), op(opDirect, 1, 2), op(opNStep, 3, 2), op(opExport)),
	// Pad math.MaxInt: Len+Pad overflows; must be refused.
	seed(1, 4, tensorbuf.Prioritized, 0, 0, op(opAdd, 1), op(opAdd, 1), op(opInsert, 0, 0, 1, 3, 1), op(opSample, 0)),
	// Len math.MaxInt, Pad math.MaxInt/2, negative and huge sizes.
	seed(1, 4, tensorbuf.Uniform, 0, 0, op(opAdd, 1), op(opInsert, 0, 0, 3, 5, 1), op(opInsert, 0, 0, 4, 0, 1),
		op(opInsert, 0, 0, 1, 6, 1), op(opInsert, 0, 0, 7, 0, 1), op(opInsert, 0, 0, 1, 7, 1)),
	// NaN and Inf rewards and discounts, then valid adds.
	seed(1, 3, tensorbuf.Uniform, 0, 0, op(opBadAdd, 0, 0), op(opBadAdd, 0, 1), op(opBadAdd, 0, 2), op(opBadAdd, 0, 3),
		op(opAdd, 1), op(opAdd, 1), op(opExport)),
	// priorities 1e308, 1e308, 1: the sum tree must stay exact or refuse.
	seed(1, 4, tensorbuf.Prioritized, 0, 0, op(opAdd, 1), op(opAdd, 1), op(opAdd, 1), op(opInsert, 0, 0, 1, 0, 6),
		op(opInsert, 0, 0, 1, 0, 6), op(opInsert, 0, 0, 1, 0, 1), op(opSample, 3), op(opUpdate, 2, 6), op(opSample, 3)),
	// priorities NaN, +Inf, -1 on insert and update.
	seed(1, 4, tensorbuf.Prioritized, 0, 0, op(opAdd, 1), op(opInsert, 0, 0, 1, 0, 4), op(opInsert, 0, 0, 1, 0, 5),
		op(opInsert, 0, 0, 1, 0, 7), op(opInsert, 0, 0, 1, 0, 2), op(opUpdate, 0, 4), op(opUpdate, 0, 5), op(opUpdate, 0, 7),
		op(opUpdate, 0, 0), op(opSample, 1)),
	// contradicting step types make cuts; export and direct samples must not cross them.
	seed(2, 6, tensorbuf.FIFO, 2, 0, op(opCut, 3, 0, 0), op(opAdd, 3), op(opCut, 1, 0, 0), op(opAdd, 3),
		op(opCut, 2, 0, 2), op(opAdd, 3), op(opInsert, 1, 0, 2, 0, 1), op(opSample, 1), op(opDirect, 3, 2), op(opExport)),
	// FIFO with MaxTimesSampled and MaxSize, wrap-around evictions.
	seed(2, 3, tensorbuf.FIFO, 2, 2, op(opAdd, 3), op(opAdd, 3), op(opInsert, 0, 0, 1, 0, 1), op(opInsert, 1, 0, 1, 0, 1),
		op(opInsert, 0, 1, 1, 0, 1), op(opSample, 3), op(opAdd, 3), op(opAdd, 3), op(opAdd, 3), op(opSample, 1)),
	// LIFO, deletes of known and unknown keys.
	seed(1, 5, tensorbuf.LIFO, 0, 0, op(opAdd, 1), op(opAdd, 1), op(opInsert, 0, 0, 1, 0, 1), op(opInsert, 0, 1, 1, 0, 1),
		op(opDelete, 9), op(opSample, 2), op(opDelete, 1), op(opSample, 2)),
	// boundary sizes for direct samples.
	seed(1, 2, tensorbuf.Uniform, 0, 0, op(opAdd, 1), op(opAdd, 1), op(opDirect, 255, 255), op(opDirect, 0, 0),
		op(opNStep, 255, 255)),
}

// opBytes is the size of one encoded op: its code and up to six arguments.
const opBytes = 7

// op encodes one op with its arguments.
func op(code byte, args ...byte) []byte {
	b := make([]byte, opBytes)
	b[0] = code
	copy(b[1:], args)
	return b
}

// seed encodes a buffer of envs rows of the given capacity, a table with
// the given selector, MaxTimesSampled and MaxSize, then the ops.
func seed(envs, capacity byte, sel tensorbuf.Selector, maxTimes, maxSize byte, ops ...[]byte) []byte {
	b := []byte{envs - 1, capacity - 2, byte(sel), maxTimes, maxSize}
	for _, o := range ops {
		b = append(b, o...)
	}
	return b
}

// The ops runOps decodes.
const (
	opAdd    = iota // add one valid step to a subset of rows
	opCut           // add steps whose step types contradict the previous ones
	opBadAdd        // an add the buffer must refuse
	opInsert        // insert an item (possibly invalid)
	opSample        // sample the table
	opUpdate        // update a priority (possibly invalid)
	opDelete        // delete a key (possibly unknown)
	opDirect        // direct sequence and transition samples
	opNStep         // direct n-step sample
	opExport        // AllExperiences in every mode
	numOps
)

// byteReader hands out the fuzzer's bytes, then zeros.
type byteReader struct {
	b []byte
}

// block returns the next n bytes, zero-padded.
func (r *byteReader) block(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = r.next()
	}
	return out
}

func (r *byteReader) next() int {
	if len(r.b) == 0 {
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return int(v)
}

// boundary are the interesting values an int argument can take.
var boundary = []int{0, 1, 2, math.MaxInt, math.MinInt, math.MaxInt / 2, -1, 1 << 40}

// fuzzPriorities are the interesting priorities.
var fuzzPriorities = []float64{0, 1, 2, 0.5, math.NaN(), math.Inf(1), 1e308, -2, tensorbuf.DefaultPriority, 3}

// fuzzTable is the model of the table.
type fuzzTable struct {
	sel      tensorbuf.Selector
	maxTimes int
	maxSize  int
	items    map[uint64]tensorbuf.Item
	times    map[uint64]int
	order    []uint64 // live keys, oldest first
	maxPrio  float64  // the running maximum of positive priorities given (0: none yet)
}

// note raises the running maximum priority (see tensorbuf.DefaultPriority).
func (ft *fuzzTable) note(p float64) { ft.maxPrio = max(ft.maxPrio, p) }

// defaultPriority is what an item inserted with DefaultPriority gets.
func (ft *fuzzTable) defaultPriority() float64 {
	if ft.maxPrio == 0 {
		return 1
	}
	return ft.maxPrio
}

func (ft *fuzzTable) remove(k uint64) {
	delete(ft.items, k)
	delete(ft.times, k)
	ft.order = slices.DeleteFunc(ft.order, func(x uint64) bool { return x == k })
}

func (ft *fuzzTable) sum() float64 {
	s := 0.0
	for _, k := range ft.order {
		s += ft.items[k].Priority
	}
	return s
}

// budget is the samples left before MaxTimesSampled removes every item.
func (ft *fuzzTable) budget() int {
	if ft.maxTimes == 0 {
		return math.MaxInt
	}
	b := 0
	for _, k := range ft.order {
		b += ft.maxTimes - ft.times[k]
	}
	return b
}

// cut reports whether step s of row r is followed by a step that
// contradicts its next step type.
func (m *model) cut(r int, s int64) bool {
	return s+1 < m.cursor(r) && m.steps[r][s].next != m.steps[r][s+1].st
}

// transition reports whether the transition at step s of row r exists.
func (m *model) transition(r int, s int64) bool {
	return s >= m.oldest(r) && s+1 < m.cursor(r) && m.steps[r][s].st != tensorbuf.Last && !m.cut(r, s)
}

func runOps(t *testing.T, in *byteReader) {
	ctx := context.Background()
	envs, capacity := 1+in.next()%3, 2+in.next()%6
	ft := &fuzzTable{
		sel:      tensorbuf.Selector(in.next() % 4),
		maxTimes: in.next() % 4,
		maxSize:  in.next() % 6,
		items:    map[uint64]tensorbuf.Item{},
		times:    map[uint64]int{},
	}
	b := newBuffer(t, envs, capacity)
	m := newModel(envs, capacity)
	w, err := b.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	a := &adder{t: t, m: m, w: w}
	next := make([]tensorbuf.StepType, envs) // per row: the step type that continues its episode
	tbl, err := b.NewTable(tensorbuf.TableConfig{Name: "t", Selector: ft.sel, MaxTimesSampled: ft.maxTimes, MaxSize: ft.maxSize, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	rowsOf := func(mask int) []int {
		var rows []int
		for r := range envs {
			if mask&(1<<r) != 0 {
				rows = append(rows, r)
			}
		}
		if len(rows) == 0 {
			rows = []int{mask % envs}
		}
		return rows
	}
	evict := func() {
		for _, k := range slices.Clone(ft.order) {
			if it := ft.items[k]; it.Start < m.oldest(it.Row) {
				ft.remove(k)
			}
		}
	}
	for op := 0; len(in.b) > 0 && op < 300; op++ {
		blk := in.block(opBytes)
		code := blk[0] % numOps
		arg := blk[1:]
		switch code {
		case opAdd, opCut:
			rows := rowsOf(arg[0])
			meta := make([]rawStep, len(rows))
			for i, r := range rows {
				s := rawStep{st: next[r], reward: float32(op), discount: 1}
				if code == opCut {
					s.st = tensorbuf.StepType((arg[2] >> (2 * i)) % 4 % 3)
				}
				switch v := (arg[1] >> (2 * i)) & 3; {
				case s.st == tensorbuf.Last:
					s.next = tensorbuf.First
				case v == 0:
					s.next, s.discount = tensorbuf.Last, 0
				case v == 1:
					s.next = tensorbuf.Last
				default:
					s.next = tensorbuf.Mid
				}
				meta[i] = s
				next[r] = s.next
			}
			a.add(rows, meta)
			evict()
		case opBadAdd:
			r := arg[0] % envs
			bad := rawStep{st: next[r], next: tensorbuf.Mid, reward: float32(math.NaN()), discount: 1}
			switch arg[1] % 4 {
			case 1:
				bad.reward = float32(math.Inf(1))
			case 2:
				bad.reward, bad.discount = 0, float32(math.NaN())
			case 3:
				bad.reward, bad.discount = 0, float32(math.Inf(-1))
			}
			before := b.Cursor(r)
			err := w.Add(makeStep(t, []int{r}, []int64{m.cursor(r)}, []rawStep{bad}))
			if !errors.Is(err, tensorbuf.ErrInvalidArg) {
				t.Fatalf("op %d: add of %+v: got %v, want ErrInvalidArg", op, bad, err)
			}
			if b.Cursor(r) != before {
				t.Fatalf("op %d: a refused add moved the cursor", op)
			}
		case opInsert:
			r := arg[0] % (envs + 1) // envs is out of range
			off := int64(arg[1] % (capacity + 2))
			it := tensorbuf.Item{Row: r, Len: boundary[arg[2]%len(boundary)], Pad: boundary[arg[3]%len(boundary)],
				Priority: fuzzPriorities[arg[4]%len(fuzzPriorities)]}
			prio := it.Priority // the priority the item gets
			if prio == tensorbuf.DefaultPriority {
				prio = ft.defaultPriority()
			}
			valid := r < envs && it.Len >= 1 && it.Pad >= 0 && it.Len <= capacity && it.Pad <= capacity-it.Len &&
				!math.IsNaN(prio) && !math.IsInf(prio, 0) && prio >= 0
			if r < envs {
				it.Start = m.oldest(r) + off
				valid = valid && it.Start+int64(it.Len) <= m.cursor(r)
			}
			if ft.sel == tensorbuf.Prioritized && valid {
				sum := ft.sum()
				if ft.maxSize > 0 && len(ft.order) >= ft.maxSize {
					sum -= ft.items[ft.order[0]].Priority // MaxSize pushes the oldest out first
				}
				valid = !math.IsInf(sum+prio, 0) // else the sum tree cannot hold it
			}
			size := tbl.Size()
			k, err := tbl.Insert(it)
			if !valid {
				if err == nil {
					t.Fatalf("op %d: insert of invalid %+v accepted (row holds [%d, %d))", op, it, m.oldest(r%envs), m.cursor(r%envs))
				}
				if !isSentinel(err) {
					t.Fatalf("op %d: insert %+v: %v wraps no sentinel", op, it, err)
				}
				if tbl.Size() != size {
					t.Fatalf("op %d: refused insert changed the size", op)
				}
				continue
			}
			if err != nil {
				t.Fatalf("op %d: insert %+v (row holds [%d, %d)): %v", op, it, m.oldest(r), m.cursor(r), err)
			}
			if ft.maxSize > 0 && len(ft.order) >= ft.maxSize {
				ft.remove(ft.order[0])
			}
			if it.Priority != tensorbuf.DefaultPriority {
				ft.note(prio) // only priorities given count
			}
			it.Priority = prio
			ft.items[k] = it
			ft.order = append(ft.order, k)
		case opSample:
			n := 1 + arg[0]%4
			bt, err := tbl.Sample(ctx, n)
			if len(ft.order) == 0 || ft.budget() < n {
				if !errors.Is(err, tensorbuf.ErrEmpty) {
					t.Fatalf("op %d: sample of %d from %d items (budget %d): %v, want ErrEmpty", op, n, len(ft.order), ft.budget(), err)
				}
				break
			}
			if err != nil {
				t.Fatalf("op %d: sample of %d from %d items: %v", op, n, len(ft.order), err)
			}
			checkTableSample(t, op, m, ft, bt)
			_ = bt.Release()
		case opUpdate:
			k := pickKey(ft, arg[0])
			p := fuzzPriorities[arg[1]%len(fuzzPriorities)]
			old, known := ft.items[k]
			valid := known && !math.IsNaN(p) && !math.IsInf(p, 0) && p >= 0
			if ft.sel == tensorbuf.Prioritized && valid && math.IsInf(ft.sum()-old.Priority+p, 0) {
				valid = false
			}
			err := tbl.UpdatePriorities([]uint64{k}, []float64{p})
			switch {
			case !known && !errors.Is(err, tensorbuf.ErrUnknownKey):
				t.Fatalf("op %d: update of unknown key %d: %v", op, k, err)
			case known && !valid && (err == nil || !isSentinel(err)):
				t.Fatalf("op %d: update to priority %v: %v, want a sentinel error", op, p, err)
			case valid && err != nil:
				t.Fatalf("op %d: update to priority %v: %v", op, p, err)
			case valid:
				ft.note(p)
				old.Priority = p
				ft.items[k] = old
			}
		case opDelete:
			k := pickKey(ft, arg[0])
			tbl.Delete(k)
			if _, ok := ft.items[k]; ok {
				ft.remove(k)
			}
		case opDirect:
			n, l := 1+arg[0]%4, 1+arg[1]%(capacity+1)
			for _, aware := range []bool{false, true} {
				bt, err := b.SampleSequences(n, l, tensorbuf.SequenceOptions{EpisodeAware: aware})
				if err != nil {
					if !isSentinel(err) {
						t.Fatalf("op %d: SampleSequences: %v", op, err)
					}
					continue
				}
				checkSequences(t, op, m, bt, l, aware)
				_ = bt.Release()
			}
			if tr, err := b.SampleTransitions(n); err == nil {
				checkTransitionsCut(t, op, m, tr)
				_ = tr.Release()
			} else if !errors.Is(err, tensorbuf.ErrEmpty) || hasTransition(m) {
				t.Fatalf("op %d: SampleTransitions: %v", op, err)
			}
		case opNStep:
			n, h := 1+arg[0]%4, 1+arg[1]%4
			tr, err := b.SampleNStep(n, tensorbuf.NStepOptions{Horizon: h, DiscountFactor: 0.9})
			if err != nil {
				if !errors.Is(err, tensorbuf.ErrEmpty) || hasTransition(m) {
					t.Fatalf("op %d: SampleNStep: %v", op, err)
				}
				break
			}
			hr, err := tr.Host()
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range hr.Rows {
				if !m.transition(r, hr.Steps[i]) {
					t.Fatalf("op %d: n-step transition at row %d step %d does not exist", op, r, hr.Steps[i])
				}
			}
			_ = hr.Release()
			_ = tr.Release()
		case opExport:
			checkExportCuts(t, op, b, m)
		}
		if got := tbl.Size(); got != len(ft.order) {
			t.Fatalf("op %d: table size %d, model %d", op, got, len(ft.order))
		}
	}
	if len(ft.order) > 0 {
		all, err := tbl.All()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(all.Keys, ft.order) {
			t.Fatalf("All keys %v, want %v", all.Keys, ft.order)
		}
		_ = all.Release()
	}
	checkExportCuts(t, -1, b, m)
}

// pickKey returns a live key of the model, or (for v past them) a key
// that was never handed out.
func pickKey(ft *fuzzTable, v int) uint64 {
	if v < len(ft.order) {
		return ft.order[v]
	}
	return 1<<63 + uint64(v)
}

var sentinels = []error{
	tensorbuf.ErrUnknownField, tensorbuf.ErrMissingField, tensorbuf.ErrDType, tensorbuf.ErrShape, tensorbuf.ErrRows,
	tensorbuf.ErrRowOwned, tensorbuf.ErrConfig, tensorbuf.ErrUnknownTable, tensorbuf.ErrTableExists, tensorbuf.ErrInvalidArg,
	tensorbuf.ErrSequenceLen, tensorbuf.ErrItem, tensorbuf.ErrUnknownKey, tensorbuf.ErrEmpty, tensorbuf.ErrClosed,
	tensorbuf.ErrBackend, tensorbuf.ErrRateLimited,
}

// isSentinel reports whether err wraps one of the package's sentinels
// other than ErrBackend (which bad input must never reach).
func isSentinel(err error) bool {
	if err == nil || errors.Is(err, tensorbuf.ErrBackend) {
		return false
	}
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

func hasTransition(m *model) bool {
	for r := range m.steps {
		for s := m.oldest(r); s < m.cursor(r); s++ {
			if m.transition(r, s) {
				return true
			}
		}
	}
	return false
}

// checkTableSample checks a table sample draw by draw against the model
// and applies its MaxTimesSampled removals to the model.
func checkTableSample(t *testing.T, op int, m *model, ft *fuzzTable, bt *tensorbuf.Batch) {
	t.Helper()
	hb, err := bt.Host()
	if err != nil {
		t.Fatal(err)
	}
	defer hb.Release()
	if hb.TableSize != len(ft.order) {
		t.Fatalf("op %d: table size %d, model %d", op, hb.TableSize, len(ft.order))
	}
	allSame := ft.sel == tensorbuf.Prioritized && ft.maxTimes == 0 // drawn at once, from one tree
	sum0 := ft.sum()
	for i, k := range hb.Keys {
		it, ok := ft.items[k]
		if !ok || it != hb.Items[i] {
			t.Fatalf("op %d: draw %d: key %d item %+v, model has %+v (live %v)", op, i, k, hb.Items[i], it, ok)
		}
		if it.Start < m.oldest(it.Row) {
			t.Fatalf("op %d: draw %d: item %+v starts at an overwritten step", op, i, it)
		}
		switch ft.sel {
		case tensorbuf.FIFO:
			if k != ft.order[0] {
				t.Fatalf("op %d: FIFO draw %d: key %d, oldest is %d", op, i, k, ft.order[0])
			}
		case tensorbuf.LIFO:
			if k != ft.order[len(ft.order)-1] {
				t.Fatalf("op %d: LIFO draw %d: key %d, newest is %d", op, i, k, ft.order[len(ft.order)-1])
			}
		case tensorbuf.Prioritized:
			sum := ft.sum()
			if allSame {
				sum = sum0
			}
			if sum > 0 {
				want := it.Priority / sum
				if got := hb.Probabilities[i]; math.Abs(got-want) > 1e-9*want+1e-300 || want == 0 {
					t.Fatalf("op %d: draw %d: probability %v, want %v (priority %v of %v)", op, i, got, want, it.Priority, sum)
				}
			}
		}
		checkWindow(t, m, hb, i, it.Row, it.Start, it.Len)
		ft.times[k]++
		if ft.maxTimes > 0 && ft.times[k] >= ft.maxTimes {
			ft.remove(k)
		}
	}
}

// checkSequences checks direct windows of length l: inside the stored
// steps; episode-aware windows stop at a boundary step or a cut and never
// start at a boundary.
func checkSequences(t *testing.T, op int, m *model, bt *tensorbuf.Batch, l int, aware bool) {
	t.Helper()
	hb, err := bt.Host()
	if err != nil {
		t.Fatal(err)
	}
	defer hb.Release()
	for i, it := range hb.Items {
		r := it.Row
		if it.Start < m.oldest(r) || it.Start+int64(l) > m.cursor(r) {
			t.Fatalf("op %d: window %+v of %d steps outside row %d's [%d, %d)", op, it, l, r, m.oldest(r), m.cursor(r))
		}
		want := l
		if aware {
			if m.steps[r][it.Start].st == tensorbuf.Last {
				t.Fatalf("op %d: episode-aware window %+v starts at a boundary", op, it)
			}
			for k := range l {
				s := it.Start + int64(k)
				if m.steps[r][s].st == tensorbuf.Last || m.cut(r, s) {
					want = k + 1
					break
				}
			}
		}
		if it.Len != want || it.Pad != l-want {
			t.Fatalf("op %d: window %+v (aware %v), want %d real steps", op, it, aware, want)
		}
		checkWindow(t, m, hb, i, r, it.Start, it.Len)
	}
}

func checkTransitionsCut(t *testing.T, op int, m *model, tr *tensorbuf.Transitions) {
	t.Helper()
	h, err := tr.Host()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	for i, r := range h.Rows {
		if !m.transition(r, h.Steps[i]) {
			t.Fatalf("op %d: transition at row %d step %d does not exist", op, r, h.Steps[i])
		}
		checkTransition(t, m, h, i, i, r, h.Steps[i])
	}
}

// checkExportCuts compares AllExperiences in batch mode with the model's
// transitions, time-major then env, cuts honoured.
func checkExportCuts(t *testing.T, op int, b *tensorbuf.Buffer, m *model) {
	t.Helper()
	type pos struct {
		s int64
		r int
	}
	var want []pos
	for r := range m.steps {
		for s := m.oldest(r); s < m.cursor(r); s++ {
			if m.transition(r, s) {
				want = append(want, pos{s, r})
			}
		}
	}
	sort.Slice(want, func(i, j int) bool {
		return want[i].s < want[j].s || want[i].s == want[j].s && want[i].r < want[j].r
	})
	exp, err := b.AllExperiences(tensorbuf.ExportBatch)
	if len(want) == 0 {
		if !errors.Is(err, tensorbuf.ErrEmpty) {
			t.Fatalf("op %d: export of no transition: %v", op, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("op %d: export: %v", op, err)
	}
	defer exp[0].Release()
	h, err := exp[0].Host()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	if len(h.Rows) != len(want) {
		t.Fatalf("op %d: export of %d transitions, want %d", op, len(h.Rows), len(want))
	}
	for i, p := range want {
		if h.Rows[i] != p.r || h.Steps[i] != p.s {
			t.Fatalf("op %d: experience %d at (%d, %d), want %+v", op, i, h.Rows[i], h.Steps[i], p)
		}
		checkTransition(t, m, h, i, i, p.r, p.s)
	}
}
