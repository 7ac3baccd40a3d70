//go:build trajring_cuda

package tensorbuf_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/trajring/trajring/gpu"
	"github.com/trajring/trajring/tensorbuf"
)

// The gpu backend builds DeviceSelection tables' transitions on the device.
var _ tensorbuf.TransitionSelector = (*gpu.Backend)(nil)

// TestDeviceTransitionsHostTime measures the host time of
// Table.SampleTransitionsInto at B=256 (n-step 1 and 3) on the gpu
// backend with DeviceSelection (draw, check, gathers and reward sums
// queued, nothing waited for), and with host selection, next to the cpu
// backend's whole call on a host-selecting table of the same rows, items
// and seed, in the same run, as TestDeviceSelectionHostTime measures
// SampleInto: the best of interleaved rounds of the calling thread's CPU
// time less the stand-in's device time. Set TRAJRING_HOSTTIME=1 to run
// it; TRAJRING_HOSTTIME_OUT=file also writes the table there.
func TestDeviceTransitionsHostTime(t *testing.T) {
	if os.Getenv("TRAJRING_HOSTTIME") == "" {
		t.Skip("set TRAJRING_HOSTTIME=1 to measure host time")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const B, calls, rounds = 256, 1600, 16
	var sb strings.Builder
	fmt.Fprintf(&sb, "%-44s %14s %15s %13s %9s %9s\n", "SampleTransitionsInto B=256", "gpu dev-sel µs", "gpu host-sel µs", "cpu whole µs", "dev/cpu", "launches")
	for _, c := range []struct {
		sel     tensorbuf.Selector
		rows    string
		horizon int
	}{
		{tensorbuf.Uniform, "low-dim", 1},
		{tensorbuf.Uniform, "low-dim", 3},
		{tensorbuf.Uniform, "3KB", 3},
		{tensorbuf.Prioritized, "low-dim", 1},
		{tensorbuf.Prioritized, "low-dim", 3},
		{tensorbuf.Prioritized, "3KB", 3},
	} {
		name := fmt.Sprintf("%v %s n=%d, 8192 items", c.sel, c.rows, c.horizon)
		modes := []string{"dev", "host", "cpu"}
		setups := make([]*transHostTimeSetup, len(modes))
		for i, mode := range modes {
			setups[i] = newTransHostTimeSetup(t, mode, c.sel, c.rows)
		}
		runs := make([]hostRun, len(setups))
		opt := tensorbuf.NStepOptions{Horizon: c.horizon, DiscountFactor: 0.99}
		for i, su := range setups {
			runs[i] = hostRun{be: su.be, run: func(k int) { su.run(t, B, k, opt) }}
		}
		sb.WriteString(hostTimeRow(t, setups[0].g, runs, calls, rounds, "%-44s %14.2f %15.1f %13.1f %8.3fx %9.1f\n", name))
		for _, su := range setups {
			su.close()
		}
	}
	reportHostTimes(t, sb.String())
}

// transHostTimeSetup is one table of TestDeviceTransitionsHostTime: 256
// rows of 64 steps on the gpu backend with device selection ("dev") or
// host selection ("host"), or on the cpu backend ("cpu"), and 32 items
// of four steps per row.
type transHostTimeSetup struct {
	*hostTimeSetup
	tr *tensorbuf.TableTransitions
}

func newTransHostTimeSetup(t *testing.T, mode string, sel tensorbuf.Selector, rows string) *transHostTimeSetup {
	t.Helper()
	const envs, capacity, perRow = 256, 64, 32
	return &transHostTimeSetup{
		hostTimeSetup: newHostTimeSetup(t, mode, sel, rows, envs, capacity, perRow, func(r int, s int64) tensorbuf.Item {
			return tensorbuf.Item{Row: r, Start: s * 60 / perRow, Len: 4}
		}),
		tr: new(tensorbuf.TableTransitions),
	}
}

// run samples n transitions k times.
func (su *transHostTimeSetup) run(t *testing.T, n, k int, opt tensorbuf.NStepOptions) {
	ctx := context.Background()
	for range k {
		if err := su.tbl.SampleTransitionsInto(ctx, su.tr, n, opt); err != nil {
			t.Fatal(err)
		}
	}
}

func (su *transHostTimeSetup) close() {
	_ = su.be.Sync()
	_ = su.tr.Release()
	su.hostTimeSetup.close()
}
