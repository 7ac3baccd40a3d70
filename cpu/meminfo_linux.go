package cpu

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
)

// MemAvailable returns the host memory, in bytes, available for new
// allocations without swapping: MemAvailable of /proc/meminfo on Linux.
// Elsewhere, or when the figure cannot be read, it returns an error and
// callers must do without it. It is safe for concurrent use.
func MemAvailable() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("cpu: reading available memory: %w", err)
	}
	defer f.Close()
	return parseMemAvailable(f)
}

// parseMemAvailable reads the MemAvailable line of a /proc/meminfo file,
// "MemAvailable:   123456 kB", and returns it in bytes.
func parseMemAvailable(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("MemAvailable:"))
		if !ok {
			continue
		}
		fields := bytes.Fields(rest)
		if len(fields) != 2 || string(fields[1]) != "kB" {
			return 0, fmt.Errorf("cpu: malformed meminfo line %q", sc.Text())
		}
		kb, err := strconv.ParseInt(string(fields[0]), 10, 64)
		if err != nil || kb < 0 || kb > 1<<53 {
			return 0, fmt.Errorf("cpu: malformed meminfo line %q", sc.Text())
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("cpu: reading meminfo: %w", err)
	}
	return 0, fmt.Errorf("cpu: meminfo has no MemAvailable line")
}
