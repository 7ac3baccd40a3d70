package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// unknownFlag rewrites pflag's "unknown flag: --name" for cmd in the dash
// style the user typed in args (longFlags turns -name into --name before
// pflag sees it) and adds the nearest flag of cmd, if one is close:
// "unknown flag: -step (did you mean -steps?)". Other messages are
// returned unchanged.
func unknownFlag(cmd *cobra.Command, args []string, msg string) string {
	name, ok := strings.CutPrefix(msg, "unknown flag: --")
	if !ok || name == "" || strings.ContainsAny(name, " =") {
		return msg
	}
	dash := "--"
	if slices.ContainsFunc(args, func(a string) bool { return a == "-"+name || strings.HasPrefix(a, "-"+name+"=") }) {
		dash = "-"
	}
	out := "unknown flag: " + dash + name
	if near := nearestFlag(cmd, name); near != "" {
		out += fmt.Sprintf(" (did you mean %s%s?)", dash, near)
	}
	return out
}

// nearestFlag returns the name of cmd's flag closest to name: one that
// name is a prefix of, or else the one at the smallest edit distance if
// that is at most a third of name's length (at least 1); "" when none is
// close. Ties go to the flag listed first.
func nearestFlag(cmd *cobra.Command, name string) string {
	best, bestD := "", len(name)/3
	if bestD < 1 {
		bestD = 1
	}
	prefix := ""
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		if prefix == "" && strings.HasPrefix(f.Name, name) {
			prefix = f.Name
		}
		if d := editDistance(name, f.Name); d <= bestD && (best == "" || d < editDistance(name, best)) {
			best = f.Name
		}
	})
	if prefix != "" {
		return prefix
	}
	return best
}

// editDistance is the optimal-string-alignment distance between a and b
// (bytes): Levenshtein's insertions, deletions and substitutions, plus a
// swap of two adjacent bytes (the commonest typo, -evns) as one edit.
func editDistance(a, b string) int {
	rows := [3][]int{make([]int, len(b)+1), make([]int, len(b)+1), make([]int, len(b)+1)}
	pp, prev, cur := rows[0], rows[1], rows[2]
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], pp[j-2]+1)
			}
		}
		pp, prev, cur = prev, cur, pp
	}
	return prev[len(b)]
}
