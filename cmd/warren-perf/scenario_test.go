package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"
)

func testScenarioOptions() scenarioOptions {
	o := defaultScenarioOptions()
	o.url = "amqp://u:p@127.0.0.1:5999/"
	o.duration = 7 * time.Second
	o.messages = 20_000
	o.client = clientAMQP091 // not the default, so that the presets must pass it on
	return o
}

// persistentLike checks the "persistent" preset's settings.
func persistentLike(t *testing.T, c Config) {
	t.Helper()
	if !c.Durable || !c.Persistent || c.Size != 1024 || c.Confirm != 256 || c.AutoAck || c.Prefetch != 100 {
		t.Errorf("%s: durable=%t persistent=%t size=%d confirm=%d autoack=%t prefetch=%d, want true true 1024 256 false 100",
			c.Name, c.Durable, c.Persistent, c.Size, c.Confirm, c.AutoAck, c.Prefetch)
	}
}

func TestScenarioPresets(t *testing.T) {
	o := testScenarioOptions()
	tests := map[string]func(t *testing.T, cs []Config){
		"transient": func(t *testing.T, cs []Config) {
			c := cs[0]
			if c.Publishers != 1 || c.Consumers != 1 || c.Queues != 1 || !c.AutoAck || c.Size != 16 ||
				c.Durable || c.Persistent || c.Confirm != 0 {
				t.Errorf("transient = %+v", c)
			}
		},
		"persistent": func(t *testing.T, cs []Config) {
			persistentLike(t, cs[0])
			if cs[0].Publishers != 1 || cs[0].Consumers != 1 || cs[0].Queues != 1 || cs[0].Rate != 0 {
				t.Errorf("persistent = %+v", cs[0])
			}
		},
		"persistent-4x4": func(t *testing.T, cs []Config) {
			persistentLike(t, cs[0])
			if cs[0].Publishers != 4 || cs[0].Consumers != 4 || cs[0].Queues != 4 {
				t.Errorf("persistent-4x4 = %+v", cs[0])
			}
		},
		"latency": func(t *testing.T, cs []Config) {
			persistentLike(t, cs[0])
			if total := cs[0].Rate * float64(cs[0].Publishers); total != 2000 {
				t.Errorf("latency total rate = %v, want 2000", total)
			}
		},
		"fanout": func(t *testing.T, cs []Config) {
			c := cs[0]
			persistentLike(t, c)
			if c.Exchange == "" || c.ExchangeType != "fanout" || c.Queues != 10 || c.Consumers != 10 || c.Publishers != 1 {
				t.Errorf("fanout = %+v", c)
			}
			if c.routesPerMessage() != 10 {
				t.Errorf("fanout routes = %d, want 10", c.routesPerMessage())
			}
		},
		"backlog": func(t *testing.T, cs []Config) {
			if len(cs) != 2 {
				t.Fatalf("backlog has %d phases, want fill and drain", len(cs))
			}
			fill, drain := cs[0], cs[1]
			persistentLike(t, fill)
			if fill.Publishers != 1 || fill.Consumers != 0 || fill.PMessages != o.messages || !fill.Purge || fill.Duration != 0 {
				t.Errorf("fill = %+v", fill)
			}
			if drain.Publishers != 0 || drain.Consumers != 1 || drain.CMessages != o.messages || !drain.Predeclared ||
				drain.Purge || drain.AutoAck || drain.Duration != 0 {
				t.Errorf("drain = %+v", drain)
			}
			if fill.QueuePattern != drain.QueuePattern || fill.Queues != 1 || drain.Queues != 1 {
				t.Errorf("fill and drain use different queues: %q/%d vs %q/%d", fill.QueuePattern, fill.Queues, drain.QueuePattern, drain.Queues)
			}
		},
	}
	phased := 0
	for _, sc := range scenarios {
		if sc.custom == nil {
			phased++
		}
	}
	if len(tests) != phased {
		t.Fatalf("%d presets tested, %d defined with phases", len(tests), phased)
	}
	for _, sc := range scenarios {
		if sc.custom != nil {
			continue // runs its own workload (TestEndToEndIdleScenario)
		}
		t.Run(sc.name, func(t *testing.T) {
			check, ok := tests[sc.name]
			if !ok {
				t.Fatalf("no test for preset %q", sc.name)
			}
			cs := sc.phases(o)
			if len(cs) == 0 {
				t.Fatal("no phases")
			}
			for _, c := range cs {
				if err := c.Validate(); err != nil {
					t.Errorf("phase %s invalid: %v", c.Name, err)
				}
				if c.Client != o.client {
					t.Errorf("phase %s client = %q, want %q", c.Name, c.Client, o.client)
				}
				if c.URL != o.url {
					t.Errorf("phase %s URL = %q, want %q", c.Name, c.URL, o.url)
				}
				if sc.name != "backlog" && c.Duration != o.duration {
					t.Errorf("phase %s duration = %v, want %v", c.Name, c.Duration, o.duration)
				}
				if !strings.HasPrefix(c.QueuePattern, "warren-perf-") {
					t.Errorf("phase %s queue pattern %q: scenario queues must be recognisable", c.Name, c.QueuePattern)
				}
			}
			check(t, cs)
		})
	}
}

func TestBacklogDrainsWhatWasConfirmed(t *testing.T) {
	sc, err := findScenario("backlog")
	if err != nil {
		t.Fatal(err)
	}
	drain := sc.phases(testScenarioOptions())[1]
	sc.next(Summary{Published: 20_000, Confirmed: 19_990, Nacked: 10}, &drain)
	if drain.CMessages != 19_990 {
		t.Fatalf("drain CMessages = %d, want the 19,990 confirmed", drain.CMessages)
	}
}

func TestParseScenarioArgs(t *testing.T) {
	tests := []struct {
		args     []string
		name     string
		duration time.Duration
		messages uint64
		json     bool
		client   string
	}{
		{[]string{"transient"}, "transient", 30 * time.Second, 1_000_000, false, clientFast},
		{[]string{"persistent", "--duration", "10s", "--json"}, "persistent", 10 * time.Second, 1_000_000, true, clientFast},
		{[]string{"--duration", "5s", "latency"}, "latency", 5 * time.Second, 1_000_000, false, clientFast},
		{[]string{"backlog", "--messages", "20000"}, "backlog", 30 * time.Second, 20_000, false, clientFast},
		{[]string{"transient", "--client", "amqp091"}, "transient", 30 * time.Second, 1_000_000, false, clientAMQP091},
		{[]string{"list"}, "list", 30 * time.Second, 1_000_000, false, clientFast},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			name, o, err := parseScenarioArgs(tt.args, &bytes.Buffer{})
			if err != nil {
				t.Fatal(err)
			}
			if name != tt.name || o.duration != tt.duration || o.messages != tt.messages || o.json != tt.json || o.client != tt.client {
				t.Fatalf("got %q %+v", name, o)
			}
		})
	}
	for _, bad := range [][]string{{}, {"nope"}, {"backlog", "--messages", "0"}, {"transient", "extra"}, {"transient", "--rate", "5"}, {"transient", "--client", "nope"}} {
		if _, _, err := parseScenarioArgs(bad, &bytes.Buffer{}); err == nil || errors.Is(err, flag.ErrHelp) {
			t.Errorf("%q accepted (err %v)", bad, err)
		}
	}
	if _, _, err := parseScenarioArgs([]string{"nope"}, &bytes.Buffer{}); !errors.Is(err, ErrUnknownScenario) {
		t.Errorf("unknown scenario: err %v, want ErrUnknownScenario", err)
	}
}

func TestScenarioListCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := scenarioMain(context.Background(), []string{"list"}, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, errOut.String())
	}
	for _, sc := range scenarios {
		if !strings.Contains(out.String(), sc.name) {
			t.Errorf("scenario list lacks %q:\n%s", sc.name, out.String())
		}
	}
	out.Reset()
	if code := scenarioMain(context.Background(), []string{"-h"}, &out, &errOut); code != exitOK {
		t.Fatalf("scenario -h: exit %d", code)
	}
	if code := scenarioMain(context.Background(), []string{"nope"}, &out, &errOut); code != exitUsage {
		t.Fatalf("unknown scenario: exit %d, want %d", code, exitUsage)
	}
}
