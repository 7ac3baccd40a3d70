package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/trajring/trajring/agents/dqn"
	"github.com/trajring/trajring/remote"
)

// TestActorUsesPublishedNetwork: an actor started after the learner
// published a DQN network acts greedily with respect to it at epsilon 0:
// every action it publishes is the argmax of that network's Q-values of
// the observation published with it (a random policy would miss about
// half of them).
func TestActorUsesPublishedNetwork(t *testing.T) {
	srv, err := remote.StartServer(&server.Options{ServerName: "t", Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := remote.EnsureStreams(ctx, js, remote.StreamConfig{Memory: true}); err != nil {
		t.Fatal(err)
	}
	params, err := remote.OpenParams(ctx, js, "", 1, true)
	if err != nil {
		t.Fatal(err)
	}
	// Two versions: the actor must take the newest. Linear networks (no
	// hidden layer): their greedy action depends on the state.
	var nets [2][]byte
	for i := range nets {
		a, err := dqn.New(dqn.Config{ObsDim: 4, NumActions: 2, Hidden: []int{}, BatchSize: 64, LearningRate: 2.3e-3, MaxGradNorm: 10, Seed: uint64(15 + i)})
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := a.Save(&b); err != nil {
			t.Fatal(err)
		}
		nets[i] = b.Bytes()
		if _, err := params.Put(ctx, nets[i]); err != nil {
			t.Fatal(err)
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"actor", "-connect", srv.ClientURL(), "-envs", "4", "-steps", "400", "-k", "8", "-epsilon", "0", "-seed", "5"}, &out, &errb); code != 0 {
		t.Fatalf("actor exit %d: %s %s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "policy parameters v2: epsilon-greedy (0) DQN [4 2]") {
		t.Fatalf("actor did not report the network it uses: %q", out.String())
	}
	q, _, err := dqn.LoadNetwork(bytes.NewReader(nets[1]))
	if err != nil {
		t.Fatal(err)
	}
	fields, err := cartPoleFields()
	if err != nil {
		t.Fatal(err)
	}
	schema, err := remote.NewSchema(fields)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js.OrderedConsumer(ctx, remote.DefaultStream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var f remote.Frame
	steps, mismatches, ones := 0, 0, 0
	qv := make([]float32, 2)
	for steps < 400 { // the actor published at least 400 (one run of 400 env steps)
		msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatalf("after %d steps: %v", steps, err)
		}
		if err := schema.Decode(msg.Data(), &f); err != nil {
			t.Fatal(err)
		}
		if f.Bye {
			continue
		}
		// Columns in schema order: action (int64), observation ([4]float32).
		act, obs := f.Cols[0], f.Cols[1]
		for i := range f.K * len(f.Rows) {
			o := make([]float32, 4)
			for j := range o {
				o[j] = math.Float32frombits(binary.LittleEndian.Uint32(obs[16*i+4*j:]))
			}
			q(o, 1, qv)
			greedy := int64(0)
			if qv[1] > qv[0] {
				greedy = 1
			}
			a := int64(binary.LittleEndian.Uint64(act[8*i:]))
			if a != greedy {
				mismatches++
			}
			ones += int(a)
			steps++
		}
	}
	if mismatches != 0 {
		t.Fatalf("%d of %d published actions are not greedy w.r.t. the published network", mismatches, steps)
	}
	// The network (linear, seeded) prefers either action depending on the
	// state, so a constant policy could not pass either.
	if ones == 0 || ones == steps {
		t.Fatalf("all %d actions are %d: the test network must prefer both actions", steps, min(ones, 1))
	}
	t.Logf("%d greedy actions, %d of them 1", steps, ones)
}

// TestActorConnectError: an actor that cannot reach its learner fails
// with one line naming the -connect URL (before, only "nats: no servers
// available for connection"), with any secret in it masked.
func TestActorConnectError(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"nats://127.0.0.1:1", "-connect nats://127.0.0.1:1: nats: no servers available for connection"},
		{"nats://ann:secret@127.0.0.1:1", "-connect nats://ann:xxxxx@127.0.0.1:1: "},
		{"nats://s3cr3t@127.0.0.1:1", "-connect nats://xxxxx@127.0.0.1:1: "},
		{"ann:secret@127.0.0.1:1", "-connect ann:xxxxx@127.0.0.1:1: "},
	} {
		var out, errb bytes.Buffer
		code := run([]string{"actor", "-connect", tc.url, "-runs", "1", "-steps", "8", "-envs", "1"}, &out, &errb)
		msg := errb.String()
		if code != 1 || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, tc.want) || strings.Contains(msg, "secret") || strings.Contains(msg, "s3cr3t") {
			t.Errorf("actor -connect %s: exit %d, stderr %q; want exit 1, one line containing %q and no secret", tc.url, code, msg, tc.want)
		}
	}
}
