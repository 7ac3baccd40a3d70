//go:build trajring_cuda

package dqn

import (
	"runtime"
	"testing"
	"time"
)

// BenchmarkDeviceTrainRound times DeviceLearner.TrainStep as
// RunCartPole's gpu backend runs it with uniform replay: b.N steps
// queued back to back and one Sync at the end, so that the device works
// through the queue while the host queues more (BenchmarkDeviceTrainStep
// syncs after every step). It reports steps/s and the calling thread's
// CPU time per step less the stand-in's device time (host-ns/step), at
// RL Zoo's CartPole settings (MLP 256x256, batch 64).
func BenchmarkDeviceTrainRound(b *testing.B) {
	cfg := DefaultConfig()
	cfg.ObsDim, cfg.NumActions = 4, 2
	p := newLearnerPair(b, cfg, 1)
	if err := p.be.Sync(); err != nil {
		b.Fatal(err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ResetTimer()
	t0, c0, dev0 := time.Now(), threadCPU(b), standinTime()
	for range b.N {
		if err := p.dev.TrainStep(p.db); err != nil {
			b.Fatal(err)
		}
	}
	host := threadCPU(b) - c0 - (standinTime() - dev0)
	if err := p.be.Sync(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/time.Since(t0).Seconds(), "steps/s")
	b.ReportMetric(float64(host.Nanoseconds())/float64(b.N), "host-ns/step")
}
