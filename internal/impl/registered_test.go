package impl_test

import (
	"fmt"
	"testing"

	_ "github.com/trajring/trajring/internal/explog"
	"github.com/trajring/trajring/internal/impl"
	_ "github.com/trajring/trajring/internal/philox"
	_ "github.com/trajring/trajring/internal/rowmove"
	_ "github.com/trajring/trajring/internal/treestep"
)

// TestRegistered checks that every package with assembly registers its
// loops, in order of preference, in every build (unavailable where the
// build or CPU lacks them), switched on exactly where available.
func TestRegistered(t *testing.T) {
	want := map[string][]string{
		"philox":   {"avx2", "avx512"},
		"treestep": {"avx2", "avx512"},
		"explog":   {"avx2", "avx512"},
		"rowmove":  {"wide", "rep"},
	}
	for pkg, names := range want {
		var got []string
		for _, im := range impl.List(pkg) {
			got = append(got, im.Name)
			if im.On != im.Available {
				t.Errorf("%s/%s: on %v, available %v", pkg, im.Name, im.On, im.Available)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(names) {
			t.Errorf("%s registers %v, want %v", pkg, got, names)
		}
	}
}
