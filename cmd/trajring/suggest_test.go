package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestUnknownFlagSuggests: an unknown flag is reported in the dash style
// the user typed, with the nearest flag when one is close; before, demo
// -step 100 said "unknown flag: --step" with no suggestion.
func TestUnknownFlagSuggests(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"demo", "-step", "100"}, "trajring demo: unknown flag: -step (did you mean -steps?) (see 'trajring demo -h')\n"},
		{[]string{"demo", "--step=100"}, "trajring demo: unknown flag: --step (did you mean --steps?) (see 'trajring demo -h')\n"},
		{[]string{"demo", "-evns", "4"}, "trajring demo: unknown flag: -evns (did you mean -envs?) (see 'trajring demo -h')\n"},
		{[]string{"demo", "-bakcend", "cpu"}, "trajring demo: unknown flag: -bakcend (did you mean -backend?) (see 'trajring demo -h')\n"},
		{[]string{"demo", "-zzzz"}, "trajring demo: unknown flag: -zzzz (see 'trajring demo -h')\n"},
		{[]string{"serve", "-stat-every", "1s"}, "trajring serve: unknown flag: -stat-every (did you mean -stats-every?) (see 'trajring serve -h')\n"},
	} {
		var out, errb bytes.Buffer
		if code := run(tc.args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2", tc.args, code)
		}
		if errb.String() != tc.want {
			t.Errorf("%v: stderr %q, want %q", tc.args, errb.String(), tc.want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"", "abc", 3}, {"step", "steps", 1}, {"evns", "envs", 1}, {"ca", "abc", 3},
		{"kitten", "sitting", 3}, {"flaw", "lawn", 2}, {"same", "same", 0},
	} {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := editDistance(tc.b, tc.a); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d (symmetric)", tc.b, tc.a, got, tc.want)
		}
	}
	if s := strings.Repeat("x", 3); nearestFlag(newDemoCmd(), s) != "" {
		t.Errorf("nearestFlag(%q) suggests a flag", s)
	}
}
