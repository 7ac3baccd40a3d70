package main

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

func TestDemoRunsAndReports(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"demo", "-envs", "8", "-steps", "5000", "-seq", "4", "-batch", "16", "-capacity", "256", "-progress", "0"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("output:\n%s", out.String())
	}
	head, vals := strings.Fields(lines[1]), strings.Fields(lines[2])
	_ = head
	steps, err := strconv.Atoi(vals[0])
	if err != nil || steps < 5000 {
		t.Fatalf("env steps %q, want >= 5000", vals[0])
	}
	items, _ := strconv.Atoi(vals[3])
	// 8 rows, 256 steps kept per row: at most 8*(256-3) windows of 4 steps.
	if items <= 0 || items > 8*253 {
		t.Fatalf("items %d", items)
	}
	if ret, _ := strconv.ParseFloat(vals[7], 64); ret < 8 || ret > 100 {
		t.Fatalf("average return %v of a random CartPole policy", ret)
	}
}

func TestBadCommandLines(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"nope"},
		{"demo", "-envs", "0"},
		{"demo", "-seq", "10", "-capacity", "5"},
		{"demo", "-backend", "tpu"},
		{"demo", "extra"},
	} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code == 0 {
			t.Errorf("%v: exit 0", args)
		}
	}
}
