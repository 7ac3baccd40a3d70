package remote

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// TestStartServerFailsAtOnce: a server whose listener or JetStream store
// cannot start is reported with ErrServerStart and the server's own
// reason, without waiting for the readiness timeout; before, StartServer
// waited 30 s and said only "not ready after 30s".
func TestStartServerFailsAtOnce(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		port      int
		storeDir  string
		wantParts []string
	}{
		{"port in use", port, t.TempDir(), []string{"Error listening on port: 127.0.0.1:" + strconv.Itoa(port), "address already in use"}},
		{"store under a file", -1, filepath.Join(file, "js"), []string{"Can't start JetStream", "not a directory"}},
	} {
		o := &server.Options{ServerName: "t", Host: "127.0.0.1", Port: tc.port, JetStream: true, StoreDir: tc.storeDir, NoSigs: true, NoLog: true}
		s, err := StartServer(o)
		if err == nil {
			s.Shutdown()
			t.Errorf("%s: server started", tc.name)
			continue
		}
		if !errors.Is(err, ErrServerStart) {
			t.Errorf("%s: %v, want ErrServerStart", tc.name, err)
		}
		for _, w := range tc.wantParts {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", tc.name, err, w)
			}
		}
	}
}

// TestServerConfigPort: a port outside 1-65535 (other than -1, a free
// one, and 0, the default) is ErrConfig before any server is made.
func TestServerConfigPort(t *testing.T) {
	for _, tc := range []struct {
		port, want int
		ok         bool
	}{
		{0, 4222, true}, {-1, -1, true}, {1, 1, true}, {65535, 65535, true},
		{-5, 0, false}, {-2, 0, false}, {65536, 0, false}, {70000, 0, false},
	} {
		o, err := ServerConfig{Port: tc.port, StoreDir: t.TempDir()}.Options()
		switch {
		case tc.ok && (err != nil || o.Port != tc.want):
			t.Errorf("port %d: %v, %v; want options with port %d", tc.port, o, err, tc.want)
		case !tc.ok && !errors.Is(err, ErrConfig):
			t.Errorf("port %d: %v, want ErrConfig", tc.port, err)
		}
	}
}
