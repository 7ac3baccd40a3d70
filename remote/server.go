package remote

import (
	"fmt"
	"net"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// ServerConfig configures an embedded NATS server with JetStream. A plain
// value.
type ServerConfig struct {
	// Host is the listen address (default 127.0.0.1); Port the client
	// port (default 4222, -1 for a random one).
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

// Options returns the nats-server options of c, or ErrInsecure for a
// non-loopback listener without credentials.
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

// readyTimeout bounds how long StartServer waits for a server to accept
// connections: generous, because a clustered JetStream node on a loaded
// 2-core machine under the race detector can take several seconds.
const readyTimeout = 30 * time.Second

// StartServer starts a server with the given options and waits until it
// accepts connections (at most readyTimeout).
func StartServer(o *server.Options) (*server.Server, error) {
	s, err := server.NewServer(o)
	if err != nil {
		return nil, fmt.Errorf("remote: nats server: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(readyTimeout) {
		s.Shutdown()
		return nil, fmt.Errorf("remote: nats server not ready after %v", readyTimeout)
	}
	return s, nil
}
