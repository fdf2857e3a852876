package main

import (
	"fmt"
	"net/http"
	"strings"
	"text/tabwriter"
)

func clusterCommands() []*command {
	return []*command{clusterStatus(), clusterJoin(), clusterLeave(), clusterForget()}
}

// clusterJoin joins the node to the cluster of the nodes at ADDR (their
// cluster ports); a node with definitions of its own is refused at start.
func clusterJoin() *command {
	return &command{
		name: "cluster join", synopsis: "ADDR...", minArgs: 1, maxArgs: -1,
		summary: "join the cluster of the nodes at ADDR (host:port of their cluster-listen); the node must have no definitions of its own",
		run: func(e *env, a []string) error {
			if _, err := e.c.call(request{method: http.MethodPost, path: apiPath("cluster", "join"), body: map[string]any{"nodes": a}}); err != nil {
				return err
			}
			return e.say("joining %s", strings.Join(a, ", "))
		},
	}
}

// clusterLeave makes the node leave the cluster gracefully.
func clusterLeave() *command {
	return &command{
		name: "cluster leave", summary: "leave the cluster gracefully (hand over Raft leadership, leave Raft and gossip); then stop the node",
		run: func(e *env, _ []string) error {
			if _, err := e.c.call(request{method: http.MethodPost, path: apiPath("cluster", "leave"), body: map[string]any{}}); err != nil {
				return err
			}
			return e.say("left the cluster")
		},
	}
}

// clusterForget removes a node that is down, as rabbitmqctl
// forget_cluster_node; a running node is refused.
func clusterForget() *command {
	return &command{
		name: "cluster forget", synopsis: "NODE", minArgs: 1, maxArgs: 1,
		summary: "remove a node that is down from the cluster (refused for a running node)",
		run: func(e *env, a []string) error {
			if _, err := e.c.call(request{method: http.MethodDelete, path: apiPath("cluster", "nodes", a[0])}); err != nil {
				return err
			}
			return e.say("node %q forgotten", a[0])
		},
	}
}

// clusterStatus shows GET /api/cluster: the cluster's name, this node's
// Raft view and every member, as rabbitmqctl cluster_status does.
func clusterStatus() *command {
	return &command{
		name: "cluster status", summary: "show the cluster: its name, the Raft leader and term, and every node with its state and role",
		run: func(e *env, _ []string) error {
			raw, err := e.c.get(apiPath("cluster"), nil)
			if err != nil {
				return err
			}
			if e.g.format == "json" {
				return e.printJSON(raw)
			}
			var st map[string]any
			if err := decodeJSON(raw, &st, "GET /api/cluster"); err != nil {
				return err
			}
			return writeClusterStatus(e, st)
		},
	}
}

func writeClusterStatus(e *env, st map[string]any) error {
	tw := tabwriter.NewWriter(e.stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "Cluster:\t%s\n", cell(st["cluster_name"]))
	fmt.Fprintf(tw, "Node:\t%s (%s)\n", cell(st["node"]), cell(st["mode"]))
	if raft, ok := st["raft"].(map[string]any); ok {
		fmt.Fprintf(tw, "Raft:\t%s, leader %s, term %s, applied %s of %s\n", cell(raft["state"]), cell(raft["leader"]),
			cell(raft["term"]), cell(raft["applied_index"]), cell(raft["commit_index"]))
		if je := cell(raft["join_error"]); je != "" {
			fmt.Fprintf(tw, "Join refused:\t%s\n", je)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var rows []map[string]any
	if nodes, ok := st["nodes"].([]any); ok {
		for _, n := range nodes {
			if m, ok := n.(map[string]any); ok {
				m["role"] = role(st["mode"], m)
				rows = append(rows, m)
			}
		}
	}
	fmt.Fprintln(e.stdout)
	return writeTable(e.stdout, rows, []string{"name", "state", "role", "address", "uptime", "mem_alarm", "disk_free_alarm"})
}

// role is a member's part in the metadata Raft group.
func role(mode any, m map[string]any) string {
	switch {
	case mode == "standalone":
		return "standalone"
	case m["leader"] == true:
		return "leader"
	case m["voter"] == true:
		return "voter"
	}
	return "non-voter"
}
