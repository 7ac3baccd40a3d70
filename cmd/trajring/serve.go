package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"github.com/trajring/trajring/driver/envs"
	"github.com/trajring/trajring/remote"
	"github.com/trajring/trajring/tensorbuf"
)

// serveConfig holds the serve command's flags.
type serveConfig struct {
	host, data, user, password, token, tlsCert, tlsKey string
	params                                             string
	port, rows, capacity                               int
	statsEvery, checkpointEvery, actorIdle             time.Duration
	compress                                           bool
}

// cartPoleFields are the buffer fields of the CartPole learner and actors.
func cartPoleFields() ([]tensorbuf.Field, error) {
	env, err := envs.NewCartPole(1, 0)
	if err != nil {
		return nil, err
	}
	return append(append([]tensorbuf.Field(nil), env.ObservationSpec()...), env.ActionSpec()...), nil
}

// newServeCmd returns the serve command.
func newServeCmd() *cobra.Command {
	var c serveConfig
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "run an embedded NATS JetStream server and a learner that ingests remote actors",
		Long: `Starts an embedded NATS server with JetStream on a data directory and a learner
that ingests the frames of remote actors (trajring actor) into a CartPole
buffer, printing ingest statistics. Each actor gets its own rows of the buffer.

The server listens on 127.0.0.1 by default. Listening on another address needs
credentials (-user and -password, -token, or -tls-cert and -tls-key); without
them serve refuses to start. With -checkpoint-every, the buffer and the
ingester state are saved under -data and a restart resumes from them; a
resumed learner keeps the checkpoint's buffer, so -rows or -capacity given
explicitly with other values than the checkpoint's are refused (status 2).

Each actor's rows are freed by its bye frame (trajring actor sends one when
it ends, Ctrl-C included) or, for an actor that vanished without one (killed,
its machine lost), once no frame came from it for -actor-idle. An actor that
waits for free rows is logged and counted as waiting in the statistics.

With -params FILE (a DQN Q-network, e.g. the q.gob of trajring train), serve
publishes the file as the next version of the policy parameters in the JetStream
object store, and again whenever the file changes (checked every -stats-every,
or every 5s with -stats-every 0); actors pick up the newest version before each
run.

A bad flag value (a port out of range, a negative interval, a -data that
cannot be made) exits with status 2 before anything starts; a server that
cannot start (the port in use) exits with status 1 and the server's reason.

Ctrl-C (SIGINT) or SIGTERM stops the learner: with -checkpoint-every it saves
a final checkpoint, then it shuts the server down and exits with status 130
(143 for SIGTERM), saying what it saved. A second Ctrl-C quits at once (the
previous checkpoint stays whole).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return serve(cmd, c) },
	}
	f := cmd.Flags()
	f.SortFlags = false
	f.StringVar(&c.host, "listen", "127.0.0.1", "address to listen on (non-loopback needs credentials)")
	f.IntVar(&c.port, "port", 4222, "client port, 1-65535 (-1: any free port)")
	f.StringVar(&c.data, "data", "trajring-data", "data directory (JetStream store and checkpoints)")
	f.StringVar(&c.user, "user", "", "client user name")
	f.StringVar(&c.password, "password", "", "client password")
	f.StringVar(&c.token, "token", "", "client token")
	f.StringVar(&c.tlsCert, "tls-cert", "", "TLS certificate file")
	f.StringVar(&c.tlsKey, "tls-key", "", "TLS key file")
	f.IntVar(&c.rows, "rows", 64, "buffer rows shared by the actors")
	f.IntVar(&c.capacity, "capacity", 100_000, "steps per buffer row")
	f.DurationVar(&c.statsEvery, "stats-every", 5*time.Second, "print ingest statistics this often (0: never; negative is refused)")
	f.DurationVar(&c.checkpointEvery, "checkpoint-every", 0, "save a checkpoint this often, and when stopped (0: never; negative is refused)")
	f.DurationVar(&c.actorIdle, "actor-idle", time.Minute, "free the rows of an actor from which no frame came this long (0: only its bye frees them)")
	f.BoolVar(&c.compress, "compress", true, "zstd-compress checkpoint chunks (-compress=false writes them raw)")
	f.StringVar(&c.params, "params", "", "policy parameters file to publish to the actors (e.g. q.gob of trajring train)")
	return cmd
}

// paramsEvery is how often serve checks the -params file when
// -stats-every is 0 (no statistics).
const paramsEvery = 5 * time.Second

// validate checks the flags' values that need no server; each error
// names its flag.
func (c *serveConfig) validate() error {
	switch {
	case c.rows <= 0:
		return usageErrorf("-rows must be positive, got %d", c.rows)
	case c.capacity <= 0:
		return usageErrorf("-capacity must be positive, got %d", c.capacity)
	case c.port != -1 && (c.port < 1 || c.port > 65535):
		return usageErrorf("-port must be 1-65535, or -1 for any free port; got %d", c.port)
	case c.statsEvery < 0:
		return usageErrorf("-stats-every must not be negative (0: no statistics), got %v", c.statsEvery)
	case c.checkpointEvery < 0:
		return usageErrorf("-checkpoint-every must not be negative (0: never), got %v", c.checkpointEvery)
	case c.actorIdle < 0:
		return usageErrorf("-actor-idle must not be negative (0: only a bye frees an actor's rows), got %v", c.actorIdle)
	case c.data == "":
		return usageErrorf("-data must name a directory")
	}
	return nil
}

// serveBuffer returns the buffer to ingest into: the checkpoint's in ckdir
// with the State to resume with, or a new one of -rows x -capacity. A
// checkpoint whose shape differs from -rows or -capacity given explicitly
// is refused as a usage error naming both values; flags left at their
// defaults take the checkpoint's, said in one line on stderr.
func serveBuffer(cmd *cobra.Command, c serveConfig, ckdir string) (*tensorbuf.Buffer, *remote.State, error) {
	if _, err := os.Stat(filepath.Join(ckdir, remote.CheckpointManifest)); err != nil {
		fields, err := cartPoleFields()
		if err != nil {
			return nil, nil, err
		}
		buf, err := tensorbuf.New(tensorbuf.Config{NumEnvs: c.rows, Capacity: c.capacity, Fields: fields})
		if errors.Is(err, tensorbuf.ErrConfig) {
			return nil, nil, usageErrorf("-rows %d x -capacity %d: %v", c.rows, c.capacity, err)
		}
		return buf, nil, err
	}
	buf, resume, err := remote.LoadCheckpoint(ckdir, tensorbuf.LoadOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("resuming from %s: %w", ckdir, err)
	}
	fl := cmd.Flags()
	for _, f := range []struct {
		name       string
		flag, have int
	}{{"rows", c.rows, buf.NumEnvs()}, {"capacity", c.capacity, buf.Capacity()}} {
		if fl.Changed(f.name) && f.flag != f.have {
			buf.Close()
			return nil, nil, usageErrorf("-%s %d: the checkpoint in %s holds a buffer of -rows %d x -capacity %d, and a resumed learner keeps it "+
				"(leave out -rows and -capacity, or give another -data for a new buffer)", f.name, f.flag, ckdir, buf.NumEnvs(), buf.Capacity())
		}
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "resumed from %s: its buffer of -rows %d x -capacity %d\n", ckdir, buf.NumEnvs(), buf.Capacity())
	return buf, resume, nil
}

func serve(cmd *cobra.Command, c serveConfig) error {
	if err := c.validate(); err != nil {
		return err
	}
	opts, err := remote.ServerConfig{Host: c.host, Port: c.port, StoreDir: filepath.Join(c.data, "jetstream"),
		User: c.user, Password: c.password, Token: c.token, TLSCert: c.tlsCert, TLSKey: c.tlsKey}.Options()
	if err != nil {
		return usageErrorf("%v", err)
	}
	// Made here, so that a -data the server could not use (under a
	// regular file, not writable) is named at once.
	if err := os.MkdirAll(c.data, 0o755); err != nil {
		return usageErrorf("-data: %v", err)
	}
	ckdir := filepath.Join(c.data, "checkpoint")
	if c.checkpointEvery > 0 {
		if err := os.MkdirAll(ckdir, 0o755); err != nil {
			return err
		}
	}
	sigs := catchSignals(cmd.Context())
	defer sigs.stop()
	ctx := sigs.context()
	// A signal during the start stops it: nothing is saved then.
	fail := func(err error) error {
		if ierr := sigs.interrupted("stopped while starting; nothing saved"); ierr != nil {
			return ierr
		}
		return err
	}
	// The buffer comes first: a checkpoint that cannot be resumed is
	// refused before the server listens.
	buf, resume, err := serveBuffer(cmd, c, ckdir)
	if err != nil {
		return err
	}
	defer buf.Close()
	srv, err := remote.StartServer(opts)
	if err != nil {
		return err
	}
	defer srv.Shutdown()
	nc, err := nats.Connect(srv.ClientURL(), nats.InProcessServer(srv), nats.UserInfo(c.user, c.password), nats.Token(c.token))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if err := remote.EnsureStreams(ctx, js, remote.StreamConfig{}); err != nil {
		return fail(err)
	}
	params, err := remote.OpenParams(ctx, js, "", 1, true)
	if err != nil {
		return fail(err)
	}
	var paramsMod time.Time
	publishParams := func() error {
		if c.params == "" {
			return nil
		}
		fi, err := os.Stat(c.params)
		if err != nil {
			return err
		}
		if fi.ModTime().Equal(paramsMod) {
			return nil
		}
		blob, err := os.ReadFile(c.params)
		if err != nil {
			return err
		}
		v, err := params.Put(ctx, blob)
		if err != nil {
			return err
		}
		paramsMod = fi.ModTime()
		fmt.Fprintf(cmd.OutOrStdout(), "published %s as policy parameters v%d (%d bytes)\n", c.params, v, len(blob))
		return nil
	}
	if err := publishParams(); err != nil {
		return fail(err)
	}
	in, err := remote.NewIngester(ctx, remote.IngesterConfig{JetStream: js, Buffer: buf, Resume: resume, ActorIdle: c.actorIdle})
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "serving on %s (data %s); actors: trajring actor -connect %s\n", srv.ClientURL(), c.data, srv.ClientURL())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx) }()
	every := c.statsEvery // statistics and the -params check
	if every == 0 {
		every = paramsEvery
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	var ck <-chan time.Time
	if c.checkpointEvery > 0 {
		t := time.NewTicker(c.checkpointEvery)
		defer t.Stop()
		ck = t.C
	}
	start, last := time.Now(), remote.IngesterStats{}
	for {
		select {
		case err := <-done:
			// Run ends when ctx is done (a signal) or the consumer is gone.
			saved := "no checkpoint (-checkpoint-every 0)"
			if c.checkpointEvery > 0 {
				if cerr := in.Checkpoint(ckdir, tensorbuf.SaveOptions{Compress: c.compress}); cerr != nil {
					err = errors.Join(err, fmt.Errorf("final checkpoint: %w", cerr))
				} else {
					actors, _ := in.Occupancy()
					saved = fmt.Sprintf("final checkpoint in %s (%d steps ingested, %d actors holding rows); resume with the same -data", ckdir, in.Stats().Steps, actors)
				}
			}
			if err != nil {
				return err
			}
			if ierr := sigs.interrupted("%s", saved); ierr != nil {
				return ierr
			}
			return nil // the command's context ended (tests)
		case <-ck:
			if err := in.Checkpoint(ckdir, tensorbuf.SaveOptions{Compress: c.compress}); err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "checkpoint: %v\n", err)
			}
		case <-tick.C:
			if err := publishParams(); err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "params: %v\n", err)
			}
			if c.statsEvery == 0 {
				continue
			}
			st := in.Stats()
			actors, waiting := in.Occupancy()
			dt := c.statsEvery.Seconds()
			fmt.Fprintf(cmd.OutOrStdout(), "%6.0fs  actors %d (waiting %d)  steps %d (%.0f/s, %.1f MB/s)  dup %d  dead %d (refused %d)  gaps %d\n",
				time.Since(start).Seconds(), actors, waiting, st.Steps, float64(st.Steps-last.Steps)/dt,
				float64(st.Bytes-last.Bytes)/dt/1e6, st.Duplicates, st.Dead, st.Refused, st.Gaps)
			last = st
		}
	}
}
