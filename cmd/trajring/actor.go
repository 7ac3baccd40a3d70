package main

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/driver/envs"
	"github.com/trajring/trajring/remote"
)

// actorConfig holds the actor command's flags.
type actorConfig struct {
	url, user, password, token string
	envs, steps, runs, k       int
	compress                   bool
	seed                       uint64
	epsilon                    float64
}

// swapPolicy is the actor's policy: the random policy until the learner
// publishes parameters, then an epsilon-greedy policy over them, swapped
// between runs. Both are stateless, so the driver's state carries over.
type swapPolicy struct{ driver.Policy }

// newActorCmd returns the actor command.
func newActorCmd() *cobra.Command {
	var c actorConfig
	cmd := &cobra.Command{
		Use:   "actor",
		Short: "run CartPole environments and publish their experience to a learner (trajring serve)",
		Long: `Runs -envs CartPole environments in runs of -steps environment steps and
publishes every trajectory step to the learner's JetStream stream at -connect.
Before each run it picks up the newest policy parameters the learner published
(trajring serve -params q.gob: a DQN Q-network as trajring train writes it) and
acts epsilon-greedily (-epsilon) over that network; until there are any, it
acts at random. Publishes survive a server restart (they are
retried, and de-duplicated by message id).

Ctrl-C (SIGINT) or SIGTERM ends the run in progress: the actor publishes the
steps it collected, sends its bye frame (the learner frees its rows), waits up
to 10 s for the learner's stream to store them, prints its counts and exits
with status 130 (143 for SIGTERM). If the stream does not answer in time it
exits with status 1 and says so; the learner then frees the rows once the
actor is idle (serve -actor-idle). A second Ctrl-C quits at once.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return actor(cmd, c) },
	}
	f := cmd.Flags()
	f.SortFlags = false
	f.StringVar(&c.url, "connect", "nats://127.0.0.1:4222", "learner's NATS URL")
	f.StringVar(&c.user, "user", "", "user name")
	f.StringVar(&c.password, "password", "", "password")
	f.StringVar(&c.token, "token", "", "token")
	f.IntVar(&c.envs, "envs", 8, "CartPole environments (rows)")
	f.IntVar(&c.steps, "steps", 10_000, "environment steps per run")
	f.IntVar(&c.runs, "runs", 1, "runs (0: until interrupted)")
	f.IntVarP(&c.k, "frame-steps", "k", 32, "steps per frame (K)")
	f.BoolVar(&c.compress, "compress", false, "S2-compress frames")
	f.Uint64Var(&c.seed, "seed", 1, "random seed")
	f.Float64Var(&c.epsilon, "epsilon", 0.05, "exploration rate of the policy over the learner's parameters")
	return cmd
}

func actor(cmd *cobra.Command, c actorConfig) error {
	if c.envs <= 0 || c.steps <= 0 || c.runs < 0 || c.k <= 0 {
		return usageErrorf("-envs, -steps and -k must be positive, -runs at least 0")
	}
	if !(c.epsilon >= 0 && c.epsilon <= 1) {
		return usageErrorf("-epsilon must lie in [0, 1]")
	}
	sigs := catchSignals(cmd.Context())
	defer sigs.stop()
	ctx := sigs.context()
	nc, err := nats.Connect(c.url, nats.MaxReconnects(-1), nats.ReconnectWait(200*time.Millisecond),
		nats.UserInfo(c.user, c.password), nats.Token(c.token))
	if err != nil {
		return fmt.Errorf("-connect %s: %w", redactURLs(c.url), err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(5*time.Second))
	if err != nil {
		return err
	}
	env, err := envs.NewCartPole(c.envs, c.seed)
	if err != nil {
		return err
	}
	random, err := driver.NewRandomPolicy(env.ActionSpec(), c.seed)
	if err != nil {
		return err
	}
	pol := &swapPolicy{random}
	fields, err := cartPoleFields()
	if err != nil {
		return err
	}
	// The publisher's waits for room end with ctx; its Close (the flush
	// and the bye) runs on a context of its own, bounded by CloseTimeout,
	// so that an interrupted actor still leaves cleanly.
	pub, err := remote.NewPublisher(remote.PublisherConfig{JetStream: js, Fields: fields, StepsPerFrame: c.k, Compress: c.compress,
		Context: ctx, CloseTimeout: actorCloseTimeout})
	if err != nil {
		return err
	}
	closed := false
	defer func() { // on the error paths; closed and checked below
		if !closed {
			_ = pub.Close()
		}
	}()
	drv, err := driver.NewStepDriver(env, pol, c.steps, driver.WithObservers(pub))
	if err != nil {
		return err
	}
	var params *remote.Params // nil until the learner creates the bucket
	var version uint64
	var ts *driver.TimeStep
	var state any
	start := time.Now()
	for run := 0; c.runs == 0 || run < c.runs; run++ {
		if ctx.Err() != nil {
			break
		}
		if params == nil {
			params, _ = remote.OpenParams(ctx, js, "", 1, false)
		}
		if params != nil {
			if v, blob, ok, err := params.Latest(ctx, version); err == nil && ok {
				version = v
				p, what, err := paramsPolicy(blob, env.ObservationSpec()[0], env.ActionSpec()[0], c.epsilon, c.seed+v)
				if err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "policy parameters v%d not used: %v\n", v, err)
				} else {
					pol.Policy = p
					fmt.Fprintf(cmd.OutOrStdout(), "policy parameters v%d: %s\n", v, what)
				}
			}
		}
		if ts, state, err = drv.Run(ctx, ts, state); err != nil {
			if ctx.Err() != nil {
				break
			}
			return err
		}
		if err := pub.Flush(); err != nil {
			if ctx.Err() != nil {
				break
			}
			return err
		}
	}
	closed = true // a failed Close is not tried again: it waited CloseTimeout
	cerr := pub.Close()
	st := pub.Stats()
	fmt.Fprintf(cmd.OutOrStdout(), "actor %016x: %d steps in %d frames (%.1f MB) in %v, %d retries\n",
		pub.Actor(), st.Steps, st.Frames, float64(st.Bytes)/1e6, time.Since(start).Round(time.Millisecond), st.Retries)
	if cerr != nil {
		return fmt.Errorf("%w (the learner frees the actor's rows once it finds the actor idle)", cerr)
	}
	return sigs.interrupted("actor %016x published %d steps and left (its rows are free)", pub.Actor(), st.Steps)
}

// actorCloseTimeout bounds how long an actor waits, when it ends, for the
// learner's stream to store its last frames and its bye.
const actorCloseTimeout = 10 * time.Second

// redactURLs returns the comma-separated NATS URLs of -connect with any
// secret replaced by "xxxxx" (a password, or a user with no password,
// which NATS reads as a token), so that an error message can name them.
func redactURLs(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		scheme := "" // nats.Connect takes host:port without one
		if !strings.Contains(p, "://") {
			scheme, p = "nats://", "nats://"+p
		}
		u, err := url.Parse(p)
		if err != nil { // keep only what follows any credentials
			if at := strings.LastIndex(p, "@"); at >= 0 {
				parts[i] = "xxxxx" + p[at:]
			}
			continue
		}
		if u.User == nil {
			continue
		}
		if _, hasPassword := u.User.Password(); hasPassword {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		} else {
			u.User = url.User("xxxxx")
		}
		parts[i] = strings.TrimPrefix(u.String(), scheme)
	}
	return strings.Join(parts, ",")
}
