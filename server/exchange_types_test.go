package server

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// The x-consistent-hash and x-modulus-hash scenarios below run against Warren
// and, when WARREN_REF_AMQP_URL is set, against a RabbitMQ 3.10 node with the
// rabbitmq_consistent_hash_exchange and rabbitmq_sharding plugins enabled, and
// then check that both brokers put every message in the same queue. The
// expected summaries hard-coded here were recorded that way from RabbitMQ
// 3.10.8 with
//
//	WARREN_REF_AMQP_URL=amqp://guest:guest@127.0.0.1:5699/ \
//	WARREN_REF_CTL='. /work/rabbitref/env.sh; cd /tmp; rabbitmqctl -n warrenref@localhost' \
//	go test ./server -run 'TestConsistentHash|TestModulusHash' -v
//
// which logs RabbitMQ's summaries; so Warren is checked against them even when
// no reference node is at hand. A summary is the message count per queue and
// a digest of which queue each message went to, in publish order.

// hashBroker is a broker a scenario runs against.
type hashBroker struct {
	url string
	ref bool
	// restart restarts the broker (or, for RabbitMQ, does to the exchange's
	// ring what a restart does) and returns the URL to reconnect to.
	restart func(t *testing.T, exchange string) string
}

func refBroker() (hashBroker, bool) {
	url := os.Getenv("WARREN_REF_AMQP_URL")
	if url == "" {
		return hashBroker{}, false
	}
	return hashBroker{url: url, ref: true, restart: func(t *testing.T, exchange string) string {
		// The plugin keeps its ring in a RAM table rebuilt at boot from the
		// bindings (init/0 → recover/0); deleting the exchange's row and calling
		// init/0 rebuilds exactly that exchange's ring as a reboot would.
		expr := fmt.Sprintf(`mnesia:dirty_delete(rabbit_exchange_type_consistent_hash_ring_state, `+
			`rabbit_misc:r(<<"/">>, exchange, <<"%s">>)), rabbit_exchange_type_consistent_hash:init().`, exchange)
		out, err := exec.Command("sh", "-c", os.Getenv("WARREN_REF_CTL")+" eval '"+expr+"'").CombinedOutput()
		if err != nil {
			t.Fatalf("rebuilding RabbitMQ's ring: %v: %s", err, out)
		}
		return url
	}}, true
}

func warrenBroker(t *testing.T) hashBroker {
	dir := t.TempDir()
	ts := startServer(t, withDataDir(dir))
	return hashBroker{url: ts.url, restart: func(t *testing.T, _ string) string {
		must(t, ts.Close())
		ts = startServer(t, withDataDir(dir))
		return ts.url
	}}
}

// compareWithRabbitMQ runs scenario on Warren, checks it against the summary
// recorded from RabbitMQ, and, with a reference node configured, runs it there
// too.
func compareWithRabbitMQ(t *testing.T, recorded string, scenario func(t *testing.T, b hashBroker) string) {
	got := scenario(t, warrenBroker(t))
	if got != recorded {
		t.Errorf("Warren:\n%s\nRabbitMQ 3.10 (recorded):\n%s", got, recorded)
	}
	if ref, ok := refBroker(); ok {
		want := scenario(t, ref)
		t.Logf("RabbitMQ's summary:\n%s", want)
		if got != want {
			t.Errorf("Warren:\n%s\nRabbitMQ 3.10 (live):\n%s", got, want)
		}
	}
}

// hashClient is one connection with a channel in confirm mode.
type hashClient struct {
	t    *testing.T
	url  string
	ref  bool // on the reference node: delete what the scenario declares
	conn *amqp091.Connection
	ch   *amqp091.Channel
	acks chan amqp091.Confirmation
}

func newHashClient(t *testing.T, b hashBroker, url string) *hashClient {
	t.Helper()
	conn, err := amqp091.Dial(url)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	must(t, err)
	must(t, ch.Confirm(false))
	return &hashClient{t: t, url: url, ref: b.ref, conn: conn, ch: ch, acks: ch.NotifyPublish(make(chan amqp091.Confirmation, 4096))}
}

func (c *hashClient) queues(durable bool, names ...string) {
	for _, q := range names {
		_, err := c.ch.QueueDeclare(q, durable, false, false, false, nil)
		must(c.t, err)
		c.cleanup(func(ch *amqp091.Channel) error { _, err := ch.QueueDelete(q, false, false, false); return err })
	}
}

func (c *hashClient) exchange(name, kind string, durable bool, args amqp091.Table) {
	must(c.t, c.ch.ExchangeDeclare(name, kind, durable, false, false, false, args))
	c.cleanup(func(ch *amqp091.Channel) error { return ch.ExchangeDelete(name, false, false) })
}

// cleanup deletes from the reference node, on a fresh connection, what the
// scenario declared there. Warren's test servers go away with their data.
func (c *hashClient) cleanup(del func(*amqp091.Channel) error) {
	if !c.ref {
		return
	}
	url := c.url
	c.t.Cleanup(func() {
		conn, err := amqp091.Dial(url)
		if err != nil {
			c.t.Errorf("cleaning up the reference node: %v", err)
			return
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err == nil {
			err = del(ch)
		}
		if err != nil {
			c.t.Errorf("cleaning up the reference node: %v", err)
		}
	})
}

func (c *hashClient) bind(q, key, ex string) { must(c.t, c.ch.QueueBind(q, key, ex, false, nil)) }

// publishAll publishes msgs to ex with keys and waits for every confirm. Each
// body is the message's index.
func (c *hashClient) publishAll(ex string, msgs []amqp091.Publishing, keys []string) {
	c.t.Helper()
	for i, m := range msgs {
		m.Body = []byte(strconv.Itoa(i))
		must(c.t, c.ch.PublishWithContext(context.Background(), ex, keys[i], false, false, m))
	}
	for range msgs {
		select {
		case conf := <-c.acks:
			if !conf.Ack {
				c.t.Fatalf("publish %d nacked", conf.DeliveryTag)
			}
		case <-time.After(10 * time.Second):
			c.t.Fatal("no confirm")
		}
	}
}

// digest identifies which queue each message went to.
func digest(where []string) string {
	sum := sha256.Sum256([]byte(strings.Join(where, ",")))
	return fmt.Sprintf("%x", sum[:6])
}

// where empties the queues and returns the queue each of the n messages was
// in ("" for one routed nowhere).
func (c *hashClient) where(n int, queues ...string) []string {
	c.t.Helper()
	where := make([]string, n)
	for _, q := range queues {
		for got := 0; got <= n; got++ {
			d, ok, err := c.ch.Get(q, true)
			must(c.t, err)
			if !ok {
				break
			}
			i, err := strconv.Atoi(string(d.Body))
			if err != nil || i >= n || where[i] != "" {
				c.t.Fatalf("unexpected message %q in %s", d.Body, q)
			}
			where[i] = q
		}
	}
	return where
}

func routingKeys(n int) ([]amqp091.Publishing, []string) {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "key-" + strconv.Itoa(i)
	}
	return make([]amqp091.Publishing, n), keys
}
