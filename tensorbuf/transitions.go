package tensorbuf

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/trajring/trajring/internal/philox"

	"gorgonia.org/tensor"
)

// IsDone values of a transition, as MATLAB's experiences report them.
const (
	Running    uint8 = 0 // the episode goes on after the transition
	Terminated uint8 = 1 // the next step is Last with discount 0
	Truncated  uint8 = 2 // the next step is Last with discount > 0 (time limit)
)

// Transitions are experiences (MATLAB's term): for each stored step t that
// is not a boundary step and whose successor t+1 is stored, the fields at
// t, the observation fields at t+1 (NextObservation), the reward and
// discount stored with t (which come from t+1) and IsDone. They are derived
// from consecutive steps, never stored twice.
//
// Sampled transitions are shaped [n, ...shape] (rewards [n]); exported
// ones follow the export mode (see ExportMode). Tensors live in the
// buffer's backend memory; Host returns a host copy. Not safe for
// concurrent use.
//
// Tensors taken from Transitions stay valid while later SampleInto calls
// keep their shape and memory; a call that grows the memory or changes the
// shape empties them, as Release does. Release frees the memory at once;
// Transitions dropped without Release are freed by the garbage collector
// once neither they (nor, for an export, any experience sharing their
// memory) nor any tensor taken from them is reachable.
type Transitions struct {
	// Observation, Action and PolicyInfo hold the user fields at t by role.
	Observation, Action, PolicyInfo map[string]*tensor.Dense
	// NextObservation holds the observation fields at t+1.
	NextObservation map[string]*tensor.Dense
	// Reward and Discount (float32) are stored with step t.
	Reward, Discount *tensor.Dense
	// IsDone (uint8) is Running, Terminated or Truncated.
	IsDone *tensor.Dense
	// Rows and Steps locate each transition: env row and absolute step t.
	Rows  []int
	Steps []int64

	out    *outArena
	specs  []outSpec
	roles  []Role // per spec: the role of user fields
	nUser  int
	nObs   int
	shape  []int   // leading dims of the current views
	first  int64   // step of the arena where the views start
	owner  *Buffer // the buffer whose layout out and specs follow
	shared bool    // out is shared with the other experiences of an export
	cols   []Column
	idx    []int64
	next   []int64
	done   []byte
	prefix []int64
	draws  []uint64  // scratch of a sample's draws
	wins   []Window  // n-step windows (materialiseWindows)
	disc   []float32 // n-step discounts (materialiseWindows)
	stack  []int     // K of each stacked user field in the layout, nil for none (stack.go)
	want   []int     // the stack plan of the sample being made (applyStack)
	lost   []bool    // per transition: its stack reaches an overwritten step
	swins  []Window  // scratch: one-step windows of stacked frames
	scols  []Column  // scratch: the column of a stacked gather
	splan  []int     // scratch: a request's stack plan (stackPlan)
}

// transitionSpecs lays out transitions: user fields, the next observation
// fields, reward, discount, is_done.
func (b *Buffer) transitionSpecs(tr *Transitions) {
	tr.specs, tr.roles = tr.specs[:0], tr.roles[:0]
	tr.nUser, tr.nObs = b.nUser, 0
	for i := range b.nUser {
		c := &b.cols[i]
		tr.specs = append(tr.specs, tr.stackedSpec(c, i))
		tr.roles = append(tr.roles, c.Role)
	}
	for i := range b.nUser {
		if c := &b.cols[i]; c.Role == Observation {
			tr.specs = append(tr.specs, tr.stackedSpec(c, i))
			tr.nObs++
		}
	}
	tr.specs = append(tr.specs,
		outSpec{name: RewardName, dtype: Float32, stepBytes: 4},
		outSpec{name: DiscountName, dtype: Float32, stepBytes: 4},
		outSpec{name: "is_done", dtype: Uint8, stepBytes: 1})
}

// isDone returns the IsDone value of the transition at a stored step.
func (b *Buffer) isDone(row int, pos int64) uint8 {
	m := b.metaAt(row, pos)
	if StepType((m&metaNextMask)>>metaNextShift) != Last {
		return Running
	}
	if m&metaDiscZero != 0 {
		return Terminated
	}
	return Truncated
}

// materialise gathers the transitions at tr.idx (successors tr.next) into
// tr's arena and uploads IsDone; len(tr.idx) steps in all.
func (b *Buffer) materialise(tr *Transitions) error {
	n := int64(len(tr.idx))
	if _, err := b.reserve(tr, n); err != nil {
		return err
	}
	return b.materialiseCols(tr, n)
}

// reserve makes tr's memory hold n transitions of b (realloc reports
// whether it had to allocate), so that a caller can fail before it
// consumes anything. The caller holds b.mu.
func (b *Buffer) reserve(tr *Transitions, n int64) (realloc bool, err error) {
	if tr.shared {
		// One experience of an ExportNone export: never write over the
		// others; take memory of its own.
		tr.out, tr.shared, tr.first, tr.shape = nil, false, 0, nil
	}
	if tr.owner != b {
		if tr.out != nil {
			if err := tr.out.replace(); err != nil {
				return false, fmt.Errorf("%w: %w", ErrBackend, err)
			}
		}
		tr.out, tr.specs, tr.shape, tr.owner = nil, nil, nil, b
	}
	if err := tr.applyStack(); err != nil {
		return false, err
	}
	if tr.out == nil {
		tr.out = &outArena{kind: "Transitions"}
	}
	if tr.specs == nil {
		b.transitionSpecs(tr)
	}
	realloc, err = tr.out.ensure(b.be, tr.specs, n)
	if realloc {
		tr.shape = nil // views must be rebuilt
	}
	return realloc, err
}

// materialiseCols gathers the n transitions at tr.idx/tr.next into tr's
// reserved memory. The caller holds b.mu.
func (b *Buffer) materialiseCols(tr *Transitions, n int64) error {
	tr.cols = tr.cols[:0]
	nextSpec := b.nUser
	for i := range b.nUser {
		c := &b.cols[i]
		col := b.ring[i]
		col.Out, col.OutOff = tr.out.arena, tr.out.offs[i]
		if c.Role == Observation {
			col.NextOut, col.NextOff = tr.out.arena, tr.out.offs[nextSpec]
			nextSpec++
		}
		if tr.stacked(i) {
			continue // gatherStacks writes it
		}
		tr.cols = append(tr.cols, col)
	}
	k := b.nUser + tr.nObs
	for j, ci := range []int{colReward, colDiscount} {
		col := b.ring[b.nUser+ci]
		col.Out, col.OutOff = tr.out.arena, tr.out.offs[k+j]
		tr.cols = append(tr.cols, col)
	}
	if err := b.be.Concat(tr.cols, tr.idx, tr.next); err != nil {
		return fmt.Errorf("%w: concat: %w", ErrBackend, err)
	}
	if err := b.gatherStacks(tr); err != nil {
		return err
	}
	done := grow(&tr.done, len(tr.Rows))
	for i, r := range tr.Rows {
		done[i] = b.isDone(r, tr.Steps[i])
	}
	if err := b.be.Upload(tr.out.arena, tr.out.offs[k+2], tr.done); err != nil {
		return fmt.Errorf("%w: upload: %w", ErrBackend, err)
	}
	return nil
}

// views sets tr's tensors over its arena with leading dims lead (view
// offset at step first), rebuilding them only when lead changed.
func (tr *Transitions) views(be Backend, first int64, lead ...int) error {
	if first == 0 && sameInts(tr.shape, lead) {
		return nil
	}
	if tr.Observation == nil {
		tr.Observation = make(map[string]*tensor.Dense)
		tr.Action = make(map[string]*tensor.Dense)
		tr.PolicyInfo = make(map[string]*tensor.Dense)
		tr.NextObservation = make(map[string]*tensor.Dense)
	}
	tr.retire()
	clear(tr.Observation)
	clear(tr.Action)
	clear(tr.PolicyInfo)
	clear(tr.NextObservation)
	for i, s := range tr.specs {
		shape := append(append(make([]int, 0, len(lead)+len(s.shape)), lead...), s.shape...)
		d, err := tr.out.tensor(be, tr.out.offs[i]+first*s.stepBytes, s.dtype.Tensor(), shape...)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrBackend, err)
		}
		switch k := i - tr.nUser - tr.nObs; {
		case i < tr.nUser && tr.roles[i] == Observation:
			tr.Observation[s.name] = d
		case i < tr.nUser && tr.roles[i] == Action:
			tr.Action[s.name] = d
		case i < tr.nUser:
			tr.PolicyInfo[s.name] = d
		case i < tr.nUser+tr.nObs:
			tr.NextObservation[s.name] = d
		case k == 0:
			tr.Reward = d
		case k == 1:
			tr.Discount = d
		default:
			tr.IsDone = d
		}
	}
	tr.shape = append(tr.shape[:0], lead...)
	return nil
}

func sameInts(a, b []int) bool {
	if len(a) != len(b) || a == nil {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// retire empties the tensors of tr's current views, which new views
// replace.
func (tr *Transitions) retire() {
	for _, m := range []map[string]*tensor.Dense{tr.Observation, tr.Action, tr.PolicyInfo, tr.NextObservation} {
		for _, d := range m {
			retire(d, replaced)
		}
	}
	for _, d := range []*tensor.Dense{tr.Reward, tr.Discount, tr.IsDone} {
		retire(d, replaced)
	}
}

// Release frees the transitions' backend memory (shared by every
// Transitions of one export) and empties every tensor handed out over it,
// those of the other experiences of the export included: afterwards
// reading one (Data, At, Get, printing, arithmetic) panics with
// "tensorbuf: tensor used after Transitions.Release" or returns an error,
// and its typed slices (Float32s, ...) are empty; it never reaches freed
// memory nor shows other data. Views made from those tensors with Slice
// and slices taken from them earlier are not emptied: do not use them
// after Release either. Release is idempotent.
func (tr *Transitions) Release() error {
	if tr.out == nil {
		return nil
	}
	tr.shape = nil
	return tr.out.release()
}

// Host returns a copy of the transitions in host memory.
func (tr *Transitions) Host() (*Transitions, error) {
	if tr.out == nil || tr.out.arena == nil || tr.shape == nil {
		return nil, fmt.Errorf("%w: empty transitions", ErrInvalidArg)
	}
	count := int64(1)
	for _, d := range tr.shape {
		count *= int64(d)
	}
	ho, h, err := tr.out.hostCopy(tr.specs, tr.first, count)
	if err != nil {
		return nil, err
	}
	c := &Transitions{
		Rows: append([]int(nil), tr.Rows...), Steps: append([]int64(nil), tr.Steps...),
		out: ho, specs: tr.specs, roles: tr.roles, nUser: tr.nUser, nObs: tr.nObs,
	}
	if err := c.views(h, 0, tr.shape...); err != nil {
		return nil, err
	}
	return c, nil
}

// SampleTransitions samples n transitions uniformly over every stored
// transition (TFUniformReplayBuffer with two-step sequences, SB3's and
// MATLAB's sample). See SampleTransitionsInto.
func (b *Buffer) SampleTransitions(n int) (*Transitions, error) {
	tr := new(Transitions)
	if err := b.SampleTransitionsInto(tr, n); err != nil {
		return nil, err
	}
	return tr, nil
}

// SampleTransitionsInto samples n transitions into tr, reusing its memory.
// It fails with ErrInvalidArg for n below 1 or a sample larger than the
// sample limit (see SampleBudget) and ErrEmpty when the buffer holds no
// transition.
func (b *Buffer) SampleTransitionsInto(tr *Transitions, n int) error {
	if n <= 0 || tr == nil {
		return fmt.Errorf("%w: sample of %d transitions", ErrInvalidArg, n)
	}
	if err := b.checkTransitionsSize("sample of transitions", n, 1, 0); err != nil {
		return err
	}
	tr.want = nil
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return fmt.Errorf("%w: SampleTransitions", ErrClosed)
	}
	if err := b.drawTransitions(tr, n); err != nil {
		return err
	}
	b.indexSuccessors(tr)
	if err := b.materialise(tr); err != nil {
		return err
	}
	return tr.views(b.be, 0, n)
}

// ExportMode says how AllExperiences concatenates experiences (MATLAB's
// ConcatenateMode). Its zero value is not a mode: an export must say which
// one it wants, and the exports refuse 0 with ErrInvalidArg. It is a plain
// value.
type ExportMode int

// The export modes. They start at 1 so that an unset ExportMode (0) is
// refused rather than taken for ExportNone.
const (
	// ExportNone returns N experiences, each shaped [1, 1, ...].
	ExportNone ExportMode = iota + 1
	// ExportBatch returns one experience batch shaped [N, 1, ...].
	ExportBatch
	// ExportSequence returns one experience sequence shaped [1, N, ...].
	ExportSequence
)

// AllExperiences returns every stored transition, oldest first: ordered
// by absolute step t, then by env row (time-major, env-minor), as MATLAB's
// allExperiences does. In ExportNone mode the N results share one arena
// (Release on any frees it for all); in the other modes the slice holds
// one Transitions. It fails with ErrEmpty when there is no transition.
func (b *Buffer) AllExperiences(mode ExportMode) ([]*Transitions, error) {
	if mode < ExportNone || mode > ExportSequence {
		return nil, fmt.Errorf("%w: export mode %d", ErrInvalidArg, mode)
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return nil, fmt.Errorf("%w: AllExperiences", ErrClosed)
	}
	tr := new(Transitions)
	tr.Rows, tr.Steps = b.allTransitions()
	if len(tr.Rows) == 0 {
		return nil, fmt.Errorf("%w: the buffer holds no transition", ErrEmpty)
	}
	b.indexSuccessors(tr)
	if err := b.materialise(tr); err != nil {
		return nil, err
	}
	return b.exportViews(tr, mode)
}

// indexSuccessors sets tr's gather indices to the slots of its
// transitions' steps and of their successors.
func (b *Buffer) indexSuccessors(tr *Transitions) {
	// Sized once: grown by append, an export's million transitions
	// copied the lists again and again.
	idx, next := grow(&tr.idx, len(tr.Rows)), grow(&tr.next, len(tr.Rows))
	for i, r := range tr.Rows {
		idx[i], next[i] = b.slot(r, tr.Steps[i]), b.slot(r, tr.Steps[i]+1)
	}
}

// drawTransitions sets tr.Rows and tr.Steps to n transitions drawn
// uniformly over every stored transition. The caller holds b.mu.
func (b *Buffer) drawTransitions(tr *Transitions, n int) error {
	prefix, total := b.windowCounts(&tr.prefix, 2)
	if total == 0 {
		return fmt.Errorf("%w: no row holds two steps", ErrEmpty)
	}
	// Only the first draw can fail (no valid transition at all), before
	// anything is appended: a failed call leaves tr as it was.
	rows, steps := tr.Rows[:0], tr.Steps[:0]
	var valid []Window
	d, per := b.newCall(), evenRows(prefix)
	first := d.first(&tr.draws, n)
	// A transition whose frame stacks reach an overwritten step is none
	// (FrameStack); without stacking sk is 1 and every step is kept.
	sk := stackMax(tr.want)
	ok := func(w Window) bool { return !b.isBoundary(int(w.Row), w.Start) && b.stackKept(int(w.Row), w.Start, sk) }
	for k := range n {
		var w Window
		if per > 0 {
			w = b.evenWindow(first[k], int64(len(prefix)), per, total)
		} else {
			w = b.drawStart(prefix, per, int64(philox.Index(first[k], uint64(total))))
		}
		found := ok(w)
		for try := 1; try < maxRejections && !found; try++ {
			w = b.drawStart(prefix, per, d.index(try, k, total))
			found = ok(w)
		}
		if !found {
			if valid == nil {
				if valid = slices.DeleteFunc(b.validStarts(2), func(w Window) bool { return !ok(w) }); len(valid) == 0 {
					return fmt.Errorf("%w: the buffer holds only boundary steps (or transitions whose frame stacks reach overwritten steps)", ErrEmpty)
				}
			}
			w = valid[d.index(fallbackStream, k, int64(len(valid)))]
		}
		rows, steps = append(rows, int(w.Row)), append(steps, w.Start)
	}
	tr.Rows, tr.Steps = rows, steps
	return nil
}

// allTransitions returns every stored transition, ordered by step, then
// row, as AllExperiences orders them. The caller holds b.mu.
func (b *Buffer) allTransitions() (rows []int, steps []int64) {
	var n, lo, hi int64 = 0, math.MaxInt64, 0 // transitions at most; steps [lo, hi)
	for r := range b.numEnvs {
		if c := b.cursor[r]; c-b.oldest(r) >= 2 {
			n += c - 1 - b.oldest(r)
			lo, hi = min(lo, b.oldest(r)), max(hi, c-1)
		}
	}
	rows, steps = make([]int, 0, n), make([]int64, 0, n)
	if n == 0 {
		return rows, steps
	}
	if (hi-lo)*int64(b.numEnvs) <= 4*n {
		// Rows hold about the same steps: visit them in order, time-major.
		for t := lo; t < hi; t++ {
			for r := range b.numEnvs {
				if t >= b.oldest(r) && t+1 < b.cursor[r] && !b.isBoundary(r, t) {
					rows, steps = append(rows, r), append(steps, t)
				}
			}
		}
		return rows, steps
	}
	// Rows far apart in time: collect per row, then sort by step, then row.
	type pos struct {
		t   int64
		row int
	}
	all := make([]pos, 0, n)
	for r := range b.numEnvs {
		for t := b.oldest(r); t+1 < b.cursor[r]; t++ {
			if !b.isBoundary(r, t) {
				all = append(all, pos{t, r})
			}
		}
	}
	slices.SortFunc(all, func(x, y pos) int {
		if c := cmp.Compare(x.t, y.t); c != 0 {
			return c
		}
		return cmp.Compare(x.row, y.row)
	})
	for _, p := range all {
		rows, steps = append(rows, p.row), append(steps, p.t)
	}
	return rows, steps
}

// exportViews shapes materialised transitions for an export mode.
func (b *Buffer) exportViews(tr *Transitions, mode ExportMode) ([]*Transitions, error) {
	n := len(tr.Rows)
	switch mode {
	case ExportBatch:
		if err := tr.views(b.be, 0, n, 1); err != nil {
			_ = tr.Release()
			return nil, err
		}
		return []*Transitions{tr}, nil
	case ExportSequence:
		if err := tr.views(b.be, 0, 1, n); err != nil {
			_ = tr.Release()
			return nil, err
		}
		return []*Transitions{tr}, nil
	}
	out := make([]*Transitions, n)
	for i := range out {
		e := &Transitions{
			Rows: tr.Rows[i : i+1 : i+1], Steps: tr.Steps[i : i+1 : i+1],
			out: tr.out, specs: tr.specs, roles: tr.roles, nUser: tr.nUser, nObs: tr.nObs, first: int64(i),
			owner: b, shared: true,
		}
		if err := e.views(b.be, int64(i), 1, 1); err != nil {
			_ = tr.Release()
			return nil, err
		}
		out[i] = e
	}
	return out, nil
}

// String returns the mode's name, such as "batch" (MATLAB's
// ConcatenateMode "none", "batch", "sequence").
func (m ExportMode) String() string {
	switch m {
	case ExportNone:
		return "none"
	case ExportBatch:
		return "batch"
	case ExportSequence:
		return "sequence"
	}
	return fmt.Sprintf("ExportMode(%d)", int(m))
}

// IsDoneName names the IsDone tensor of transitions.
const IsDoneName = "is_done"

// Field returns the tensor of a user field at t (observation, action or
// policy info) or of reward, discount or is_done by name; NextObservation
// holds the observations at t+1. An unknown name fails with
// ErrUnknownField, listing the names the transitions have, and released or
// empty transitions with ErrInvalidArg. Not safe for concurrent use with
// calls that change the transitions.
func (tr *Transitions) Field(name string) (*tensor.Dense, error) {
	if tr == nil || tr.shape == nil {
		return nil, fmt.Errorf("%w: field %q of empty transitions", ErrInvalidArg, name)
	}
	var d *tensor.Dense
	switch name {
	case RewardName:
		d = tr.Reward
	case DiscountName:
		d = tr.Discount
	case IsDoneName:
		d = tr.IsDone
	default:
		for _, m := range []map[string]*tensor.Dense{tr.Observation, tr.Action, tr.PolicyInfo} {
			if v, ok := m[name]; ok {
				d = v
			}
		}
	}
	if d == nil {
		return nil, fmt.Errorf("%w: %q (the transitions have %v)", ErrUnknownField, name, tr.names())
	}
	return d, nil
}

// Next returns the observation field of the same name at t+1
// (NextObservation), or ErrUnknownField for a name that is not an
// observation field (ErrInvalidArg for released or empty transitions).
func (tr *Transitions) Next(name string) (*tensor.Dense, error) {
	if tr == nil || tr.shape == nil {
		return nil, fmt.Errorf("%w: next observation %q of empty transitions", ErrInvalidArg, name)
	}
	d, ok := tr.NextObservation[name]
	if !ok || d == nil {
		return nil, fmt.Errorf("%w: %q is not an observation field (next observations: %v)",
			ErrUnknownField, name, sortedKeys(tr.NextObservation))
	}
	return d, nil
}

func (tr *Transitions) names() []string {
	var names []string
	for _, m := range []map[string]*tensor.Dense{tr.Observation, tr.Action, tr.PolicyInfo} {
		names = append(names, sortedKeys(m)...)
	}
	return append(names, RewardName, DiscountName, IsDoneName)
}

func sortedKeys(m map[string]*tensor.Dense) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
