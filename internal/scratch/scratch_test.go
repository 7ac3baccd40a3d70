package scratch

import (
	"slices"
	"testing"
)

func TestGrowAndZeroed(t *testing.T) {
	cases := []struct {
		name      string
		start     []int
		n         int
		zero      bool
		want      []int
		reuse     bool // whether the result shares start's array
		wantCapGE int
	}{
		{"nil to 3", nil, 3, false, []int{0, 0, 0}, false, 3},
		{"shrink keeps values", []int{1, 2, 3, 4}, 2, false, []int{1, 2}, true, 4},
		{"regrow within cap keeps values", []int{5, 6, 7, 8}[:1], 3, false, []int{5, 6, 7}, true, 4},
		{"past cap is new and zero", []int{1, 2}, 3, false, []int{0, 0, 0}, false, 3},
		{"zeroed within cap", []int{1, 2, 3}, 2, true, []int{0, 0}, true, 3},
		{"zeroed past cap", []int{1}, 2, true, []int{0, 0}, false, 2},
		{"zero elements", []int{9}, 0, false, []int{}, true, 1},
	}
	for _, tc := range cases {
		s := tc.start
		var got []int
		if tc.zero {
			got = Zeroed(&s, tc.n)
		} else {
			got = Grow(&s, tc.n)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
		if len(s) != tc.n || cap(s) < tc.wantCapGE || (len(got) > 0 && &s[0] != &got[0]) {
			t.Errorf("%s: *s is %v (cap %d), want the result, cap >= %d", tc.name, s, cap(s), tc.wantCapGE)
		}
		shares := cap(tc.start) > 0 && cap(got) > 0 && &tc.start[:1][0] == &got[:1][0]
		if shares != tc.reuse {
			t.Errorf("%s: shares the old array %v, want %v", tc.name, shares, tc.reuse)
		}
	}
}
