// Package bench measures trajring on the machine at hand, side by side
// with the physical ceiling and with what users would otherwise use, in
// the same run.
//
// Every scenario reports p50 and p99 latency, steps per second, the
// effective bandwidth 2·B·L·S/t (S: bytes per step over every field, plus
// the mask byte for sampled sequences; t: the p50 latency) and that as a
// fraction of two ceilings measured in the same run, interleaved with our
// own timing: a plain contiguous copy() of the same bytes, and a tight
// copy() loop that gathers the same random rows (the rows our sampler just
// drew) from arenas of the same size and page kind into a contiguous
// destination. The second is the yardstick DESIGN.md sets for a random-row
// sample on the CPU (a plain copy runs from cache); PyTorch's index_select,
// a typed gather in C, can beat a Go copy() loop, as the peer columns
// show. On a device backend the ceiling is a device-to-device copy of the
// same bytes, and rows report kernel launches per operation when the
// backend counts them. Peers (NumPy fancy indexing, PyTorch index_select, a plain Go
// slice-of-structs buffer) run over the same layout and are reported as a
// ratio of their time to ours.
//
// The package is used by `trajring bench` and by the Go benchmarks in this
// directory (`go test -bench . -benchmem ./bench`). Nothing in it is safe
// for concurrent use unless its doc comment says so.
package bench
