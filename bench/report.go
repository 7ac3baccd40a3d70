package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"
)

// Peer names, in table order.
const (
	PeerNumPy  = "numpy"
	PeerTorch1 = "torch-1thread"
	PeerTorch  = "torch"
	PeerGoPerm = "go-structs-perm"
	PeerGoIntN = "go-structs"
	// PeerUniformTable is a prioritized row's yardstick, not a peer: the
	// uniform table of the same items, sampled in the same rounds.
	PeerUniformTable = "uniform-table"
	// PeerGoLoop, on the "python env" rows, is the same env loop run in
	// Go inside the library that Python drives (trj_env_run_go).
	PeerGoLoop = "go-loop"
)

// peerOrder is the column order of peers in the markdown table.
var peerOrder = []string{PeerNumPy, PeerTorch1, PeerTorch, PeerGoPerm, PeerGoIntN, PeerUniformTable, PeerGoLoop}

// PeerResult is one peer's measurement of a scenario.
type PeerResult struct {
	Name  string `json:"name"`
	Stats Stats  `json:"stats"`
	// Ratio is the peer's p50 over ours: 2 means we take half its time.
	Ratio float64 `json:"ratio_to_ours"`
	// GBps is the effective bandwidth of the peer's p50 for the same bytes.
	GBps float64 `json:"gbps"`
}

// Row is one scenario's result. It is not safe for concurrent mutation.
type Row struct {
	Scenario string `json:"scenario"`
	Group    string `json:"group"`
	Layout   string `json:"layout,omitempty"`
	Backend  string `json:"backend"`
	// B items of L steps per operation, S bytes per step; Capacity is the
	// number of steps the buffer holds (rows x steps per row).
	B        int   `json:"b"`
	L        int   `json:"l"`
	S        int64 `json:"step_bytes"`
	Capacity int64 `json:"capacity_steps"`
	// Bytes is the effective traffic per operation: 2·B·L·S.
	Bytes int64 `json:"bytes_per_op"`
	Ours  Stats `json:"ours"`
	// StepsPerSec is B·L over the p50 latency (env steps per second for
	// driver rows).
	StepsPerSec float64 `json:"steps_per_sec"`
	GBps        float64 `json:"gbps"`
	// Plain and Gather are the ceilings measured in the same run; the
	// fractions are their p50 over ours (1 means at the ceiling).
	Plain      *Stats  `json:"plain_copy,omitempty"`
	Gather     *Stats  `json:"gather_copy,omitempty"`
	PlainGBps  float64 `json:"plain_copy_gbps,omitempty"`
	GatherGBps float64 `json:"gather_copy_gbps,omitempty"`
	FracPlain  float64 `json:"frac_of_plain_copy,omitempty"`
	FracGather float64 `json:"frac_of_gather_copy,omitempty"`
	// Cold is a contiguous copy of the same bytes from a source larger
	// than the last-level cache (the memory-bandwidth bound of a random-row
	// gather), on ceilings that measure it; FracCold is its p50 over ours.
	Cold     *Stats       `json:"cold_copy,omitempty"`
	ColdGBps float64      `json:"cold_copy_gbps,omitempty"`
	FracCold float64      `json:"frac_of_cold_copy,omitempty"`
	Peers    []PeerResult `json:"peers,omitempty"`
	// LaunchesPerOp counts kernel launches per operation on a device
	// backend that reports them; 0 elsewhere.
	LaunchesPerOp float64 `json:"launches_per_op,omitempty"`
	Note          string  `json:"note,omitempty"`
	// File-backed rows (the "huge ..." rows of RunHuge): the fraction of
	// the buffer resident in memory after the row, the disk's random 4 KiB
	// read latency measured in the same run (one read at a time), the 4 KiB
	// pages read from disk per operation, and the ceiling they imply read
	// one at a time (pages per op times the read's p50).
	Resident      float64 `json:"resident_fraction,omitempty"`
	Disk          *Stats  `json:"disk_read_4k,omitempty"`
	ReadsPerOp    float64 `json:"disk_reads_per_op,omitempty"`
	DiskCeilingNS float64 `json:"disk_ceiling_ns,omitempty"`
}

// Peer returns the named peer's result, or nil.
func (r *Row) Peer(name string) *PeerResult {
	for i := range r.Peers {
		if r.Peers[i].Name == name {
			return &r.Peers[i]
		}
	}
	return nil
}

// finish computes the derived figures of a row from its stats.
func (r *Row) finish() {
	r.Bytes = 2 * int64(r.B) * int64(r.L) * r.S
	if r.Ours.P50 > 0 {
		r.StepsPerSec = float64(r.B) * float64(r.L) / r.Ours.P50 * 1e9
	}
	r.GBps = GBps(float64(r.Bytes), r.Ours.P50)
	if r.Plain != nil {
		r.PlainGBps = GBps(float64(r.Bytes), r.Plain.P50)
		r.FracPlain = Ratio(r.Plain.P50, r.Ours.P50)
	}
	if r.Gather != nil {
		r.GatherGBps = GBps(float64(r.Bytes), r.Gather.P50)
		r.FracGather = Ratio(r.Gather.P50, r.Ours.P50)
	}
	if r.Cold != nil {
		r.ColdGBps = GBps(float64(r.Bytes), r.Cold.P50)
		r.FracCold = Ratio(r.Cold.P50, r.Ours.P50)
	}
	for i := range r.Peers {
		p := &r.Peers[i]
		p.Ratio = Ratio(p.Stats.P50, r.Ours.P50)
		p.GBps = GBps(float64(r.Bytes), p.Stats.P50)
	}
}

// Machine describes where a report was measured.
type Machine struct {
	Host       string `json:"host"`
	CPU        string `json:"cpu"`
	Cores      int    `json:"cores"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	Go         string `json:"go"`
	MemTotal   string `json:"mem_total,omitempty"`
	THP        string `json:"transparent_hugepage,omitempty"`
}

// Skip records a peer or scenario that did not run, and why.
type Skip struct {
	What   string `json:"what"`
	Reason string `json:"reason"`
}

// Report is the result of a run. Its methods only read it (safe for
// concurrent use as long as nothing modifies the report).
type Report struct {
	Date     time.Time         `json:"date"`
	Mode     string            `json:"mode"`
	Backend  string            `json:"backend"`
	Machine  Machine           `json:"machine"`
	Rows     []Row             `json:"rows"`
	Skipped  []Skip            `json:"skipped,omitempty"`
	Versions map[string]string `json:"versions,omitempty"`
	Notes    []string          `json:"notes,omitempty"`
	// Filter is the -run expression of a run that measured only the
	// scenarios it matches (make bench-python); empty for a whole run.
	Filter string `json:"filter,omitempty"`
}

// DescribeMachine reads the CPU model and memory from /proc where it
// exists. It is safe for concurrent use.
func DescribeMachine() Machine {
	m := Machine{
		Cores:      runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		OS:         runtime.GOOS,
		Arch:       runtime.GOARCH,
		Go:         runtime.Version(),
	}
	m.Host, _ = os.Hostname()
	m.CPU = procField("/proc/cpuinfo", "model name")
	m.MemTotal = procField("/proc/meminfo", "MemTotal")
	if b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled"); err == nil {
		m.THP = strings.TrimSpace(string(b))
	}
	return m
}

// procField returns the value of the first "key: value" line of a file.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// WriteJSON writes the report as indented JSON.
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// ReadJSON reads a report written by WriteJSON. It is safe for concurrent
// use.
func ReadJSON(r io.Reader) (*Report, error) {
	var rep Report
	if err := json.NewDecoder(r).Decode(&rep); err != nil {
		return nil, fmt.Errorf("bench: reading report: %w", err)
	}
	return &rep, nil
}

// FileName returns bench/results' file name for a report:
// <host>-<date>.json, the date in UTC as YYYYMMDD-HHMMSS.
func (rep *Report) FileName() string {
	host := rep.Machine.Host
	if host == "" {
		host = "unknown"
	}
	host = strings.Map(func(r rune) rune {
		if r == '/' || r == ' ' || r == os.PathSeparator {
			return '_'
		}
		return r
	}, host)
	return fmt.Sprintf("%s-%s.json", host, rep.Date.UTC().Format("20060102-150405"))
}

// fmtDur formats nanoseconds as microseconds with 3 significant digits.
func fmtDur(ns float64) string {
	if ns <= 0 {
		return "-"
	}
	return sig3(ns / 1e3)
}

func sig3(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	case v >= 1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

func fmtRate(v float64) string {
	switch {
	case v <= 0:
		return "-"
	case v >= 1e9:
		return fmt.Sprintf("%.2fG", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

func fmtFrac(v float64) string {
	switch {
	case v <= 0:
		return "-"
	case v < 0.1:
		return fmt.Sprintf("%.1f%%", 100*v)
	}
	return fmt.Sprintf("%.0f%%", 100*v)
}

func fmtRatio(p *PeerResult) string {
	if p == nil || p.Ratio <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", p.Ratio)
}

// Markdown writes the report as a markdown table, with the machine, the
// skipped peers and the notes below it.
func (rep *Report) Markdown(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "trajring bench (%s mode, %s backend), %s\n\n", rep.Mode, rep.Backend, rep.Date.UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(bw, "| scenario | B | L | S bytes | capacity | p50 µs | p99 µs | steps/s | GB/s | of plain copy | of gather copy | of cold copy | allocs/op |")
	for _, p := range peerOrder {
		fmt.Fprintf(bw, " %s |", p)
	}
	fmt.Fprintln(bw)
	fmt.Fprint(bw, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for range peerOrder {
		fmt.Fprint(bw, "--:|")
	}
	fmt.Fprintln(bw)
	for i := range rep.Rows {
		r := &rep.Rows[i]
		gb := "-"
		if r.S > 0 {
			gb = sig3(r.GBps)
		}
		fmt.Fprintf(bw, "| %s | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |",
			r.Scenario, r.B, r.L, dash(r.S), fmtRate(float64(r.Capacity)), fmtDur(r.Ours.P50), fmtDur(r.Ours.P99),
			fmtRate(r.StepsPerSec), gb, fmtFrac(r.FracPlain), fmtFrac(r.FracGather), fmtFrac(r.FracCold), fmtAllocs(r.Ours.AllocsPerOp))
		for _, p := range peerOrder {
			fmt.Fprintf(bw, " %s |", fmtRatio(r.Peer(p)))
		}
		fmt.Fprintln(bw)
	}
	fmt.Fprintln(bw)
	fmt.Fprintln(bw, "GB/s = 2·B·L·S / p50. \"of plain copy\" / \"of gather copy\" / \"of cold copy\": yardstick p50 over ours, measured in the same run, interleaved (plain copy: the same bytes contiguous, hot in cache; gather copy: a tight copy() loop over the same random rows, same page kind; cold copy: the same bytes contiguous from a source larger than the last-level cache, the memory-bandwidth bound of a random-row gather). Peer columns: peer p50 over ours (above 1× means trajring is faster), every peer in the same rounds as ours and the yardsticks (within a round every contestant, the Python peers too, takes turns of at most 10 ms, so that each meets the machine's slow stretches as the others do); ours' add rows add one reused Step with its fields by position (Step.Fields); numpy: fancy indexing, torch: index_select (one thread, then default threads), both over the same per-column layout and, on sample rows, the same draws as ours (ring step indices read from a file, so no random draw is timed in them; windows that wrap the ring are moved to end at its last slot); go-structs-perm: a slice of step structs sampled with rand.Perm per call, go-structs: the same with rand.IntN draws (add rows: struct copies of a prepared batch into each row's slot); neither Go peer validates anything beyond Go's bounds checks (no step-type, finiteness, shape, dtype or row-ownership checks, no step metadata, no locking), which trajring does on every call; uniform-table, on prioritized rows: the uniform table of the same items, sampled in the same rounds (below 1× as it does less work). Driver rows: steps/s are env steps per second.")
	m := rep.Machine
	fmt.Fprintf(bw, "\nMachine: %s, %d cores (GOMAXPROCS %d), %s, %s/%s, %s, THP %q.\n", m.CPU, m.Cores, m.GOMAXPROCS, m.MemTotal, m.OS, m.Arch, m.Go, m.THP)
	for _, s := range rep.Skipped {
		fmt.Fprintf(bw, "- skipped %s: %s\n", s.What, s.Reason)
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(bw, "- %s\n", n)
	}
	return bw.Flush()
}

// fmtAllocs formats allocations per operation; negative: not measured
// (ours in Python).
func fmtAllocs(v float64) string {
	if v < 0 {
		return "-"
	}
	return sig3(v)
}

func dash(v int64) string {
	if v <= 0 {
		return "-"
	}
	return fmt.Sprint(v)
}
