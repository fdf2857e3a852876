package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// startTransport is a bare transport with an rpc plane, for tests of the
// connection layer without gossip or Raft.
func startTransport(t *testing.T, name, secret, clusterName string, faults *Faults) (*Transport, *rpc) {
	t.Helper()
	cfg := testConfig(t, name, faults)
	cfg.Secret, cfg.ClusterName = secret, clusterName
	k, err := deriveKeys(cfg.Secret, cfg.ClusterName)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := newTransport(cfg, k, cfg.Logger)
	if err != nil {
		t.Fatal(err)
	}
	r := newRPC(tr, cfg.RPCTimeout)
	tr.Handle(ClassMemberlist, func(c net.Conn, _ peerInfo) { c.Close() })
	tr.start()
	t.Cleanup(func() {
		r.close()
		tr.close()
	})
	return tr, r
}

func TestTransportRefusesWrongSecretAndClusterName(t *testing.T) {
	good, _ := startTransport(t, "good", testSecret, "test", nil)
	for _, tc := range []struct{ name, secret, cluster, want string }{
		{"wrong secret", "not the secret but long enough", "test", "refused our proof"},
		{"wrong cluster name", testSecret, "other", "another cluster name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := good.AuthFailures()
			bad, _ := startTransport(t, "bad", tc.secret, tc.cluster, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := bad.Dial(ctx, good.Addr(), ClassRPC)
			if !errors.Is(err, ErrAuthFailed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("dial with %s: %v, want ErrAuthFailed saying %q", tc.name, err, tc.want)
			}
			eventually(t, 5*time.Second, func() string {
				if good.AuthFailures() != before+1 {
					return fmt.Sprintf("the dialed node counted %d refusals, want %d", good.AuthFailures(), before+1)
				}
				return ""
			})
		})
	}
	// The right secret and name pass, and the class reaches its handler.
	ok, _ := startTransport(t, "ok", testSecret, "test", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := ok.Dial(ctx, good.Addr(), ClassRPC)
	if err != nil {
		t.Fatalf("dial with the right secret: %v", err)
	}
	conn.Close()
}

// A one-way cut a→b stops a's messages to b only: b's requests still reach
// a (their answers are lost on the way back), a's never reach b.
func TestFaultsCutOneDirection(t *testing.T) {
	faults := NewFaults()
	a, ra := startTransport(t, "a", testSecret, "test", faults)
	b, rb := startTransport(t, "b", testSecret, "test", faults)
	var atA, atB atomic.Int64
	ra.handle("ping", func(context.Context, string, []byte) ([]byte, error) { atA.Add(1); return []byte("pong"), nil })
	rb.handle("ping", func(context.Context, string, []byte) ([]byte, error) { atB.Add(1); return []byte("pong"), nil })
	call := func(r *rpc, addr string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		_, err := r.call(ctx, addr, "ping", nil)
		return err
	}
	if err := call(ra, b.Addr()); err != nil {
		t.Fatalf("a→b before the cut: %v", err)
	}
	if err := call(rb, a.Addr()); err != nil {
		t.Fatalf("b→a before the cut: %v", err)
	}
	faults.Cut(a.Addr(), b.Addr())
	atA.Store(0)
	atB.Store(0)
	if err := call(ra, b.Addr()); err == nil {
		t.Fatal("a→b answered through a cut")
	}
	if err := call(rb, a.Addr()); err == nil {
		t.Fatal("b→a answered although a's answers to b are cut")
	}
	if atB.Load() != 0 {
		t.Fatalf("b received %d of a's requests through the cut", atB.Load())
	}
	if atA.Load() != 1 {
		t.Fatalf("a received %d of b's requests, want 1", atA.Load())
	}
	faults.Heal()
	eventually(t, 5*time.Second, func() string {
		if err := call(ra, b.Addr()); err != nil {
			return fmt.Sprintf("a→b after heal: %v", err)
		}
		return ""
	})
}

func TestRPCErrorsKeepTheirSentinel(t *testing.T) {
	_, ra := startTransport(t, "a", testSecret, "test", nil)
	b, rb := startTransport(t, "b", testSecret, "test", nil)
	rb.handle("refuse", func(context.Context, string, []byte) ([]byte, error) {
		return nil, fmt.Errorf("%w: n9", ErrMemberAlive)
	})
	rb.handle("plain", func(context.Context, string, []byte) ([]byte, error) { return nil, errors.New("just no") })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := ra.call(ctx, b.Addr(), "refuse", nil); !errors.Is(err, ErrMemberAlive) || !strings.Contains(err.Error(), "n9") {
		t.Fatalf("sentinel over rpc: %v", err)
	}
	var re *RemoteError
	if _, err := ra.call(ctx, b.Addr(), "plain", nil); !errors.As(err, &re) || re.Msg != "just no" {
		t.Fatalf("plain error over rpc: %v", err)
	}
	if _, err := ra.call(ctx, b.Addr(), "missing", nil); !errors.Is(err, ErrNoHandler) {
		t.Fatalf("unknown method: %v", err)
	}
}

// Delay holds one direction's writes; Drop loses gossip packets of one
// direction only.
func TestFaultsDelayAndDrop(t *testing.T) {
	faults := NewFaults()
	a, ra := startTransport(t, "a", testSecret, "test", faults)
	b, rb := startTransport(t, "b", testSecret, "test", faults)
	rb.handle("ping", func(context.Context, string, []byte) ([]byte, error) { return nil, nil })
	ra.handle("ping", func(context.Context, string, []byte) ([]byte, error) { return nil, nil })
	timed := func(r *rpc, addr string) time.Duration {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()
		if _, err := r.call(ctx, addr, "ping", nil); err != nil {
			t.Fatalf("ping %s: %v", addr, err)
		}
		return time.Since(start)
	}
	timed(ra, b.Addr()) // connect first: the handshake is delayed too
	timed(rb, a.Addr())
	const delay = 300 * time.Millisecond
	faults.Delay(a.Addr(), b.Addr(), delay)
	if d := timed(ra, b.Addr()); d < delay {
		t.Fatalf("a→b request took %v with a %v delay", d, delay)
	}
	if d := timed(rb, a.Addr()); d < delay {
		t.Fatalf("b→a call took %v although a's answers are delayed %v", d, delay)
	}
	faults.Heal()
	if d := timed(ra, b.Addr()); d >= delay {
		t.Fatalf("a→b took %v after heal", d)
	}

	faults.Drop(a.Addr(), b.Addr(), 1)
	if faults.passPacket(a.Addr(), b.Addr()) {
		t.Fatal("a gossip packet a→b passed a drop of 1")
	}
	if !faults.passPacket(b.Addr(), a.Addr()) {
		t.Fatal("a gossip packet b→a was dropped")
	}
}

// A stream class handler gets authenticated connections with the dialer's
// name; a class nobody handles is closed at once.
func TestStreamClasses(t *testing.T) {
	nodes := startCluster(t, 2, 2, nil)
	a, b := nodes[0], nodes[1]
	got := make(chan string, 1)
	if err := b.HandleStream(ClassReplication, func(conn net.Conn, from string) {
		defer conn.Close()
		buf := make([]byte, 5)
		if _, err := io.ReadFull(conn, buf); err != nil {
			got <- err.Error()
			return
		}
		got <- from + ":" + string(buf)
	}); err != nil {
		t.Fatal(err)
	}
	if err := b.HandleStream(ClassRaft, nil); err == nil {
		t.Fatal("HandleStream accepted the raft class")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := a.DialStream(ctx, b.Addr(), ClassReplication)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s != "n1:hello" {
		t.Fatalf("handler got %q", s)
	}
	unhandled, err := a.DialStream(ctx, b.Addr(), ClassCatchup)
	if err != nil {
		t.Fatal(err)
	}
	defer unhandled.Close()
	unhandled.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := unhandled.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("read on an unhandled class: %v, want EOF", err)
	}
}
