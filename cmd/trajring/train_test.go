//go:build !cuda

package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestTrainUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"train", "-env", "Pong"}, `-env: unknown environment "Pong"`},
		{[]string{"train", "-hidden", "3,x"}, `-hidden: bad layer size "x"`},
		{[]string{"train", "-steps", "0"}, "-steps must be positive, got 0"},
		{[]string{"train", "-per=maybe"}, `invalid argument "maybe" for "--per" flag`},
	} {
		var out, errb bytes.Buffer
		code := run(tc.args, &out, &errb)
		if msg := errb.String(); code != 2 || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit 2, one line containing %q", tc.args, code, msg, tc.want)
		}
	}
}
