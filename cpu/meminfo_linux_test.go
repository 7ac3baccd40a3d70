package cpu

import (
	"strings"
	"testing"
)

func TestParseMemAvailable(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     int64
		ok       bool
	}{
		{"kernel format", "MemTotal:       16318732 kB\nMemFree:         1234567 kB\nMemAvailable:   12345678 kB\nBuffers:          1 kB\n", 12345678 << 10, true},
		{"zero", "MemAvailable: 0 kB\n", 0, true},
		{"missing", "MemTotal: 1 kB\nMemFree: 1 kB\n", 0, false},
		{"no unit", "MemAvailable: 12\n", 0, false},
		{"not a number", "MemAvailable: x kB\n", 0, false},
		{"negative", "MemAvailable: -5 kB\n", 0, false},
		{"overflow", "MemAvailable: 99999999999999999999 kB\n", 0, false},
		{"empty", "", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseMemAvailable(strings.NewReader(tc.in))
			if (err == nil) != tc.ok || got != tc.want {
				t.Fatalf("parseMemAvailable = %d, %v; want %d, ok %v", got, err, tc.want, tc.ok)
			}
		})
	}
}

func TestMemAvailable(t *testing.T) {
	n, err := New().MemAvailable()
	if err != nil {
		t.Fatal(err)
	}
	if n <= 0 {
		t.Fatalf("MemAvailable = %d, want > 0", n)
	}
}
