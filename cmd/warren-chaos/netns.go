package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"
)

// The harness's private network: a bridge with the clients on clientIP and
// node i (1-based) at 10.99.0.1i inside its own namespace wi.
const (
	bridge   = "wbr0"
	clientIP = "10.99.0.1"
	subnet   = "10.99.0.0/24"
)

var chaosNet = func() *net.IPNet {
	_, n, err := net.ParseCIDR(subnet)
	if err != nil {
		panic(err)
	}
	return n
}()

func nodeName(i int) string { return fmt.Sprintf("w%d", i) }
func nodeIP(i int) string   { return fmt.Sprintf("10.99.0.1%d", i) }
func vethName(i int) string { return fmt.Sprintf("vw%d", i) }

// checkAddr refuses any address outside the harness's subnet, so a mistake
// can never send a packet to the host's or anyone else's network.
func checkAddr(hostport string) error {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return err
	}
	ip := net.ParseIP(host)
	if ip == nil || !chaosNet.Contains(ip) {
		return fmt.Errorf("refusing to dial %s: outside %s", hostport, subnet)
	}
	return nil
}

// dialChecked dials TCP to an address inside the subnet only.
func dialChecked(ctx context.Context, network, addr string) (net.Conn, error) {
	if err := checkAddr(addr); err != nil {
		return nil, err
	}
	d := net.Dialer{Timeout: 2 * time.Second}
	return d.DialContext(ctx, network, addr)
}

// ipCmd runs one command of the network setup or a nemesis and returns its
// error with its output.
func ipCmd(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// setupNetwork builds the bridge, the node namespaces and their veth pairs.
// It runs inside the fresh network and mount namespaces: /run gets a
// private tmpfs so `ip netns` writes nothing to the host's /run.
func setupNetwork(nodes int) error {
	if err := ipCmd("mount", "-t", "tmpfs", "chaos-run", "/run"); err != nil {
		return err
	}
	if err := os.Mkdir("/run/netns", 0o755); err != nil {
		return err
	}
	steps := [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"ip", "link", "add", bridge, "type", "bridge"},
		{"ip", "addr", "add", clientIP + "/24", "dev", bridge},
		{"ip", "link", "set", bridge, "up"},
	}
	for i := 1; i <= nodes; i++ {
		w, v := nodeName(i), vethName(i)
		steps = append(steps,
			[]string{"ip", "netns", "add", w},
			[]string{"ip", "link", "add", v, "type", "veth", "peer", "name", "eth0", "netns", w},
			[]string{"ip", "link", "set", v, "master", bridge, "up"},
			[]string{"ip", "-n", w, "addr", "add", nodeIP(i) + "/24", "dev", "eth0"},
			[]string{"ip", "-n", w, "link", "set", "eth0", "up"},
			[]string{"ip", "-n", w, "link", "set", "lo", "up"},
		)
	}
	for _, s := range steps {
		if err := ipCmd(s[0], s[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// netemWorks reports whether tc can attach a netem qdisc here (the
// sch_netem module may be missing), leaving none behind.
func netemWorks() error {
	if err := ipCmd("tc", "qdisc", "add", "dev", vethName(1), "root", "netem", "delay", "1ms"); err != nil {
		return err
	}
	return ipCmd("tc", "qdisc", "del", "dev", vethName(1), "root")
}

// mountDataTmpfs gives a node a data dir of sizeMB on its own tmpfs, which
// the disk nemesis fills.
func mountDataTmpfs(dir string, sizeMB int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return ipCmd("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm", sizeMB), "chaos-disk", dir)
}
