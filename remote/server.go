package remote

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// ServerConfig configures an embedded NATS server with JetStream. A plain
// value.
type ServerConfig struct {
	// Host is the listen address (default 127.0.0.1); Port the client
	// port, 1-65535 (0: 4222, -1: a free one the system picks).
	Host string
	Port int
	// StoreDir is the JetStream data directory (required).
	StoreDir string
	// User and Password, or Token, or TLSCert and TLSKey: credentials a
	// server listening beyond loopback must have.
	User, Password, Token string
	TLSCert, TLSKey       string
	// Name is the server name (default "trajring").
	Name string
}

// isLoopback reports whether host only accepts local connections.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Options returns the nats-server options of c, ErrConfig for a missing
// data directory, a port out of range or half-given credentials, or
// ErrInsecure for a non-loopback listener without credentials.
func (c ServerConfig) Options() (*server.Options, error) {
	if c.Host == "" {
		c.Host = "127.0.0.1"
	}
	if c.Port == 0 {
		c.Port = 4222
	}
	if c.Name == "" {
		c.Name = "trajring"
	}
	if c.StoreDir == "" {
		return nil, fmt.Errorf("%w: server needs a data directory", ErrConfig)
	}
	if c.Port != -1 && (c.Port < 1 || c.Port > 65535) {
		return nil, fmt.Errorf("%w: port %d is not 1-65535 (or -1 for any free port)", ErrConfig, c.Port)
	}
	hasAuth := (c.User != "" && c.Password != "") || c.Token != ""
	hasTLS := c.TLSCert != "" && c.TLSKey != ""
	if (c.User != "") != (c.Password != "") {
		return nil, fmt.Errorf("%w: user and password go together", ErrConfig)
	}
	if (c.TLSCert != "") != (c.TLSKey != "") {
		return nil, fmt.Errorf("%w: TLS needs a certificate and a key", ErrConfig)
	}
	if !isLoopback(c.Host) && !hasAuth && !hasTLS {
		return nil, fmt.Errorf("%w: listening on %s needs -user/-password, -token or -tls-cert/-tls-key", ErrInsecure, c.Host)
	}
	o := &server.Options{
		ServerName: c.Name, Host: c.Host, Port: c.Port, JetStream: true, StoreDir: c.StoreDir,
		Username: c.User, Password: c.Password, Authorization: c.Token,
		MaxPayload: 8 << 20, NoSigs: true,
	}
	if hasTLS {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: c.TLSCert, KeyFile: c.TLSKey})
		if err != nil {
			return nil, fmt.Errorf("%w: TLS: %v", ErrConfig, err)
		}
		o.TLSConfig, o.TLS = tc, true
	}
	return o, nil
}

// ErrServerStart reports an embedded server that could not start: its
// listener or its JetStream store failed (the server's own message is
// wrapped), or it did not accept connections in time.
var ErrServerStart = errors.New("remote: nats server did not start")

// readyTimeout bounds how long StartServer waits for a server to accept
// connections: generous, because a clustered JetStream node on a loaded
// 2-core machine under the race detector can take several seconds.
const readyTimeout = 30 * time.Second

// readyPoll is how often StartServer checks for a fatal startup error
// while it waits for the server to accept connections (above 25 ms, so
// that ReadyForConnections sleeps between its checks rather than spins).
const readyPoll = 50 * time.Millisecond

// startLogger is the logger of a starting server: it drops every message
// but keeps the first fatal one, which nats-server logs (instead of
// returning it) when its listener or JetStream cannot start, and then
// stops starting. It is safe for concurrent use.
type startLogger struct {
	mu    sync.Mutex
	fatal string
}

func (l *startLogger) Fatalf(format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fatal == "" {
		l.fatal = fmt.Sprintf(format, v...)
	}
}

func (l *startLogger) failed() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fatal
}

func (*startLogger) Noticef(string, ...any) {}
func (*startLogger) Warnf(string, ...any)   {}
func (*startLogger) Errorf(string, ...any)  {}
func (*startLogger) Debugf(string, ...any)  {}
func (*startLogger) Tracef(string, ...any)  {}

// StartServer starts a server with the given options and waits until it
// accepts connections (at most readyTimeout). A server whose listener or
// JetStream store fails (a port in use, a store directory that cannot be
// made) is shut down and reported at once with ErrServerStart wrapping
// the server's own message, rather than after the timeout.
func StartServer(o *server.Options) (*server.Server, error) {
	s, err := server.NewServer(o)
	if err != nil {
		return nil, fmt.Errorf("remote: nats server: %w", err)
	}
	log := new(startLogger)
	s.SetLogger(log, false, false)
	go s.Start()
	deadline := time.Now().Add(readyTimeout)
	for !s.ReadyForConnections(readyPoll) {
		if msg := log.failed(); msg != "" {
			s.Shutdown()
			return nil, fmt.Errorf("%w: %s", ErrServerStart, msg)
		}
		if time.Now().After(deadline) {
			s.Shutdown()
			return nil, fmt.Errorf("%w: not ready after %v", ErrServerStart, readyTimeout)
		}
	}
	return s, nil
}
