package server

import (
	"strconv"
	"testing"
	"time"
)

func TestZZQuorumDebug(t *testing.T) {
	nodes := startTestCluster(t, 3, 3)
	leader := nodes[0]
	_, lch := leader.channel(t)
	declareQuorum(t, lch, "qq", nil)
	h, _ := leader.Vhost("/").queue("qq").quorumHandle()
	time.Sleep(2 * time.Second)
	t.Logf("status %+v place %+v", h.r.Status(), h.placement())
	for _, n := range nodes[1:] {
		hh, _ := n.Vhost("/").queue("qq").quorumHandle()
		t.Logf("%s: r=%v fwd=%v place %+v", n.name, hh.r != nil, hh.fwd != nil, hh.placement())
		if hh.r != nil {
			t.Logf("  status %+v", hh.r.Status())
		}
	}
	publishConfirmedBodies(t, lch, "qq", 10, func(i int) string { return "m" + strconv.Itoa(i) })
}
