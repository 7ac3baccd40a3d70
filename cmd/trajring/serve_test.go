package main

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
)

// TestServeRefusesOpenListenerWithoutCredentials: listening beyond
// loopback without credentials is a usage error (exit 2, one line), and
// the server never starts (no data directory is made).
func TestServeRefusesOpenListenerWithoutCredentials(t *testing.T) {
	dir := t.TempDir() + "/data"
	for _, listen := range []string{"0.0.0.0", "::", "192.0.2.1"} {
		var out, errb bytes.Buffer
		code := run([]string{"serve", "-listen", listen, "-port", "-1", "-data", dir}, &out, &errb)
		if msg := errb.String(); code != 2 || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, "credentials") {
			t.Errorf("serve -listen %s: exit %d, stderr %q; want exit 2 and one line about credentials", listen, code, msg)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused serve touched its data directory: %v", err)
	}
}
