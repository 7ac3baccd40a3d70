package remote

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// testFields are the user fields of the test buffers: a 4-float
// observation whose first element is the row and second the step number.
func testFields() []tensorbuf.Field {
	return []tensorbuf.Field{
		{Name: "obs", Role: tensorbuf.Observation, DType: tensorbuf.Float32, Shape: []int{4}},
		{Name: "action", Role: tensorbuf.Action, DType: tensorbuf.Int64, Shape: []int{}},
	}
}

func newTestBuffer(t testing.TB, rows, capacity int) *tensorbuf.Buffer {
	t.Helper()
	b, err := tensorbuf.New(tensorbuf.Config{NumEnvs: rows, Capacity: capacity, Fields: testFields()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// gen produces batched trajectories of B rows: row r plays episodes of
// 3+r steps then a boundary step, forever.
type gen struct {
	b, width int
	step     []int64
	traj     driver.Trajectory
	obs      []float32 // the observation tensor's data
	act      []int64   // the action tensor's data
}

func newGen(b int) *gen { return newGenWidth(b, 4) }

// newGenWidth is newGen with observations of width floats (at least 4;
// elements past the fourth stay 0).
func newGenWidth(b, width int) *gen {
	g := &gen{b: b, width: width, step: make([]int64, b)}
	g.traj = driver.Trajectory{
		StepType: make([]tensorbuf.StepType, b), NextStepType: make([]tensorbuf.StepType, b),
		Reward: make([]float32, b), Discount: make([]float32, b),
		Observation: map[string]*tensor.Dense{"obs": tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(b, width))},
		Action:      map[string]*tensor.Dense{"action": tensor.New(tensor.Of(tensor.Int64), tensor.WithShape(b))},
	}
	return g
}

// next returns the next batched trajectory (valid until the next call).
func (g *gen) next() *driver.Trajectory {
	t := &g.traj
	if g.obs == nil {
		g.obs = t.Observation["obs"].Data().([]float32)
		g.act = t.Action["action"].Data().([]int64)
	}
	obs, act := g.obs, g.act
	for r := range g.b {
		n := int64(4 + r) // 3+r steps and a boundary
		p := g.step[r] % n
		switch {
		case p == 0:
			t.StepType[r], t.NextStepType[r] = tensorbuf.First, tensorbuf.Mid
		case p == n-2:
			t.StepType[r], t.NextStepType[r] = tensorbuf.Mid, tensorbuf.Last
		case p == n-1:
			t.StepType[r], t.NextStepType[r] = tensorbuf.Last, tensorbuf.First
		default:
			t.StepType[r], t.NextStepType[r] = tensorbuf.Mid, tensorbuf.Mid
		}
		t.Reward[r], t.Discount[r] = 1, 1
		if p == n-2 {
			t.Discount[r] = 0
		}
		o := obs[g.width*r:]
		o[0], o[1], o[2], o[3] = float32(r), float32(g.step[r]), 0, 0
		act[r] = g.step[r] % 2
		g.step[r]++
	}
	return t
}

// startServer starts a single loopback server with JetStream.
func startServer(t testing.TB, dir string, port int) *server.Server {
	t.Helper()
	s, err := StartServer(&server.Options{ServerName: "t", Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: dir, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// cluster is three embedded JetStream servers on 127.0.0.1, random ports.
type cluster struct {
	t     testing.TB
	opts  []*server.Options
	srv   []*server.Server
	urls  string
	names []string
}

// freePorts returns n distinct free ports on 127.0.0.1: all n listeners
// stay open until every port is chosen, so no port is handed out twice.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports
}

func startCluster(t testing.TB) *cluster {
	t.Helper()
	c := &cluster{t: t}
	base := t.TempDir()
	var routes []*url.URL
	var u []string
	ports := freePorts(t, 6)
	for i := range 3 {
		o := &server.Options{
			ServerName: fmt.Sprintf("n%d", i+1), Host: "127.0.0.1", Port: ports[2*i], JetStream: true,
			StoreDir: filepath.Join(base, fmt.Sprintf("n%d", i+1)), NoSigs: true, NoLog: true,
			Cluster: server.ClusterOpts{Name: "trajring-test", Host: "127.0.0.1", Port: ports[2*i+1]},
		}
		c.opts = append(c.opts, o)
		routes = append(routes, &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", o.Cluster.Port)})
		u = append(u, fmt.Sprintf("nats://127.0.0.1:%d", o.Port))
	}
	c.srv = make([]*server.Server, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i, o := range c.opts {
		o.Routes = routes
		wg.Go(func() { c.srv[i], errs[i] = StartServer(o.Clone()) })
	}
	wg.Wait()
	t.Cleanup(c.shutdown)
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	c.urls = strings.Join(u, ",")
	return c
}

func (c *cluster) shutdown() {
	for _, s := range c.srv {
		if s != nil {
			s.Shutdown()
			s.WaitForShutdown()
		}
	}
}

// kill stops node i; restart starts it again on its addresses and store.
func (c *cluster) kill(i int) {
	c.srv[i].Shutdown()
	c.srv[i].WaitForShutdown()
	c.srv[i] = nil
}

func (c *cluster) restart(i int) {
	c.t.Helper()
	o := c.opts[i].Clone()
	s, err := StartServer(o)
	if err != nil {
		c.t.Fatal(err)
	}
	c.srv[i] = s
}

// connect returns a client of urls that reconnects forever.
func connect(t testing.TB, urls string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(urls, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond), nats.RetryOnFailedConnect(true))
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096), jetstream.WithPublishAsyncTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc, js
}

// ensure creates the streams, retrying while the cluster elects leaders.
func ensure(t testing.TB, js jetstream.JetStream, c StreamConfig) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err := EnsureStreams(ctx, js, c)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitFor polls cond every 10 ms for up to d.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// rowSteps sums the buffer cursors of rows.
func rowSteps(b *tensorbuf.Buffer, rows []int) int64 {
	var n int64
	for _, r := range rows {
		n += b.Cursor(r)
	}
	return n
}
