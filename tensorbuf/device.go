package tensorbuf

import (
	"fmt"
	"sort"
	"strings"

	"github.com/trajring/trajring/kernels"
	"gorgonia.org/tensor"
)

// ErrDeviceTensor reports a tensor backed by device memory (one a gpu
// backend returned, which gorgonia.org/tensor marks as not natively
// accessible) passed where host memory is read, or to Writer.Add of a
// buffer whose backend cannot read it in place (ErrForeignTensor wraps
// it). It wraps ErrInvalidArg. Copy such tensors to the host first
// (Batch.Host, Transitions.Host).
var ErrDeviceTensor = fmt.Errorf("%w: device tensor where host memory is needed", ErrInvalidArg)

// Event marks a point in a backend's work (see kernels.Event).
type Event = kernels.Event

// Streamer is implemented by backends that run work asynchronously on a
// device stream (the gpu backend of cuda builds); see kernels.Streamer.
// After SampleInto or SampleTransitionsInto, Record an event that a GPU
// consumer waits on from its own stream (cuStreamWaitEvent on Handle);
// before the next SampleInto into the same batch, WaitHandle on the
// consumer's "done" event, so the gather does not overwrite the batch
// while the consumer still reads it. BatchSource does both.
type Streamer = kernels.Streamer

// hostTensor reports an error wrapping ErrDeviceTensor, naming field,
// when d's memory is not host-accessible. It allocates only on error.
func hostTensor(d *tensor.Dense, field string) error {
	if d != nil && !d.IsNativelyAccessible() {
		return fmt.Errorf("%w: field %q", ErrDeviceTensor, field)
	}
	return nil
}

// describe writes "name: dtype[shape]" of a tensor, never its data.
func describe(sb *strings.Builder, name string, d *tensor.Dense) {
	if d == nil {
		fmt.Fprintf(sb, " %s: nil", name)
		return
	}
	fmt.Fprintf(sb, " %s: %v%v", name, d.Dtype(), []int(d.Shape()))
}

func describeMap(sb *strings.Builder, m map[string]*tensor.Dense) {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		describe(sb, k, m[k])
	}
}

// String describes the batch by the dtypes and shapes of its tensors and
// its number of items; it never reads tensor data, so it is safe on
// device batches. Not safe for use concurrently with a SampleInto into
// the batch.
func (bt *Batch) String() string {
	if bt == nil {
		return "Batch(nil)"
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "Batch{items: %d, length: %d;", len(bt.Items), bt.l)
	describeMap(&sb, bt.Fields)
	describe(&sb, "StepType", bt.StepType)
	describe(&sb, "NextStepType", bt.NextStepType)
	describe(&sb, "Reward", bt.Reward)
	describe(&sb, "Discount", bt.Discount)
	describe(&sb, "Mask", bt.Mask)
	sb.WriteString("}")
	return sb.String()
}

// Format prints String for every verb (%v, %+v, %#v, %s...), so that fmt
// never walks into the tensors, whose Format reads their data.
func (bt *Batch) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(bt.String())) }

// String describes the transitions by the dtypes and shapes of their
// tensors; it never reads tensor data. Not safe for use concurrently with
// a sample into tr.
func (tr *Transitions) String() string {
	if tr == nil {
		return "Transitions(nil)"
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "Transitions{count: %d;", len(tr.Rows))
	describeMap(&sb, tr.Observation)
	describeMap(&sb, tr.Action)
	describeMap(&sb, tr.PolicyInfo)
	sb.WriteString(" next:")
	describeMap(&sb, tr.NextObservation)
	describe(&sb, "Reward", tr.Reward)
	describe(&sb, "Discount", tr.Discount)
	describe(&sb, "IsDone", tr.IsDone)
	sb.WriteString("}")
	return sb.String()
}

// Format prints String for every verb; see Batch.Format.
func (tr *Transitions) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(tr.String())) }
