package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// nemesisEvent is one line of nemesis.log.
type nemesisEvent struct {
	T      int64    `json:"t"` // Unix nanoseconds
	Time   string   `json:"time,omitempty"`
	Event  string   `json:"event"` // fault, heal, node-exit, skip
	Family string   `json:"family,omitempty"`
	Kind   string   `json:"kind,omitempty"`
	Nodes  []string `json:"nodes,omitempty"`
	Detail string   `json:"detail,omitempty"`
	Err    string   `json:"err,omitempty"`
}

// fault is one injected failure and its undo.
type fault struct {
	family, kind string
	nodes        []*node
	detail       string
	inject, heal func() error
}

// nemesis injects one fault at a time on a seeded schedule.
type nemesis struct {
	cfg      config
	nodes    []*node
	rnd      *rand.Rand
	log      *jsonLog
	families []string // the families mixed draws from
}

func newNemesis(cfg config, nodes []*node, log *jsonLog, netem bool) *nemesis {
	fams := []string{cfg.Family}
	if cfg.Family == "mixed" {
		fams = []string{"crash", "pause", "partition", "disk"}
		if netem {
			fams = append(fams, "netem")
		}
	}
	return &nemesis{cfg: cfg, nodes: nodes, rnd: rand.New(rand.NewPCG(cfg.Seed, 0x6e656d65)), log: log, families: fams}
}

// run injects and heals faults until ctx ends; the fault in progress is
// healed before it returns.
func (m *nemesis) run(ctx context.Context) {
	for {
		quiet := m.between(m.cfg.FaultMin/2, m.cfg.FaultMin)
		if !sleepCtx(ctx, quiet) {
			return
		}
		f := m.pick()
		m.record("fault", f, f.inject())
		sleepCtx(ctx, m.between(m.cfg.FaultMin, m.cfg.FaultMax))
		m.record("heal", f, f.heal())
		if ctx.Err() != nil {
			return
		}
	}
}

func (m *nemesis) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(m.rnd.Int64N(int64(hi-lo)))
}

func (m *nemesis) record(event string, f fault, err error) {
	names := make([]string, len(f.nodes))
	for i, n := range f.nodes {
		names[i] = n.name
	}
	now := time.Now()
	e := nemesisEvent{T: now.UnixNano(), Time: now.UTC().Format(time.RFC3339Nano), Event: event,
		Family: f.family, Kind: f.kind, Nodes: names, Detail: f.detail}
	if err != nil {
		e.Err = err.Error()
	}
	m.log.write(e)
}

// sleepCtx waits d or until ctx ends and reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (m *nemesis) pick() fault {
	n := m.nodes[m.rnd.IntN(len(m.nodes))]
	switch fam := m.families[m.rnd.IntN(len(m.families))]; fam {
	case "crash":
		return crashFault(n)
	case "pause":
		return pauseFault(n)
	case "partition":
		return m.partitionFault(n)
	case "netem":
		return netemFault(n, m.rnd)
	default:
		return diskFault(n)
	}
}

func crashFault(n *node) fault {
	return fault{family: "crash", kind: "kill-9", nodes: []*node{n},
		inject: func() error { return n.kill(syscall.SIGKILL, 10*time.Second) },
		heal:   n.start,
	}
}

func pauseFault(n *node) fault {
	return fault{family: "pause", kind: "sigstop", nodes: []*node{n},
		inject: func() error { return n.signalPause(true) },
		heal:   func() error { return n.signalPause(false) },
	}
}

// partitionFault cuts a node from the clients' bridge, or (with several
// nodes) the nodes from each other with blackhole routes inside their
// namespaces: a majority/minority split, or a one-way cut of one pair.
func (m *nemesis) partitionFault(n *node) fault {
	kinds := []string{"isolate", "client-oneway"}
	if len(m.nodes) >= 2 {
		kinds = append(kinds, "oneway")
	}
	if len(m.nodes) >= 3 {
		kinds = append(kinds, "majority-minority")
	}
	switch kind := kinds[m.rnd.IntN(len(kinds))]; kind {
	case "isolate":
		return fault{family: "partition", kind: kind, nodes: []*node{n}, detail: "ip link set " + vethName(n.index) + " down",
			inject: func() error { return ipCmd("ip", "link", "set", vethName(n.index), "down") },
			heal:   func() error { return ipCmd("ip", "link", "set", vethName(n.index), "up") },
		}
	case "client-oneway":
		// The node hears the clients but its packets to them are dropped.
		return blackholes("client-oneway", []*node{n}, map[*node][]string{n: {clientIP}})
	case "oneway":
		other := m.nodes[(n.index+m.rnd.IntN(len(m.nodes)-1))%len(m.nodes)]
		return blackholes(kind, []*node{n, other}, map[*node][]string{n: {other.ip}})
	default:
		perm := m.rnd.Perm(len(m.nodes))
		minority := len(m.nodes) / 2
		routes := map[*node][]string{}
		var involved []*node
		for _, a := range perm[:minority] {
			for _, b := range perm[minority:] {
				na, nb := m.nodes[a], m.nodes[b]
				routes[na] = append(routes[na], nb.ip)
				routes[nb] = append(routes[nb], na.ip)
			}
			involved = append(involved, m.nodes[a])
		}
		return blackholes(kind, involved, routes)
	}
}

// blackholes adds, inside each node's namespace, a blackhole route to each
// listed address; heal removes them.
func blackholes(kind string, nodes []*node, routes map[*node][]string) fault {
	var detail []string
	for n, dsts := range routes {
		detail = append(detail, n.name+"->"+strings.Join(dsts, ","))
	}
	each := func(op string) error {
		var first error
		for n, dsts := range routes {
			for _, d := range dsts {
				if err := ipCmd("ip", "-n", n.name, "route", op, "blackhole", d+"/32"); err != nil && first == nil {
					first = err
				}
			}
		}
		return first
	}
	return fault{family: "partition", kind: kind, nodes: nodes, detail: "blackhole " + strings.Join(detail, " "),
		inject: func() error { return each("add") },
		heal:   func() error { return each("del") },
	}
}

func netemFault(n *node, rnd *rand.Rand) fault {
	spec := []string{"delay", fmt.Sprintf("%dms", 50+rnd.IntN(450)), "20ms", "loss", fmt.Sprintf("%d%%", 1+rnd.IntN(20))}
	dev := vethName(n.index)
	return fault{family: "netem", kind: "delay-loss", nodes: []*node{n}, detail: strings.Join(spec, " "),
		inject: func() error {
			return ipCmd("tc", append([]string{"qdisc", "add", "dev", dev, "root", "netem"}, spec...)...)
		},
		heal: func() error { return ipCmd("tc", "qdisc", "del", "dev", dev, "root") },
	}
}

// diskFault fills the node's tmpfs data dir with one preallocated file.
func diskFault(n *node) fault {
	path := filepath.Join(n.dataDir, "chaos-fill")
	return fault{family: "disk", kind: "full", nodes: []*node{n}, detail: path,
		inject: func() error { return fillDisk(path) },
		heal:   func() error { return os.Remove(path) },
	}
}

// fillDisk preallocates every free byte of the file system into path: in
// chunks, halving the chunk at each ENOSPC (the node writes meanwhile) down
// to one page, so the disk ends up full whatever the node did.
func fillDisk(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	var off int64
	for chunk := int64(16 << 20); chunk >= 4096; {
		err = syscall.Fallocate(int(f.Fd()), 0, off, chunk)
		if err == nil {
			off += chunk
			continue
		}
		if !errors.Is(err, syscall.ENOSPC) {
			break
		}
		err = nil
		chunk /= 2
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fallocate at %d bytes: %w", off, err)
	}
	return nil
}
