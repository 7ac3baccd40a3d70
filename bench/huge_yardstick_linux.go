package bench

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"time"
	"unsafe"

	"github.com/trajring/trajring/internal/prefetch"
)

// The huge sweep's physical yardstick (issue 44 item 3: "at 100M steps
// within 1.5x the 1M time"): what the machine itself takes to read, at
// random, the cache lines a B=256 sample reads, from a plain anonymous
// arena of the buffer's ring bytes (2 MiB pages asked for, as the
// buffer's arenas are), with the best software prefetch found in the
// same run. Its 100M/1M ratio says how much of the buffer's ratio the
// memory system alone imposes.

// yardDistances are the prefetch distances, in runs, that a yardstick
// tries before timing (the best p50 is kept): a chunk of that many runs
// is prefetched while the chunk before it is read. From a 4 GB arena the
// first runs of the sweep chose 64, the largest then tried, every time.
var yardDistances = []int{4, 8, 16, 32, 64, 128, 256}

// yardCalibOps is the reads per distance of a yardstick's calibration.
const yardCalibOps = 200

// yardstick reads runs of bytes at random offsets of a plain arena.
type yardstick struct {
	mem  []byte
	rng  *rand.Rand
	offs []int64
	sink uint64
}

// newYardstick maps n bytes of anonymous memory, asks for 2 MiB pages
// (MADV_HUGEPAGE, as cpu's arenas do) and touches every page.
func newYardstick(n int64) (*yardstick, error) {
	mem, err := syscall.Mmap(-1, 0, int(n), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, fmt.Errorf("bench: yardstick arena of %d bytes: %w", n, err)
	}
	_ = syscall.Madvise(mem, 14) // MADV_HUGEPAGE; a hint
	for i := int64(0); i < n; i += 4096 {
		mem[i] = byte(i >> 12)
	}
	return &yardstick{mem: mem, rng: rand.New(rand.NewPCG(11, uint64(time.Now().UnixNano())))}, nil
}

func (y *yardstick) close() { _ = syscall.Munmap(y.mem) }

// yardRuns is what one yardstick operation reads: n runs of span bytes,
// each at a random multiple of align bytes.
type yardRuns struct {
	n           int
	span, align int64
}

// lineRuns is the brief's yardstick: as many random 64-byte lines as a
// sample of b windows of l steps of stride-byte records touches.
func lineRuns(b, l int, stride int64) yardRuns {
	return yardRuns{n: int(sampleLines(b, l, stride) + 0.5), span: 64, align: 64}
}

// windowRuns is the sample's own shape: b random windows of l records of
// stride bytes (each window's lines adjacent, as a sample's are).
func windowRuns(b, l int, stride int64) yardRuns {
	return yardRuns{n: b, span: int64(l) * stride, align: stride}
}

// sampleLines returns the expected number of 64-byte lines that b windows
// of l consecutive stride-byte records touch, each window starting at a
// random record of an arena whose records start at line-aligned memory:
// the mean over a record's possible offsets within a line.
func sampleLines(b, l int, stride int64) float64 {
	span := int64(l) * stride
	var sum int64
	const n = 64 // offsets k*stride mod 64 repeat within 64 records
	for k := range int64(n) {
		off := k * stride % 64
		sum += (off + span + 63) / 64
	}
	return float64(b) * float64(sum) / n
}

// times times ops reads of r prefetched dist runs ahead (after 20 untimed
// ones), drawing each operation's offsets before its timer starts.
func (y *yardstick) times(r yardRuns, dist, ops int) []float64 {
	if cap(y.offs) < r.n {
		y.offs = make([]int64, r.n)
	}
	offs := y.offs[:r.n]
	slots := (int64(len(y.mem)) - r.span) / r.align
	ns := make([]float64, 0, ops)
	for k := range ops + 20 {
		for i := range offs {
			offs[i] = y.rng.Int64N(slots) * r.align
		}
		t0 := time.Now()
		y.sink += readRuns(unsafe.Pointer(unsafe.SliceData(y.mem)), offs, r.span, dist)
		d := time.Since(t0)
		if k >= 20 {
			ns = append(ns, float64(d.Nanoseconds()))
		}
	}
	return ns
}

// calibrate returns the distance of yardDistances whose reads of r have
// the lowest p50, and that p50.
func (y *yardstick) calibrate(r yardRuns) (best int, p50 float64) {
	for _, d := range yardDistances {
		st, err := Summarise(y.times(r, d, yardCalibOps))
		if err == nil && (best == 0 || st.P50 < p50) {
			best, p50 = d, st.P50
		}
	}
	return best, p50
}

// readRuns reads every 64-byte line of the runs base+offs[i] .. +span-1
// (two words of each line, which brings the whole line), prefetching every
// line of the next dist runs while it reads the current ones, and returns
// a sum of the words read so the reads are not optimized away.
//
//go:noinline
func readRuns(base unsafe.Pointer, offs []int64, span int64, dist int) uint64 {
	n := len(offs)
	prefetch.Records(base, offs[:min(dist, n)], 1, span)
	var acc uint64
	for c0 := 0; c0 < n; c0 += dist {
		c1 := min(c0+dist, n)
		if c1 < n {
			prefetch.Records(base, offs[c1:min(c1+dist, n)], 1, span)
		}
		for _, off := range offs[c0:c1] {
			first, last := off&^63, (off+span-1)&^63
			for l := first; l <= last; l += 64 {
				w := (*[8]uint64)(unsafe.Add(base, l))
				acc += w[0] ^ w[7]
			}
		}
	}
	return acc
}

// anonPages returns the resident kilobytes of the process's anonymous
// mappings and how many of them are on transparent huge pages (Rss and
// AnonHugePages summed over /proc/self/smaps), or -1s when unknown. The
// difference across an allocation says how much of the memory it added is
// on 2 MiB pages (adjacent arenas share a mapping, so one mapping's figures
// would mix them).
func anonPages() (rss, huge int64) {
	rss, huge, err := smapsSum(func(fs []string) bool { return len(fs) == 5 }, "AnonHugePages:") // no path: anonymous
	if err != nil {
		return -1, -1
	}
	return rss, huge
}

// hugeShare returns the fraction of the anonymous memory added between two
// anonPages readings that is on huge pages, or -1 when unknown.
func hugeShare(rss0, huge0, rss1, huge1 int64) float64 {
	if rss0 < 0 || rss1 <= rss0 {
		return -1
	}
	return min(1, max(0, float64(huge1-huge0)/float64(rss1-rss0)))
}
