package server

import (
	"strconv"
	"testing"
	"time"
)

// TestClusterQuorumTxCommitWaitsForTheLog: a tx.commit-ok covering acks of
// a quorum queue comes only once the leader's log has committed the
// settlements, for a consumer on the leader and on a forwarding node (the
// mark to the leader). warren-chaos crash and pause runs saw acks
// committed 17-290 ms before the leader's node went down come back from
// the elected mirror. The hook holds the log's commit reports: until one
// arrives the commit must wait; a later publish brings one.
func TestClusterQuorumTxCommitWaitsForTheLog(t *testing.T) {
	nodes := startTestCluster(t, 3, 3)
	leader := nodes[0]
	_, lch := leader.channel(t)
	declareQuorum(t, lch, "qq", nil)
	for _, n := range nodes {
		waitFor(t, 10*time.Second, n.name+" to know the queue", func() bool {
			l, _, rs := quorumPlacementOn(n, "qq")
			return l == leader.name && len(rs) == 3
		})
	}
	_, pch := nodes[1].channel(t)
	publishConfirmedBodies(t, pch, "qq", 10, func(i int) string { return "m" + strconv.Itoa(i) })
	defer testHookQuorumHoldCommits.Store(false)
	for _, cn := range []*clusterNode{leader, nodes[2]} {
		_, tch := cn.channel(t)
		must(t, tch.Tx())
		ds, err := tch.Consume("qq", "", false, false, false, false, nil)
		must(t, err)
		d := recv(t, ds)
		testHookQuorumHoldCommits.Store(true)
		must(t, d.Ack(false))
		done := make(chan error, 1)
		go func() { done <- tch.TxCommit() }()
		select {
		case err := <-done:
			t.Fatalf("consumer on %s: tx.commit answered (%v) before the log committed the ack", cn.name, err)
		case <-time.After(time.Second): // bounded: the answer must not come
		}
		testHookQuorumHoldCommits.Store(false)
		publishConfirmedBodies(t, pch, "qq", 1, func(int) string { return "next-" + cn.name })
		select {
		case err := <-done:
			must(t, err)
		case <-time.After(30 * time.Second):
			t.Fatalf("consumer on %s: no tx.commit-ok after the log committed", cn.name)
		}
		must(t, tch.Close())
	}
}
