package main

import (
	"bytes"
	"errors"
	"flag"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseFlagsDefaults(t *testing.T) {
	o, err := parseFlags(nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(o.cfg, DefaultConfig()) {
		t.Fatalf("no flags gave %+v, want DefaultConfig %+v", o.cfg, DefaultConfig())
	}
	if o.json || o.quiet {
		t.Fatalf("json=%t quiet=%t, want both false", o.json, o.quiet)
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig is invalid: %v", err)
	}
}

func TestParseFlagsSetsEveryField(t *testing.T) {
	tests := []struct {
		args []string
		want func(*options)
	}{
		{[]string{"--url", "amqp://u:p@127.0.0.1:5673/vh"}, func(o *options) { o.cfg.URL = "amqp://u:p@127.0.0.1:5673/vh" }},
		{[]string{"--publishers", "3"}, func(o *options) { o.cfg.Publishers = 3 }},
		{[]string{"-x", "3"}, func(o *options) { o.cfg.Publishers = 3 }},
		{[]string{"--consumers=5"}, func(o *options) { o.cfg.Consumers = 5 }},
		{[]string{"-y", "0"}, func(o *options) { o.cfg.Consumers = 0 }},
		{[]string{"--queues", "4"}, func(o *options) { o.cfg.Queues = 4 }},
		{[]string{"--queue-pattern", "q-%d", "--queues", "2"}, func(o *options) { o.cfg.QueuePattern, o.cfg.Queues = "q-%d", 2 }},
		{[]string{"--exchange", "ex"}, func(o *options) { o.cfg.Exchange = "ex" }},
		{[]string{"--exchange", "ex", "--exchange-type", "fanout"}, func(o *options) { o.cfg.Exchange, o.cfg.ExchangeType = "ex", "fanout" }},
		{[]string{"--size", "1024"}, func(o *options) { o.cfg.Size = 1024 }},
		{[]string{"-s", "0"}, func(o *options) { o.cfg.Size = 0 }},
		{[]string{"--confirm", "256"}, func(o *options) { o.cfg.Confirm = 256 }},
		{[]string{"-c", "1"}, func(o *options) { o.cfg.Confirm = 1 }},
		{[]string{"--persistent"}, func(o *options) { o.cfg.Persistent = true }},
		{[]string{"--durable"}, func(o *options) { o.cfg.Durable = true }},
		{[]string{"--prefetch", "100"}, func(o *options) { o.cfg.Prefetch = 100 }},
		{[]string{"-q", "0"}, func(o *options) { o.cfg.Prefetch = 0 }},
		{[]string{"--autoack"}, func(o *options) { o.cfg.AutoAck = true }},
		{[]string{"-a"}, func(o *options) { o.cfg.AutoAck = true }},
		{[]string{"--multi-ack-every", "10"}, func(o *options) { o.cfg.MultiAckEvery = 10 }},
		{[]string{"-A", "10"}, func(o *options) { o.cfg.MultiAckEvery = 10 }},
		{[]string{"--rate", "2000"}, func(o *options) { o.cfg.Rate = 2000 }},
		{[]string{"-r", "0.5"}, func(o *options) { o.cfg.Rate = 0.5 }},
		{[]string{"--duration", "10s"}, func(o *options) { o.cfg.Duration = 10 * time.Second }},
		{[]string{"-z", "1m"}, func(o *options) { o.cfg.Duration = time.Minute }},
		{[]string{"--warmup", "2s"}, func(o *options) { o.cfg.Warmup = 2 * time.Second }},
		{[]string{"--pmessages", "1000"}, func(o *options) { o.cfg.PMessages = 1000 }},
		{[]string{"-C", "7"}, func(o *options) { o.cfg.PMessages = 7 }},
		{[]string{"--cmessages", "1000"}, func(o *options) { o.cfg.CMessages = 1000 }},
		{[]string{"-D", "7"}, func(o *options) { o.cfg.CMessages = 7 }},
		{[]string{"--predeclared"}, func(o *options) { o.cfg.Predeclared = true }},
		{[]string{"--purge"}, func(o *options) { o.cfg.Purge = true }},
		{[]string{"--delete-queues"}, func(o *options) { o.cfg.DeleteQueues = true }},
		{[]string{"--drain-timeout", "3s"}, func(o *options) { o.cfg.DrainTimeout = 3 * time.Second }},
		{[]string{"--client", "amqp091"}, func(o *options) { o.cfg.Client = clientAMQP091 }},
		{[]string{"--client=fast"}, func(o *options) { o.cfg.Client = clientFast }},
		{[]string{"--json"}, func(o *options) { o.json = true }},
		{[]string{"--quiet"}, func(o *options) { o.quiet = true }},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			got, err := parseFlags(tt.args, &bytes.Buffer{})
			if err != nil {
				t.Fatal(err)
			}
			want := options{cfg: DefaultConfig()}
			tt.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got  %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestParseFlagsRejects(t *testing.T) {
	tests := []struct {
		args    []string
		invalid bool // ErrInvalidConfig, else a flag-package error
	}{
		{[]string{"--url", "http://localhost/"}, true},
		{[]string{"-x", "0", "-y", "0"}, true},
		{[]string{"-x", "-1"}, true},
		{[]string{"--queues", "0"}, true},
		{[]string{"--queues", "3", "--queue-pattern", "fixed"}, true},
		{[]string{"--queue-pattern", "a-%s"}, true},
		{[]string{"--queue-pattern", "a-%d-%d", "--queues", "2"}, true},
		{[]string{"--queue-pattern", ""}, true},
		{[]string{"--queue-pattern", strings.Repeat("q", 300)}, true},
		{[]string{"--size", "-1"}, true},
		{[]string{"--size", "200000000"}, true},
		{[]string{"--confirm", "-5"}, true},
		{[]string{"--prefetch", "70000"}, true},
		{[]string{"--autoack", "--multi-ack-every", "5"}, true},
		{[]string{"--prefetch", "10", "--multi-ack-every", "11"}, true},
		{[]string{"--rate", "-1"}, true},
		{[]string{"--rate", "NaN"}, true},
		{[]string{"--duration", "-1s"}, true},
		{[]string{"--warmup", "-1s"}, true},
		{[]string{"--drain-timeout", "0s"}, true},
		{[]string{"--exchange-type", "fanout"}, true},
		{[]string{"--exchange", "e", "--exchange-type", "headers"}, true},
		{[]string{"stray"}, true},
		{[]string{"--client", "amqp"}, true},
		{[]string{"--client", ""}, true},
		{[]string{"--pmessages", "-1"}, false},
		{[]string{"--duration", "10"}, false}, // no unit
		{[]string{"--no-such-flag"}, false},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := parseFlags(tt.args, &bytes.Buffer{})
			if err == nil {
				t.Fatal("accepted")
			}
			if tt.invalid != errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("err = %v; want ErrInvalidConfig: %t", err, tt.invalid)
			}
		})
	}
}

func TestParseFlagsQueuesWithDefaultPattern(t *testing.T) {
	o, err := parseFlags([]string{"--queues", "3"}, &bytes.Buffer{})
	if err != nil {
		t.Fatalf("--queues 3 rejected: %v", err)
	}
	if got := o.cfg.queueNames(); !reflect.DeepEqual(got, []string{"perf-1", "perf-2", "perf-3"}) {
		t.Fatalf("queue names %v", got)
	}
}

func TestHelpDocumentsEveryFlag(t *testing.T) {
	var out bytes.Buffer
	_, err := parseFlags([]string{"-h"}, &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h gave %v, want flag.ErrHelp", err)
	}
	help := out.String()
	var o options
	runFlags(&o, &bytes.Buffer{}).fs.VisitAll(func(f *flag.Flag) {
		prefix := "--"
		if len(f.Name) == 1 {
			prefix = "-"
		}
		if !strings.Contains(help, prefix+f.Name) {
			t.Errorf("-h does not mention %s%s", prefix, f.Name)
		}
	})
	for _, want := range []string{"--url", "-x, --publishers", "-y, --consumers", "--queue-pattern", "--multi-ack-every", "--pmessages", "--cmessages", "--predeclared", "--delete-queues"} {
		if !strings.Contains(help, want) {
			t.Errorf("-h does not mention %q", want)
		}
	}
}

func TestQueueNames(t *testing.T) {
	tests := []struct {
		pattern string
		n       int
		want    []string
	}{
		{"perf-%d", 3, []string{"perf-1", "perf-2", "perf-3"}},
		{"%d", 2, []string{"1", "2"}},
		{"fixed", 1, []string{"fixed"}},
		{"pre-%d-post", 1, []string{"pre-1-post"}},
	}
	for _, tt := range tests {
		c := DefaultConfig()
		c.QueuePattern, c.Queues = tt.pattern, tt.n
		if err := c.Validate(); err != nil {
			t.Fatalf("%q x %d: %v", tt.pattern, tt.n, err)
		}
		if got := c.queueNames(); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q x %d = %v, want %v", tt.pattern, tt.n, got, tt.want)
		}
	}
}

func TestRoutesPerMessage(t *testing.T) {
	c := DefaultConfig()
	c.Queues = 4
	if got := c.routesPerMessage(); got != 1 {
		t.Fatalf("default exchange: %d routes, want 1", got)
	}
	c.Exchange, c.ExchangeType = "e", "fanout"
	if got := c.routesPerMessage(); got != 4 {
		t.Fatalf("fanout to 4 queues: %d routes, want 4", got)
	}
}

func TestRedactURL(t *testing.T) {
	got := redactURL("amqp://guest:secret@localhost:5672/")
	if strings.Contains(got, "secret") || !strings.Contains(got, "guest") {
		t.Fatalf("redactURL = %q", got)
	}
}
