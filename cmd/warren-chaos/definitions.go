package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sort"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// The definitions workload: a few durable queues bound to amq.direct with
// a few keys, so concurrent clients often touch the same one.
var (
	defQueues = []string{"chaos.def.0", "chaos.def.1", "chaos.def.2"}
	defKeys   = []string{"k0", "k1", "k2"}
	defOps    = []string{"declare", "delete", "bind", "unbind", "exists", "bindings"}
)

// Definite failures of a definition operation: the queue is missing, or it
// exists and its home node is down (a cluster's 404 for that case).
const (
	errNotFound = "not-found"
	errHomeDown = "home-down"
)

// defClient holds one connection and channel per node, opened when needed
// and dropped on any error that is not a definite 404.
type defClient struct {
	conns map[*node]*amqp.Connection
	chans map[*node]*amqp.Channel
	http  *http.Client
}

func (dc *defClient) channel(n *node) (*amqp.Channel, error) {
	if ch := dc.chans[n]; ch != nil && !ch.IsClosed() {
		return ch, nil
	}
	c := dc.conns[n]
	if c == nil || c.IsClosed() {
		var err error
		if c, err = dial(n); err != nil {
			return nil, err
		}
		dc.conns[n] = c
	}
	ch, err := c.Channel()
	if err != nil {
		c.Close()
		delete(dc.conns, n)
		return nil, err
	}
	dc.chans[n] = ch
	return ch, nil
}

// drop closes n's connection after an error that closed its channel.
func (dc *defClient) drop(n *node) {
	if c := dc.conns[n]; c != nil {
		c.Close()
		delete(dc.conns, n)
	}
}

func (dc *defClient) close() {
	for _, c := range dc.conns {
		c.Close()
	}
}

// definitions runs random definition operations on random nodes.
func (w *workload) definitions(ctx context.Context, proc string, rnd *rand.Rand) {
	dc := &defClient{conns: map[*node]*amqp.Connection{}, chans: map[*node]*amqp.Channel{}, http: mgmtClient()}
	defer dc.close()
	for ctx.Err() == nil {
		n := w.nodes[rnd.IntN(len(w.nodes))]
		e := Event{Proc: proc, F: defOps[rnd.IntN(len(defOps))], Node: n.name, Q: defQueues[rnd.IntN(len(defQueues))]}
		if e.F == "bind" || e.F == "unbind" {
			e.Key = defKeys[rnd.IntN(len(defKeys))]
		}
		// An operation is invoked only once it can be sent: one that never
		// reached the node would be an unknown outcome the checker has to
		// place everywhere, and a down node would make hundreds of them.
		var ch *amqp.Channel
		if e.F != "bindings" {
			var err error
			if ch, err = dc.channel(n); err != nil {
				sleepCtx(ctx, 20*time.Millisecond)
				continue
			}
		}
		op := w.h.invoke(e)
		if op == 0 {
			return
		}
		keys, err := dc.do(ctx, n, ch, e)
		e.Keys = keys
		switch {
		case err == nil:
			w.h.complete(op, evOK, e)
		case isHomeDown(err):
			e.Err, e.Reason = errHomeDown, err.Error()
			w.h.complete(op, evFail, e)
			dc.drop(n)
		case isNotFound(err):
			e.Err, e.Reason = errNotFound, err.Error()
			w.h.complete(op, evFail, e)
		default:
			// A 541 refusal without a Raft majority stays unknown too: the
			// proposal may have reached a leader's log and commit later.
			e.Err = err.Error()
			w.h.complete(op, evUnknown, e)
			dc.drop(n)
		}
		sleepCtx(ctx, 20*time.Millisecond) // pace: the history stays checkable
	}
}

type notFoundError struct{ what string }

func (e notFoundError) Error() string { return e.what + ": 404" }

func isNotFound(err error) bool {
	var amqpErr *amqp.Error
	var nf notFoundError
	return (errors.As(err, &amqpErr) && amqpErr.Code == amqp.NotFound) || errors.As(err, &nf)
}

// do runs one operation; ch is n's channel (nil for the bindings read,
// which goes through the management API).
func (dc *defClient) do(ctx context.Context, n *node, ch *amqp.Channel, e Event) ([]string, error) {
	if e.F == "bindings" {
		return dc.bindings(ctx, n, e.Q)
	}
	var err error
	switch e.F {
	case "declare":
		_, err = ch.QueueDeclare(e.Q, true, false, false, false, nil)
	case "delete":
		_, err = ch.QueueDelete(e.Q, false, false, false)
	case "bind":
		err = ch.QueueBind(e.Q, e.Key, "amq.direct", false, nil)
	case "unbind":
		err = ch.QueueUnbind(e.Q, e.Key, "amq.direct", nil)
	case "exists":
		_, err = ch.QueueDeclarePassive(e.Q, true, false, false, false, nil)
	default:
		err = fmt.Errorf("unknown definition op %q", e.F)
	}
	return nil, err
}

// mgmtClient talks HTTP only to addresses inside the subnet.
func mgmtClient() *http.Client {
	return &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DialContext: dialChecked, DisableKeepAlives: true}}
}

// bindings reads the queue's amq.direct binding keys from the management
// API, the one place AMQP 0-9-1 lets a client read bindings.
func (dc *defClient) bindings(ctx context.Context, n *node, q string) ([]string, error) {
	u := fmt.Sprintf("http://%s/api/queues/%s/%s/bindings", n.mgmtAddr(), url.PathEscape("/"), url.PathEscape(q))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth("guest", "guest")
	resp, err := dc.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusNotFound {
		return nil, notFoundError{"GET " + u}
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", u, resp.Status, body)
	}
	var list []struct {
		Source     string `json:"source"`
		RoutingKey string `json:"routing_key"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	keys := []string{}
	for _, b := range list {
		if b.Source == "amq.direct" {
			keys = append(keys, b.RoutingKey)
		}
	}
	sort.Strings(keys)
	return keys, nil
}
