package server

import (
	"crypto/md5"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"os"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/amqp"
)

// rabbitHash builds a RabbitMQ password hash: base64(salt ‖ H(salt ‖ password)).
func rabbitHash(sum func([]byte) []byte, salt, password string) string {
	digest := sum(append([]byte(salt), password...))
	return base64.StdEncoding.EncodeToString(append([]byte(salt), digest...))
}

func TestAdminPasswordHashAlgorithms(t *testing.T) {
	ts := startServer(t)
	sha512sum := func(b []byte) []byte { s := sha512.Sum512(b); return s[:] }
	md5sum := func(b []byte) []byte { s := md5.Sum(b); return s[:] }
	cases := []struct {
		user, hash, alg string
	}{
		{"u256", HashPassword("secret"), HashSHA256},
		{"u512", rabbitHash(sha512sum, "salt", "secret"), HashSHA512},
		{"umd5", rabbitHash(md5sum, "SALT", "secret"), HashMD5},
	}
	for _, c := range cases {
		h := c.hash
		if _, err := ts.PutUser(UserSpec{Name: c.user, PasswordHash: &h, HashingAlgorithm: c.alg, Tags: []string{"management"}}); err != nil {
			t.Fatalf("%s: %v", c.user, err)
		}
		ts.grant(t, c.user, "/", Permission{".*", ".*", ".*"})
		if HashAlgorithm(h) != c.alg {
			t.Errorf("%s: algorithm %s, want %s", c.user, HashAlgorithm(h), c.alg)
		}
		if _, err := ts.Login(c.user, "secret", true); err != nil {
			t.Errorf("%s: login: %v", c.user, err)
		}
		if _, err := ts.Login(c.user, "wrong", true); !errors.Is(err, ErrLoginFailed) {
			t.Errorf("%s: wrong password: %v", c.user, err)
		}
		conn, err := amqp091.Dial("amqp://" + c.user + ":secret@" + ts.addr + "/")
		if err != nil {
			t.Errorf("%s: AMQP login with a %s hash: %v", c.user, c.alg, err)
			continue
		}
		conn.Close()
	}
	for _, bad := range []struct{ hash, alg string }{
		{"not base64!", ""}, {base64.StdEncoding.EncodeToString([]byte("short")), ""},
		{cases[0].hash, HashSHA512}, {cases[1].hash, "rabbit_password_hashing_nope"},
	} {
		if err := CheckPasswordHash(bad.hash, bad.alg); !errors.Is(err, ErrInvalid) {
			t.Errorf("CheckPasswordHash(%q, %q) = %v", bad.hash, bad.alg, err)
		}
	}
	// A user without a password cannot log in with any password.
	empty := ""
	if _, err := ts.PutUser(UserSpec{Name: "nopass", PasswordHash: &empty}); err != nil {
		t.Fatalf("nopass: %v", err)
	}
	if _, err := ts.Login("nopass", "", true); !errors.Is(err, ErrLoginFailed) {
		t.Errorf("nopass login: %v", err)
	}
	if u, _ := ts.User("nopass"); u.HasPassword {
		t.Error("nopass has a password")
	}
	// guest may log in only from loopback.
	if _, err := ts.Login("guest", "guest", false); !errors.Is(err, ErrLoopbackOnly) {
		t.Errorf("guest from elsewhere: %v", err)
	}
	pw := "a"
	if _, err := ts.PutUser(UserSpec{Name: "both", Password: &pw, PasswordHash: &pw}); !errors.Is(err, ErrInvalid) {
		t.Errorf("both password and hash: %v", err)
	}
}

func TestAdminChannelRegistryAndCounters(t *testing.T) {
	ts := startServer(t)
	conn, ch := ts.channel(t)
	ch2, err := conn.Channel()
	must(t, err)
	must(t, ch2.Confirm(false))
	confirms := ch2.NotifyPublish(make(chan amqp091.Confirmation, 4))
	mustDeclare(t, ch, "q", nil)
	for i := 0; i < 3; i++ {
		publish(t, ch2, "", "q", "m")
		nextConfirm(t, confirms)
	}
	chans := ts.Channels()
	if len(chans) != 2 || chans[1].Confirm != true || chans[1].Stats.Publish != 3 {
		t.Fatalf("channels %+v", chans)
	}
	waitFor(t, 2*time.Second, "confirm counter", func() bool { return ts.Channels()[1].Stats.Confirm == 3 })
	if d := ts.ConnectionDetails(); len(d) != 1 || d[0].Channels != 2 {
		t.Fatalf("connection details %+v", d)
	}
	must(t, ch2.Close())
	waitFor(t, 2*time.Second, "channel gone", func() bool { return len(ts.Channels()) == 1 })
	if c := ts.VhostCounters()["/"]; c.Publish != 3 || c.Confirm != 3 {
		t.Errorf("vhost counters after the channel closed: %+v", c)
	}
	must(t, conn.Close())
	waitFor(t, 2*time.Second, "no channels", func() bool { return len(ts.Channels()) == 0 })
	if c := ts.VhostCounters()["/"]; c.Publish != 3 {
		t.Errorf("vhost counters after the connection closed: %+v", c)
	}
}

// TestAdminDeleteVhostRemovesEverything deletes a vhost with a durable queue
// holding a persistent message and checks that nothing of it survives a
// restart.
func TestAdminDeleteVhostRemovesEverything(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, withDataDir(dir))
	if _, err := ts.PutVhost("v", VhostMeta{Description: "d"}); err != nil {
		t.Fatal(err)
	}
	ts.grant(t, "guest", "v", Permission{".*", ".*", ".*"})
	if _, err := ts.SetTopicPermission(TopicPermission{User: "guest", Vhost: "v", Exchange: "amq.topic", Write: "^w"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.DeclareQueue("v", QueueSpec{Name: "dq", Durable: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.PutPolicy(Policy{Vhost: "v", Name: "p", Pattern: ".*", ApplyTo: ApplyToAll, Definition: map[string]any{"expires": int64(100000)}}, false); err != nil {
		t.Fatal(err)
	}
	props := Publishing{RoutingKey: "dq", Body: []byte("persistent")}
	props.Properties.Flags, props.Properties.DeliveryMode = 0x1000, 2
	if routed, err := ts.Publish("v", props); err != nil || !routed {
		t.Fatalf("publish: %v %v", routed, err)
	}
	conn, err := amqp091.Dial("amqp://guest:guest@" + ts.addr + "/v")
	must(t, err)
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	if _, err := os.Stat(vhostDir(dir, "v")); err != nil {
		t.Fatalf("vhost directory: %v", err)
	}
	must(t, ts.DeleteVhost("v"))
	if e := waitClose(t, closed); e == nil || e.Code != 320 {
		t.Errorf("connection close %+v", e)
	}
	if _, err := os.Stat(vhostDir(dir, "v")); !os.IsNotExist(err) {
		t.Errorf("vhost files left: %v", err)
	}
	if err := ts.DeleteVhost("v"); !errors.Is(err, ErrNoSuchVhost) {
		t.Errorf("second delete: %v", err)
	}
	if tps := ts.TopicPermissions(); len(tps) != 0 {
		t.Errorf("topic permissions on the deleted vhost survived: %+v", tps)
	}
	must(t, ts.Close())
	ts2 := startServer(t, withDataDir(dir))
	if ts2.Vhost("v") != nil {
		t.Fatal("deleted vhost came back after restart")
	}
	for _, p := range ts2.Permissions() {
		if p.Vhost == "v" {
			t.Errorf("permission on the deleted vhost survived: %+v", p)
		}
	}
	if tps := ts2.TopicPermissions(); len(tps) != 0 {
		t.Errorf("topic permissions on the deleted vhost came back: %+v", tps)
	}
	if _, err := ts2.PutVhost("v", VhostMeta{}); err != nil {
		t.Fatal(err)
	}
	if n := len(ts2.Vhost("v").Queues()); n != 0 || len(ts2.Policies("v", false)) != 0 {
		t.Errorf("re-created vhost inherits %d queues and %d policies", n, len(ts2.Policies("v", false)))
	}
}

func TestAdminQueueStatus(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	must(t, ch.Qos(1, 0, false))
	mustDeclare(t, ch, "q", amqp091.Table{"x-single-active-consumer": true})
	q := ts.Vhost("/").LookupQueue("q")
	if st := q.Status(); st.ConsumerCapacity != 0 || st.IdleSince.IsZero() {
		t.Errorf("no consumers: %+v", st)
	}
	_, err := ch.Consume("q", "first", false, false, false, false, nil)
	must(t, err)
	_, err = ch.Consume("q", "second", false, false, false, false, nil)
	must(t, err)
	if st := q.Status(); st.ConsumerCapacity != 1 || st.SingleActiveConsumerTag != "first" || !st.IdleSince.IsZero() {
		t.Errorf("idle with consumers: %+v", st)
	}
	cs := q.Consumers()
	if len(cs) != 2 || !cs[0].Active || cs[1].Active || !cs[1].SingleActiveWaiter || cs[0].Timeout != 30*time.Minute {
		t.Errorf("consumers %+v", cs)
	}
	for i := 0; i < 3; i++ {
		publish(t, ch, "", "q", "m")
	}
	waitFor(t, 2*time.Second, "consumer saturated", func() bool { return q.Status().ConsumerCapacity < 1 })
}

// The administrative queue calls share AMQP's queue lookup with their own
// error mapping: a missing vhost or queue is ErrNoSuchVhost or ErrNotFound
// (the management API's 404 "Object Not Found"), and another connection's
// exclusive queue is 405 RESOURCE_LOCKED with RabbitMQ's text, which
// RabbitMQ 3.10's management API also refuses to purge, get from or delete.
func TestAdminQueueCallsShareTheQueueLookup(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	_, err := ch.QueueDeclare("excl", false, false, true, false, nil)
	must(t, err)
	calls := map[string]func(vhost, queue string) error{
		"delete": func(vhost, queue string) error { return ts.DeleteQueue(vhost, queue, false, false) },
		"purge":  func(vhost, queue string) error { _, err := ts.PurgeQueue(vhost, queue); return err },
		"get": func(vhost, queue string) error {
			_, err := ts.GetMessages(vhost, queue, 1, GetAckRequeue)
			return err
		},
	}
	const locked = "cannot obtain exclusive access to locked queue 'excl' in vhost '/'. It could be originally declared on another connection or the exclusive property value does not match that of the original declaration."
	for what, call := range calls {
		if err := call("nosuch", "q"); !errors.Is(err, ErrNoSuchVhost) {
			t.Errorf("%s in a missing vhost: %v, want ErrNoSuchVhost", what, err)
		}
		if err := call("/", "nosuch"); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s of a missing queue: %v, want ErrNotFound", what, err)
		}
		var aerr *amqp.Error
		if err := call("/", "excl"); !errors.As(err, &aerr) || aerr.Code != amqp.ResourceLocked || aerr.Text != locked {
			t.Errorf("%s of another connection's exclusive queue: %v, want 405 %q", what, err, locked)
		}
	}
	if ts.Vhost("/").LookupQueue("excl") == nil {
		t.Fatal("a refused delete deleted the exclusive queue")
	}
}

// TestConsumerCapacityIsATimeAverage: a consumer stuck at its prefetch
// lowers the queue's capacity gradually, halving the old figure each
// second, as RabbitMQ 3.10's use_avg does; once it takes messages again the
// figure climbs back.
func TestConsumerCapacityIsATimeAverage(t *testing.T) {
	ts := startServer(t)
	_, ch := ts.channel(t)
	must(t, ch.Qos(1, 0, false))
	mustDeclare(t, ch, "cap", nil)
	q := ts.Vhost("/").LookupQueue("cap")
	d, err := ch.Consume("cap", "c", false, false, false, false, nil)
	must(t, err)
	for range 3 {
		publish(t, ch, "", "cap", "m")
	}
	first := recv(t, d) // the consumer is now at its prefetch with 2 waiting
	waitFor(t, 5*time.Second, "capacity below 1", func() bool { return q.Status().ConsumerCapacity < 1 })
	if c := q.Status().ConsumerCapacity; c < 0.3 {
		t.Fatalf("capacity %.3f right after blocking: not a time average", c)
	}
	waitFor(t, 10*time.Second, "capacity decayed", func() bool { return q.Status().ConsumerCapacity < 0.2 })
	must(t, first.Ack(false))
	for range 2 {
		must(t, recv(t, d).Ack(false))
	}
	low := q.Status().ConsumerCapacity
	waitFor(t, 10*time.Second, "capacity recovered", func() bool { return q.Status().ConsumerCapacity > 0.8 })
	if low > 0.5 {
		t.Fatalf("capacity %.3f just after unblocking, want it still low", low)
	}
}
