package bench

import (
	"fmt"
	"regexp"
)

// Scenarios returns the names of the scenarios a run of mode measures
// with filter (nil: all), in the order they run. It allocates nothing
// and runs nothing; it is safe for concurrent use. The names follow the
// groups of scenarios.go and drivers.go (a test checks them against a
// saved full report).
func Scenarios(mode Mode, filter *regexp.Regexp) []string {
	var all []string
	// pixelGroup: 256 envs of 4096 steps (512 in quick mode).
	pixelSteps := 256 * 4096
	if mode == Quick {
		pixelSteps = 256 * 512
	}
	suffix := fmt.Sprintf(" (%s steps)", fmtRate(float64(pixelSteps)))
	all = append(all, "sample pixels L=1 B=256"+suffix, "transitions pixels B=256"+suffix,
		"sample pixels L=64 padded B=32"+suffix, "table uniform pixels B=256"+suffix)
	for _, b := range stackedBatches(mode) {
		all = append(all, stackedRowName(4, b, suffix))
	}
	// lowDimGroup: 16 envs of 62500 steps.
	items := 16 * 62500
	if mode == Quick {
		items = 4 * 62500
	}
	all = append(all, "sample lowdim L=4 B=256 (1M steps)")
	for _, b := range []int{16, 256, 4096, 65536} {
		all = append(all, fmt.Sprintf("sample lowdim L=1 B=%d (1M steps)", b))
	}
	for _, kind := range []string{"table uniform lowdim", "prioritized lowdim"} {
		for _, b := range []int{256, 65536} {
			all = append(all, fmt.Sprintf("%s B=%d (%s items)", kind, b, fmtRate(float64(items))))
		}
	}
	all = append(all, fmt.Sprintf("export lowdim batch (%s transitions)", fmtRate(float64(16*62500))))
	// capacityGroup.
	caps := []int{625, 6250, 62500}
	if mode == Full {
		caps = append(caps, 625000)
	}
	for _, c := range caps {
		all = append(all, fmt.Sprintf("sample lowdim L=1 B=256 capacity %s", fmtRate(float64(16*c))))
	}
	// addGroup.
	total := 1 << 20
	if mode == Quick {
		total = 1 << 16
	}
	for _, w := range []int{1, 16, 128, 1024} {
		all = append(all, fmt.Sprintf("add pixels W=%d (%s steps)", w, fmtRate(float64(total))))
	}
	// driverGroup.
	for _, n := range []int{1, 16, 256} {
		all = append(all, fmt.Sprintf("driver noop envs=%d", n))
	}
	for _, n := range []int{1, 256} {
		all = append(all, fmt.Sprintf("driver cartpole envs=%d", n))
	}
	all = append(all, "collect cartpole envs=256 -> buffer (L=2 items)")
	// pythonGroup.
	for _, pr := range pythonRows(mode) {
		all = append(all, pr.name)
	}
	if filter == nil {
		return all
	}
	var out []string
	for _, n := range all {
		if filter.MatchString(n) {
			out = append(out, n)
		}
	}
	return out
}
