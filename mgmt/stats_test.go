package mgmt

import (
	"errors"
	"fmt"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/server"
)

// TestMgmtMessageStats drives every counter the overview reports over AMQP
// and checks the exact counts, then the rates the sampler derives from them.
// The background sampler is slowed to a minute so the test samples by hand.
func TestMgmtMessageStats(t *testing.T) {
	e := newEnv(t, func(_ *server.Config, c *Config) { c.StatsInterval = time.Minute })
	e.must(e.put("/api/queues/%2F/q", map[string]any{}), 201, "q")
	t0 := time.Now()
	e.api.stats.sample(t0)
	conn := e.dial("")
	pub := e.channel(conn)
	if err := pub.Confirm(false); err != nil {
		t.Fatalf("confirm: %v", err)
	}
	confirms := pub.NotifyPublish(make(chan amqp091.Confirmation, 16))
	returns := pub.NotifyReturn(make(chan amqp091.Return, 1))
	for i := 0; i < 10; i++ {
		if err := pub.Publish("", "q", false, false, amqp091.Publishing{Body: []byte("m")}); err != nil {
			t.Fatalf("publish: %v", err)
		}
		<-confirms
	}
	if err := pub.Publish("", "nowhere", true, false, amqp091.Publishing{Body: []byte("r")}); err != nil {
		t.Fatalf("publish: %v", err)
	}
	<-confirms
	<-returns
	if err := pub.Publish("", "nowhere", false, false, amqp091.Publishing{Body: []byte("d")}); err != nil {
		t.Fatalf("publish: %v", err)
	}
	<-confirms
	// 4 gets without ack, 1 with ack, then a consumer with prefetch 1 that
	// requeues its first delivery once and acks the rest, then an empty get.
	getter := e.channel(conn)
	for i := 0; i < 4; i++ {
		if _, ok, err := getter.Get("q", true); err != nil || !ok {
			t.Fatalf("get %d: %v %v", i, ok, err)
		}
	}
	d, ok, err := getter.Get("q", false)
	if err != nil || !ok {
		t.Fatalf("get with ack: %v %v", ok, err)
	}
	d.Ack(false)
	cons := e.channel(conn)
	if err := cons.Qos(1, 0, false); err != nil {
		t.Fatalf("qos: %v", err)
	}
	deliveries, err := cons.Consume("q", "c", false, false, false, false, nil)
	if err != nil {
		t.Fatalf("consume: %v", err)
	}
	for acked, first := 0, true; acked < 5; first = false {
		d := <-deliveries
		if first {
			d.Nack(false, true)
			continue
		}
		d.Ack(false)
		acked++
	}
	if err := cons.Cancel("c", false); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if _, ok, err := getter.Get("q", true); err != nil || ok {
		t.Fatalf("get on an empty queue: %v %v", ok, err)
	}
	want := map[string]float64{
		"publish": 12, "confirm": 12, "return_unroutable": 1, "drop_unroutable": 1,
		"get_no_ack": 4, "get": 1, "get_empty": 1, "deliver": 6, "deliver_no_ack": 0,
		"redeliver": 1, "ack": 6, "deliver_get": 11,
	}
	waitFor(t, 5*time.Second, func() error {
		ms := e.get("/api/overview").object(t)["message_stats"]
		for k, v := range want {
			if got := field(ms, k); got == nil || num(t, got) != v {
				return errorf("%s = %v, want %v (%v)", k, got, v, ms)
			}
		}
		return nil
	})
	// Rates: the second sample is one second after the first.
	e.api.stats.sample(t0.Add(time.Second))
	ov := e.get("/api/overview").object(t)
	if r := num(t, field(ov, "message_stats.publish_details.rate")); r != 12 {
		t.Errorf("publish rate %v, want 12/s", r)
	}
	ch := e.get("/api/channels?columns=name,message_stats").array(t)
	if len(ch) != 3 {
		t.Fatalf("%d channels", len(ch))
	}
	// Closing the connection keeps its counts in the totals.
	conn.Close()
	waitFor(t, 5*time.Second, func() error {
		if n := len(e.get("/api/channels").array(t)); n != 0 {
			return errorf("%d channels", n)
		}
		return nil
	})
	if got := num(t, field(e.get("/api/overview").object(t), "message_stats.publish")); got != 12 {
		t.Errorf("publish after the connection closed: %v", got)
	}
	vh := e.get("/api/vhosts/%2F").object(t)
	if got := num(t, field(vh, "message_stats.ack")); got != 6 {
		t.Errorf("vhost ack %v", got)
	}
}

func TestMgmtSamplesAndPruning(t *testing.T) {
	e := newEnv(t, func(_ *server.Config, c *Config) { c.StatsInterval = time.Minute; c.ObjectHistory = 4 })
	e.must(e.put("/api/queues/%2F/q", map[string]any{}), 201, "q")
	base := time.Now()
	for i := 0; i < 6; i++ {
		e.publishN("q", 1)
		e.api.stats.sample(base.Add(time.Duration(i) * 5 * time.Second))
	}
	q := e.get("/api/queues/%2F/q?lengths_age=60&lengths_incr=5&msg_rates_age=60&msg_rates_incr=5").object(t)
	d := q["messages_details"].(map[string]any)
	samples := d["samples"].([]any)
	if len(samples) != 4 {
		t.Fatalf("%d samples kept, want ObjectHistory=4: %v", len(samples), d)
	}
	newest := samples[0].(map[string]any)
	if num(t, newest["sample"]) != 6 || num(t, samples[3].(map[string]any)["sample"]) != 3 {
		t.Errorf("samples %v", samples)
	}
	if num(t, d["rate"]) != 0.2 || num(t, d["avg_rate"]) != 0.2 || num(t, d["avg"]) != 4.5 {
		t.Errorf("rate %v avg_rate %v avg %v", d["rate"], d["avg_rate"], d["avg"])
	}
	if s := field(q, "message_stats.publish_details.samples"); s == nil {
		t.Errorf("msg_rates_age gave no samples: %v", q["message_stats"])
	}
	// Without *_age parameters only rates are reported.
	if field(e.get("/api/queues/%2F/q").object(t), "messages_details.samples") != nil {
		t.Error("samples without lengths_age")
	}
	e.must(e.do("DELETE", "/api/queues/%2F/q", nil), 204, "delete")
	e.api.stats.sample(base.Add(time.Minute))
	e.api.stats.mu.RLock()
	n := len(e.api.stats.queues)
	e.api.stats.mu.RUnlock()
	if n != 0 {
		t.Errorf("sampler keeps %d series of deleted queues", n)
	}
}

// TestMgmtOverviewChurnRates: the overview's churn_rates count connections,
// channels and queues as RabbitMQ 3.10's do (the UI's churn panel reads
// them), with samples that show the change once the sampler has seen it.
func TestMgmtOverviewChurnRates(t *testing.T) {
	e := newEnv(t)
	const withSamples = "/api/overview?msg_rates_age=60&msg_rates_incr=0"
	samples := func(cr map[string]any, k string) []any {
		d, _ := cr[k+"_details"].(map[string]any)
		s, _ := d["samples"].([]any)
		return s
	}
	churn := func() map[string]any {
		cr, _ := e.get(withSamples).object(t)["churn_rates"].(map[string]any)
		return cr
	}
	// A sample from before the traffic, so the samples show it arrive.
	waitFor(t, 5*time.Second, func() error {
		if len(samples(churn(), "connection_created")) == 0 {
			return errors.New("no churn sample yet")
		}
		return nil
	})

	c := e.dial("")
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("churn.q", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDelete("churn.q", false, false, false); err != nil {
		t.Fatal(err)
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	want := []string{"connection_created", "connection_closed", "channel_created", "channel_closed",
		"queue_declared", "queue_created", "queue_deleted"}
	var cr map[string]any
	waitFor(t, 5*time.Second, func() error {
		cr = churn()
		for _, k := range want {
			s := samples(cr, k)
			// Newest first: 1 now, 0 in the sample taken before the traffic.
			if fmt.Sprint(cr[k]) != "1" || len(s) < 2 || fmt.Sprint(s[0].(map[string]any)["sample"]) != "1" ||
				fmt.Sprint(s[len(s)-1].(map[string]any)["sample"]) != "0" {
				return fmt.Errorf("%s: %v, samples %v", k, cr[k], s)
			}
		}
		return nil
	})
}
