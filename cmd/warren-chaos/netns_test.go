package main

import (
	"context"
	"strings"
	"testing"
)

// The harness may only ever dial inside its private subnet.
func TestDialRefusesAddressesOutsideTheSubnet(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:5672", "10.99.1.11:5672", "[::1]:5672", "localhost:5672", "10.98.0.11:15672"} {
		if _, err := dialChecked(context.Background(), "tcp", addr); err == nil || !strings.Contains(err.Error(), "outside") {
			t.Errorf("dial %s: %v, want a refusal", addr, err)
		}
	}
	for i := 1; i <= 9; i++ {
		if err := checkAddr(nodeIP(i) + ":5672"); err != nil {
			t.Errorf("node %d: %v", i, err)
		}
	}
	if err := checkAddr(clientIP + ":1"); err != nil {
		t.Error(err)
	}
}

func TestFlagsAreValidated(t *testing.T) {
	for _, args := range [][]string{
		{"-nodes", "0"}, {"-nodes", "10"}, {"-family", "flood"}, {"-fault-min", "5s", "-fault-max", "1s"},
		{"-scope", "galaxy"}, {"-duration", "0s"},
	} {
		if _, err := parseFlags(args, &strings.Builder{}); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	cfg, err := parseFlags([]string{"-nodes", "3", "-family", "partition", "-node-arg", "--peers={peers}", "-seed", "9"}, &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	n := newNode(cfg, 2, nil)
	if got := n.args[len(n.args)-1]; got != "--peers=10.99.0.11,10.99.0.12,10.99.0.13" {
		t.Errorf("node arg %q", got)
	}
	if n.amqpAddr() != "10.99.0.12:5672" || n.name != "w2" {
		t.Errorf("node %s at %s", n.name, n.amqpAddr())
	}
}
