package remote

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// Default names of the JetStream objects the package uses.
const (
	DefaultStream        = "TRAJRING"
	DefaultSubject       = "trajring.frames"
	DefaultDeadStream    = "TRAJRING_DEAD"
	DefaultDeadSubject   = "trajring.dead"
	DefaultDurable       = "learner"
	DefaultParamsBucket  = "trajring_params"
	defaultStepsPerFrame = 32
	defaultMaxInFlight   = 64
	// defaultMaxInFlightBytes bounds a Publisher's unacknowledged bytes.
	defaultMaxInFlightBytes = 16 << 20
	// defaultCloseTimeout bounds a Publisher's Close.
	defaultCloseTimeout = 10 * time.Second
)

// PublisherConfig configures a Publisher. It is a plain value.
type PublisherConfig struct {
	// JetStream is the client publishing the frames (required). Give its
	// nats.Conn reconnect options (nats.MaxReconnects(-1)) for the actor to
	// survive a server restart; give it jetstream.WithPublishAsyncTimeout
	// so that a publish lost in a restart is retried (default: Publisher
	// retries a publish unanswered for 5 s).
	JetStream jetstream.JetStream
	// Fields are the learner buffer's user fields (Buffer.Fields); each
	// is read from the trajectory map of its role.
	Fields []tensorbuf.Field
	// Subject is the subject prefix frames are published under (default
	// DefaultSubject); the actor id is appended as the last token.
	Subject string
	// StepsPerFrame is K, the steps of one row set per frame (default 32).
	StepsPerFrame int
	// MaxInFlight bounds the frames published and not yet acknowledged by
	// the stream (default 64); Observe blocks while it is reached.
	MaxInFlight int
	// MaxInFlightBytes bounds the bytes of those frames (default 16 MiB;
	// one frame is always let through). A server refuses publishes beyond
	// its stream's ingest queue (429 Too Many Requests), which a Publisher
	// would have to retry.
	MaxInFlightBytes int
	// Compress compresses frame bodies with S2.
	Compress bool
	// Context bounds the waits of Observe and Flush (default
	// context.Background(): retry until the server comes back). Close does
	// not stop when it is done: an actor stopped by cancelling it (Ctrl-C)
	// still flushes and says goodbye, for up to CloseTimeout.
	Context context.Context
	// CloseTimeout bounds Close's waits (default 10 s): its flush and the
	// acknowledgement of the bye frame, which frees the actor's rows in
	// the learner. They run on a context of their own, with Context's
	// values but not its cancellation.
	CloseTimeout time.Duration
	// AckTimeout is how long a publish may stay unanswered before it is
	// sent again (default 5 s).
	AckTimeout time.Duration
}

// PublisherStats counts what a Publisher has done. A plain value.
type PublisherStats struct {
	Frames  int64 // frames acknowledged by the stream
	Steps   int64 // row steps in frames handed to the stream (sealed)
	Bytes   int64 // frame bytes published (first attempts)
	Retries int64 // publishes sent again after an error or timeout
}

type inflight struct {
	id     string
	data   []byte
	fut    jetstream.PubAckFuture
	sent   time.Time
	resent bool // sent more than once: an older send may still be retried by the client
}

// Publisher is the actor side: a driver.Observer that frames batched
// trajectories and publishes them to a JetStream stream. Each Publisher
// has its own random actor id, so an actor that restarts is a new actor
// to the learner (its rows start new episodes; nothing is mistaken for a
// duplicate). It is safe for concurrent use (calls are serialised), but a
// driver calls it from one goroutine anyway.
type Publisher struct {
	mu      sync.Mutex
	cfg     PublisherConfig
	schema  *Schema
	subject string
	actor   uint64
	seq     uint64
	batch   int     // actor batch size B, fixed by the first trajectory
	next    []int64 // next step number per local row

	// the frame being filled
	rows  []int
	first []int64
	steps int
	cols  [][]byte
	body  []byte
	sel   []int
	src   [][]byte // the user fields' bytes of the step being appended

	queue  []*inflight
	qbytes int // bytes of the frames in queue
	// spare holds the memory of acknowledged frames for the next ones:
	// once the stream has acknowledged a frame sent once, neither the
	// Publisher nor the client reads its bytes again (a frame sent again
	// is not reused: the client may still retry an older send of it).
	spare  [][]byte
	stats  PublisherStats
	closed bool
	// byeQueued: Close queued the bye frame (a Close tried again after a
	// failure does not queue a second one).
	byeQueued bool
}

// NewPublisher returns a Publisher, or an error wrapping ErrConfig.
func NewPublisher(cfg PublisherConfig) (*Publisher, error) {
	if cfg.JetStream == nil {
		return nil, fmt.Errorf("%w: Publisher needs a JetStream client", ErrConfig)
	}
	s, err := NewSchema(cfg.Fields)
	if err != nil {
		return nil, err
	}
	if cfg.Subject == "" {
		cfg.Subject = DefaultSubject
	}
	if cfg.StepsPerFrame == 0 {
		cfg.StepsPerFrame = defaultStepsPerFrame
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = defaultMaxInFlight
	}
	if cfg.MaxInFlightBytes == 0 {
		cfg.MaxInFlightBytes = defaultMaxInFlightBytes
	}
	if cfg.StepsPerFrame < 0 || cfg.MaxInFlight < 0 || cfg.MaxInFlightBytes < 0 {
		return nil, fmt.Errorf("%w: steps per frame %d, max in flight %d frames, %d bytes", ErrConfig, cfg.StepsPerFrame, cfg.MaxInFlight, cfg.MaxInFlightBytes)
	}
	if cfg.Context == nil {
		cfg.Context = context.Background()
	}
	if cfg.AckTimeout == 0 {
		cfg.AckTimeout = 5 * time.Second
	}
	if cfg.CloseTimeout == 0 {
		cfg.CloseTimeout = defaultCloseTimeout
	}
	if cfg.AckTimeout < 0 || cfg.CloseTimeout < 0 {
		return nil, fmt.Errorf("%w: ack timeout %v, close timeout %v", ErrConfig, cfg.AckTimeout, cfg.CloseTimeout)
	}
	var idb [8]byte
	_, _ = rand.Read(idb[:])
	actor := binary.LittleEndian.Uint64(idb[:]) | 1 // never 0
	return &Publisher{
		cfg:     cfg,
		schema:  s,
		actor:   actor,
		subject: fmt.Sprintf("%s.%016x", cfg.Subject, actor),
		cols:    make([][]byte, len(s.colBytes)),
	}, nil
}

// Actor returns the publisher's actor id.
func (p *Publisher) Actor() uint64 { return p.actor }

// Schema returns the frame schema.
func (p *Publisher) Schema() *Schema { return p.schema }

// Stats returns the publisher's counts.
func (p *Publisher) Stats() PublisherStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Published returns, per local row, the number of steps handed to the
// stream so far (sealed into frames).
func (p *Publisher) Published() []int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.next)
}

// source returns the trajectory tensor of a field.
func source(t *driver.Trajectory, f tensorbuf.Field) *tensor.Dense {
	switch f.Role {
	case tensorbuf.Action:
		return t.Action[f.Name]
	case tensorbuf.PolicyInfo:
		return t.PolicyInfo[f.Name]
	}
	return t.Observation[f.Name]
}

// Observe appends one batched step (its active rows) to the frame being
// filled and publishes the frame once it holds K steps or when the set of
// active rows changes. A trajectory that does not match the fields is
// refused (an error wrapping ErrConfig or ErrFrame) and changes nothing,
// as is a first batch so wide that a frame of StepsPerFrame steps of it
// would exceed MaxFrameBytes (ErrConfig).
func (p *Publisher) Observe(t *driver.Trajectory) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.byeQueued {
		return fmt.Errorf("%w: Observe", ErrClosed)
	}
	if t == nil {
		return fmt.Errorf("%w: nil trajectory", ErrFrame)
	}
	b := t.BatchSize()
	if p.batch == 0 {
		if b <= 0 || b > math.MaxInt32 {
			return fmt.Errorf("%w: batch size %d", ErrFrame, b)
		}
	} else if b != p.batch {
		return fmt.Errorf("%w: batch size %d, the actor's is %d", ErrFrame, b, p.batch)
	}
	if len(t.NextStepType) != b || len(t.Reward) != b || len(t.Discount) != b || (t.Active != nil && len(t.Active) != b) {
		return fmt.Errorf("%w: trajectory columns of different lengths", ErrFrame)
	}
	p.src = p.src[:0]
	for c, f := range p.schema.fields {
		d := source(t, f)
		if d == nil || d.Dtype() != f.DType.Tensor() || d.RequiresIterator() || len(d.Header.Raw) < b*p.schema.colBytes[c] || d.Shape()[0] != b {
			return fmt.Errorf("%w: trajectory field %q missing or not a contiguous [%d, %v] %v tensor", ErrFrame, f.Name, b, f.Shape, f.DType)
		}
		p.src = append(p.src, d.Header.Raw)
	}
	if p.batch == 0 {
		// A frame of every row must fit what learners decode, or every
		// frame of this actor would be a dead letter.
		if k := p.cfg.StepsPerFrame; k > math.MaxUint32 || !p.schema.fits(uint32(b), uint32(k)) {
			return fmt.Errorf("%w: a frame of %d rows x %d steps x %d bytes exceeds %d bytes: lower StepsPerFrame",
				ErrConfig, b, k, p.schema.stepBytes, MaxFrameBytes)
		}
		p.batch = b
		p.next = make([]int64, b)
	}
	p.sel = p.sel[:0]
	for i := range b {
		if t.IsActive(i) {
			p.sel = append(p.sel, i)
		}
	}
	if len(p.sel) == 0 {
		return nil
	}
	if p.steps > 0 && !slices.Equal(p.sel, p.rows) {
		if err := p.seal(p.cfg.Context); err != nil {
			return err
		}
	}
	if p.steps == 0 {
		p.rows = append(p.rows[:0], p.sel...)
		p.first = p.first[:0]
		for _, r := range p.rows {
			p.first = append(p.first, p.next[r])
		}
	}
	p.appendStep(t)
	p.steps++
	if p.steps >= p.cfg.StepsPerFrame {
		return p.seal(p.cfg.Context)
	}
	return nil
}

// appendStep appends the rows p.rows of one checked trajectory to the
// frame columns; p.src holds its user fields' bytes (see Observe).
func (p *Publisher) appendStep(t *driver.Trajectory) {
	if len(p.src) == 0 { // not called from Observe
		for _, f := range p.schema.fields {
			p.src = append(p.src, source(t, f).Header.Raw)
		}
	}
	b := p.batch
	all := len(p.rows) == b
	for c, raw := range p.src {
		sb := p.schema.colBytes[c]
		if all {
			p.cols[c] = append(p.cols[c], raw[:b*sb]...)
			continue
		}
		for _, r := range p.rows {
			p.cols[c] = append(p.cols[c], raw[r*sb:(r+1)*sb]...)
		}
	}
	nc := len(p.schema.fields)
	for _, r := range p.rows {
		p.cols[nc] = binary.LittleEndian.AppendUint32(p.cols[nc], uint32(t.StepType[r]))
		p.cols[nc+1] = binary.LittleEndian.AppendUint32(p.cols[nc+1], uint32(t.NextStepType[r]))
		p.cols[nc+2] = binary.LittleEndian.AppendUint32(p.cols[nc+2], math.Float32bits(t.Reward[r]))
		p.cols[nc+3] = binary.LittleEndian.AppendUint32(p.cols[nc+3], math.Float32bits(t.Discount[r]))
	}
	p.src = p.src[:0]
}

// seal publishes the frame being filled, waiting for room at most until
// ctx is done.
func (p *Publisher) seal(ctx context.Context) error {
	if p.steps == 0 {
		return nil
	}
	var data []byte
	if n := len(p.spare); n > 0 {
		data, p.spare = p.spare[n-1][:0], p.spare[:n-1]
	}
	data, p.body = p.schema.encode(data, p.body, p.cfg.Compress, p.actor, p.seq, p.batch, p.rows, p.first, p.steps, p.cols)
	for _, r := range p.rows {
		p.next[r] += int64(p.steps)
	}
	p.stats.Steps += int64(p.steps * len(p.rows))
	p.steps = 0
	for c := range p.cols {
		p.cols[c] = p.cols[c][:0]
	}
	return p.publish(ctx, data)
}

// publish queues one frame, first waiting while MaxInFlight are pending.
// A wait that ends with ctx queues the frame unsent (a later Flush or
// Close sends it) and returns ctx's error: a sealed frame is never lost.
func (p *Publisher) publish(ctx context.Context, data []byte) error {
	var err error
	for err == nil && (len(p.queue) >= p.cfg.MaxInFlight || (len(p.queue) > 0 && p.qbytes+len(data) > p.cfg.MaxInFlightBytes)) {
		err = p.waitOldest(ctx)
	}
	f := &inflight{id: p.msgID(p.seq), data: data}
	p.seq++
	p.stats.Bytes += int64(len(data))
	if err == nil {
		p.send(f)
	}
	p.queue = append(p.queue, f)
	p.qbytes += len(data)
	return err
}

// msgID returns the message id of frame seq: the actor id in 16 hex
// digits, a dash and seq in decimal.
func (p *Publisher) msgID(seq uint64) string {
	var b [40]byte
	id := fmt.Appendf(b[:0], "%016x-", p.actor)
	return string(strconv.AppendUint(id, seq, 10))
}

// send (re)publishes a frame asynchronously with its message id; a
// failure to send leaves fut nil for waitOldest to retry. A frame never
// sent (publish's wait ended) has a zero sent time and a nil fut.
func (p *Publisher) send(f *inflight) {
	fut, err := p.cfg.JetStream.PublishAsync(p.subject, f.data, jetstream.WithMsgID(f.id))
	f.sent = time.Now()
	if err != nil {
		f.fut = nil
		return
	}
	f.fut = fut
}

// waitOldest waits, at most until ctx is done, for the oldest in-flight
// frame's acknowledgement. On an error or a timeout it sends every pending
// frame again, in order (the stream drops the copies it already has by
// message id); a frame never sent is sent then for the first time.
func (p *Publisher) waitOldest(ctx context.Context) error {
	if p.queue[len(p.queue)-1].sent.IsZero() { // queued unsent (at the tail): send them now
		for _, q := range p.queue {
			if q.sent.IsZero() {
				p.send(q)
			}
		}
	}
	f := p.queue[0]
	if f.fut != nil {
		timer := time.NewTimer(max(time.Millisecond, p.cfg.AckTimeout-time.Since(f.sent)))
		select {
		case <-f.fut.Ok():
			timer.Stop()
			p.qbytes -= len(f.data)
			p.queue[0] = nil
			p.queue = p.queue[1:]
			p.stats.Frames++
			if !f.resent && len(p.spare) < 8 {
				p.spare = append(p.spare, f.data)
			}
			return nil
		case <-f.fut.Err():
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("remote: waiting for the stream: %w", ctx.Err())
		}
		timer.Stop()
	}
	// Back off a little, then resend everything pending, in order.
	select {
	case <-time.After(50 * time.Millisecond):
	case <-ctx.Done():
		return fmt.Errorf("remote: waiting for the stream: %w", ctx.Err())
	}
	for _, q := range p.queue {
		if !q.sent.IsZero() {
			p.stats.Retries++
			q.resent = true
		}
		p.send(q)
	}
	return nil
}

// Flush publishes the frame being filled and waits until the stream has
// acknowledged every frame. Call it between runs or before reading
// Published for an exact count.
func (p *Publisher) Flush() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.byeQueued {
		return fmt.Errorf("%w: Flush", ErrClosed)
	}
	return p.flushLocked(p.cfg.Context)
}

func (p *Publisher) flushLocked(ctx context.Context) error {
	if err := p.seal(ctx); err != nil {
		return err
	}
	for len(p.queue) > 0 {
		if err := p.waitOldest(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Close flushes, then tells the learner that the actor leaves (its rows
// become free) and waits for that to be stored, all within CloseTimeout
// and whether or not Context is done (so an actor stopped by cancelling
// its Context leaves cleanly). An error says that the learner may not
// have every frame or the bye (then the learner frees the actor's rows
// only once it finds the actor idle: IngesterConfig.ActorIdle). Closing
// twice does nothing; a Close that failed may be tried again.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(p.cfg.Context), p.cfg.CloseTimeout)
	defer cancel()
	if err := p.flushLocked(ctx); err != nil {
		return fmt.Errorf("remote: closing actor %016x: %w", p.actor, err)
	}
	if p.batch == 0 {
		p.closed = true
		return nil
	}
	if !p.byeQueued {
		p.byeQueued = true
		if err := p.publish(ctx, p.schema.EncodeBye(p.actor, p.seq, p.batch)); err != nil {
			return fmt.Errorf("remote: closing actor %016x: the bye: %w", p.actor, err)
		}
	}
	for len(p.queue) > 0 {
		if err := p.waitOldest(ctx); err != nil {
			return fmt.Errorf("remote: closing actor %016x: the bye: %w", p.actor, err)
		}
	}
	p.closed = true
	return nil
}
