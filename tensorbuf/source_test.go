package tensorbuf_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/tensorbuf"
)

func sourceTable(t *testing.T, be tensorbuf.Backend) (*tensorbuf.Buffer, *tensorbuf.Writer, *tensorbuf.Table) {
	t.Helper()
	buf, err := tensorbuf.New(tensorbuf.Config{NumEnvs: 4, Capacity: 16, Fields: hostTimeFields["low-dim"], Seed: 1, Backend: be})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = buf.Close() })
	w, err := buf.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := buf.NewTable(tensorbuf.TableConfig{Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	step := fullStep(hostTimeFields["low-dim"], 4)
	for s := range 8 {
		obs := step.Values["obs"].Data().([]float32)
		for i := range obs {
			obs[i] = float32((i/8)*1000 + s)
		}
		if err := w.Add(step); err != nil {
			t.Fatal(err)
		}
		for r := range 4 {
			if _, err := tbl.Insert(tensorbuf.Item{Row: r, Start: int64(s), Len: 1, Priority: 1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return buf, w, tbl
}

func TestBatchSourceHandsOutBatchesInTurn(t *testing.T) {
	_, _, tbl := sourceTable(t, cpu.New())
	ctx := context.Background()
	if _, err := tensorbuf.NewBatchSource(tbl, 0, 2); !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Fatalf("n=0: %v", err)
	}
	src, err := tensorbuf.NewBatchSource(tbl, 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	b0, ev0, err := src.Next(ctx)
	if err != nil || ev0 != nil {
		t.Fatalf("Next: %v, event %v (want nil on the cpu backend)", err, ev0)
	}
	b1, _, err := src.Next(ctx)
	if err != nil || b1 == b0 {
		t.Fatalf("second Next: %v, same batch %v", err, b1 == b0)
	}
	if _, _, err := src.Next(ctx); !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Fatalf("Next with every batch out: %v, want ErrInvalidArg", err)
	}
	if err := src.Done(b0, 0); err != nil {
		t.Fatal(err)
	}
	if err := src.Done(b0, 0); !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Fatalf("Done twice: %v", err)
	}
	if err := src.Done(new(tensorbuf.Batch), 0); !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Fatalf("Done of a foreign batch: %v", err)
	}
	b2, _, err := src.Next(ctx)
	if err != nil || b2 != b0 {
		t.Fatalf("Next after Done: %v, reused batch 0: %v", err, b2 == b0)
	}
	if n, _ := b2.Len(); n != 4 {
		t.Fatalf("batch of %d items", n)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := src.Next(ctx); !errors.Is(err, tensorbuf.ErrClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
}

func TestBatchPrintsShapesNotData(t *testing.T) {
	_, _, tbl := sourceTable(t, cpu.New())
	bt, err := tbl.Sample(context.Background(), 4)
	if err != nil {
		t.Fatal(err)
	}
	want := "Batch{items: 4, length: 1; act: int64[4 1] obs: float32[4 1 8] StepType: int32[4 1] NextStepType: int32[4 1] Reward: float32[4 1] Discount: float32[4 1] Mask: bool[4 1]}"
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		if got := fmt.Sprintf(verb, bt); got != want {
			t.Errorf("%s: %s\nwant %s", verb, got, want)
		}
	}
	tr, err := tbl.Sample(context.Background(), 4)
	if err != nil {
		t.Fatal(err)
	}
	if s := fmt.Sprint(tr); strings.Contains(s, "1000") {
		t.Errorf("printing a batch printed data: %s", s)
	}
}
