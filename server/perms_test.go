package server

import (
	"fmt"
	"regexp"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// permsUser starts a broker with user "app" (password "pw", permissions p on
// "/") and returns it with a function that dials as app with the given
// client properties.
func permsUser(t *testing.T, p Permission, tags ...string) (*testServer, func(amqp091.Table) *amqp091.Connection) {
	t.Helper()
	ts := startServer(t)
	ts.addUser(t, "app", "pw", tags...)
	ts.grant(t, "app", "/", p)
	dial := func(props amqp091.Table) *amqp091.Connection {
		t.Helper()
		c, err := amqp091.DialConfig("amqp://app:pw@"+ts.addr+"/", amqp091.Config{Properties: props})
		must(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}
	return ts, dial
}

// channelOf opens a channel on c.
func channelOf(t *testing.T, c *amqp091.Connection) *amqp091.Channel {
	t.Helper()
	ch, err := c.Channel()
	must(t, err)
	return ch
}

// publishResult publishes on a fresh channel of c and returns the channel
// error the publish caused, or nil once a synchronous method after it
// succeeded (the broker handles a channel's frames in order).
func publishResult(t *testing.T, c *amqp091.Connection, exchange, key string, p amqp091.Publishing) error {
	t.Helper()
	ch := channelOf(t, c)
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	if err := ch.Publish(exchange, key, false, false, p); err != nil {
		return err
	}
	if err := ch.Qos(0, 0, false); err != nil {
		// The close may have arrived before the declare was sent, which
		// then fails with 504 without the reason: take it from the notice.
		return waitClose(t, closed)
	}
	return ch.Close()
}

// expectRefusal fails unless err is an AMQP error with code and exactly reason.
func expectRefusal(t *testing.T, err error, code int, reason string) {
	t.Helper()
	e, ok := err.(*amqp091.Error)
	if !ok || e.Code != code || e.Reason != reason {
		t.Fatalf("want %d %q, got %v", code, reason, err)
	}
}

const topicRefusedText = "ACCESS_REFUSED - access to topic '%s' in exchange 'amq.topic' in vhost '/' refused for user 'app'"

func refusedTopic(key string) string { return fmt.Sprintf(topicRefusedText, key) }

// TestTopicPermissions checks RabbitMQ 3.10's enforcement of topic
// permissions, texts as the reference node answered: writes on publish,
// reads on queue and exchange (un)binding with the exchange as source; no
// topic permission for an exchange means no restriction; {username} is
// expanded and {client_id} is not (RabbitMQ sets it for MQTT only).
func TestTopicPermissions(t *testing.T) {
	ts, dial := permsUser(t, Permission{".*", ".*", ".*"})
	_, err := ts.SetTopicPermission(TopicPermission{User: "app", Vhost: "/", Exchange: "amq.topic",
		Write: `^{username}\.w\.`, Read: `^{username}\.r\.|^{client_id}\.`})
	must(t, err)
	c := dial(amqp091.Table{"client_id": "cid"})
	setup := channelOf(t, c)
	mustDeclare(t, setup, "app.q", nil)
	must(t, setup.ExchangeDeclare("app.x", "topic", false, true, false, false, nil))

	must(t, publishResult(t, c, "amq.topic", "app.w.a", amqp091.Publishing{}))
	expectRefusal(t, publishResult(t, c, "amq.topic", "other", amqp091.Publishing{}), 403, refusedTopic("other"))
	expectRefusal(t, publishResult(t, c, "amq.topic", "", amqp091.Publishing{}), 403, refusedTopic(""))
	must(t, publishResult(t, c, "app.x", "other", amqp091.Publishing{})) // no topic permission there

	must(t, channelOf(t, c).QueueBind("app.q", "app.r.a", "amq.topic", false, nil))
	expectRefusal(t, channelOf(t, c).QueueBind("app.q", "other", "amq.topic", false, nil), 403, refusedTopic("other"))
	expectRefusal(t, channelOf(t, c).QueueBind("app.q", "cid.a", "amq.topic", false, nil), 403, refusedTopic("cid.a"))
	must(t, channelOf(t, c).QueueBind("app.q", "{client_id}.a", "amq.topic", false, nil))
	expectRefusal(t, channelOf(t, c).QueueUnbind("app.q", "other", "amq.topic", nil), 403, refusedTopic("other"))
	must(t, channelOf(t, c).QueueUnbind("app.q", "app.r.a", "amq.topic", nil))
	// The topic check comes before the queue lookup, as in RabbitMQ.
	expectRefusal(t, channelOf(t, c).QueueBind("app.missing", "other", "amq.topic", false, nil), 403, refusedTopic("other"))
	expectRefusal(t, channelOf(t, c).ExchangeBind("app.x", "other", "amq.topic", false, nil), 403, refusedTopic("other"))
	expectRefusal(t, channelOf(t, c).ExchangeUnbind("app.x", "other", "amq.topic", false, nil), 403, refusedTopic("other"))
	must(t, channelOf(t, c).ExchangeBind("amq.topic", "other", "app.x", false, nil)) // as destination: unchecked
	must(t, channelOf(t, c).ExchangeBind("app.x", "app.r.b", "amq.topic", false, nil))
}

// TestTopicPermissionChangesApplyToOpenChannels checks that a channel that
// published with a key sees a changed or cleared topic permission at its
// next publish, so the per-channel memo cannot outlive a change.
func TestTopicPermissionChangesApplyToOpenChannels(t *testing.T) {
	ts, dial := permsUser(t, Permission{".*", ".*", ".*"})
	c := dial(nil)
	mustDeclare(t, channelOf(t, c), "app.q", nil)
	ch := channelOf(t, c)
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	sync := func() error {
		_, err := ch.QueueDeclarePassive("app.q", false, false, false, false, nil)
		return err
	}
	publish(t, ch, "amq.topic", "k", "before any topic permission")
	must(t, sync())
	_, err := ts.SetTopicPermission(TopicPermission{User: "app", Vhost: "/", Exchange: "amq.topic", Write: "^k$", Read: ".*"})
	must(t, err)
	publish(t, ch, "amq.topic", "k", "allowed")
	must(t, sync())
	_, err = ts.SetTopicPermission(TopicPermission{User: "app", Vhost: "/", Exchange: "amq.topic", Write: "^j$", Read: ".*"})
	must(t, err)
	publish(t, ch, "amq.topic", "k", "refused now")
	if e := waitClose(t, closed); e.Code != 403 || e.Reason != refusedTopic("k") {
		t.Fatalf("publish after narrowing: %v", e)
	}
	must(t, ts.ClearTopicPermissions("app", "/", ""))
	must(t, publishResult(t, c, "amq.topic", "k", amqp091.Publishing{}))
}

// TestTopicPermissionVariablesAreLiteral checks that an expanded user or
// vhost name matches only itself: its dots are not wildcards.
func TestTopicPermissionVariablesAreLiteral(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.Vhosts = []string{"v.1"} })
	ts.addUser(t, "a.b", "pw")
	ts.grant(t, "a.b", "v.1", Permission{".*", ".*", ".*"})
	_, err := ts.SetTopicPermission(TopicPermission{User: "a.b", Vhost: "v.1", Exchange: "amq.topic", Write: `^{vhost}\.{username}\.`, Read: ".*"})
	must(t, err)
	conn, err := amqp091.Dial("amqp://a.b:pw@" + ts.addr + "/v.1")
	must(t, err)
	defer conn.Close()
	try := func(key string) error { return publishResult(t, conn, "amq.topic", key, amqp091.Publishing{}) }
	must(t, try("v.1.a.b.x"))
	expectCode(t, try("vX1.aXb.x"), 403)
}

// TestTopicPermissionsSurviveRestart checks that topic permissions are
// kept in meta.db and enforced after a restart, and that deleting the user
// removes them for good.
func TestTopicPermissionsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, withDataDir(dir))
	ts.addUser(t, "app", "pw")
	ts.grant(t, "app", "/", Permission{".*", ".*", ".*"})
	tp := TopicPermission{User: "app", Vhost: "/", Exchange: "amq.topic", Write: "^w", Read: "^r"}
	_, err := ts.SetTopicPermission(tp)
	must(t, err)
	must(t, ts.Close())

	ts2 := startServer(t, withDataDir(dir))
	if got := ts2.TopicPermissions(); len(got) != 1 || got[0] != tp {
		t.Fatalf("topic permissions after restart: %+v", got)
	}
	c, err := amqp091.Dial("amqp://app:pw@" + ts2.addr + "/")
	must(t, err)
	defer c.Close()
	mustDeclare(t, channelOf(t, c), "app.q", nil)
	expectRefusal(t, publishResult(t, c, "amq.topic", "other", amqp091.Publishing{}), 403, refusedTopic("other"))
	c.Close()
	must(t, ts2.DeleteUser("app"))
	ts2.addUser(t, "app", "pw")
	must(t, ts2.Close())
	ts3 := startServer(t, withDataDir(dir))
	if got := ts3.TopicPermissions(); len(got) != 0 {
		t.Fatalf("topic permissions of a deleted user came back: %+v", got)
	}
}

// TestServerNamedQueueNeedsConfigure checks that queue.declare with an
// empty name checks configure permission on the generated name, with
// RabbitMQ's text.
func TestServerNamedQueueNeedsConfigure(t *testing.T) {
	_, dial := permsUser(t, Permission{Configure: `^app\.`, Write: ".*", Read: ".*"})
	c := dial(nil)
	_, err := channelOf(t, c).QueueDeclare("", false, true, true, false, nil)
	expectCode(t, err, 403)
	want := regexp.MustCompile(`^ACCESS_REFUSED - access to queue 'amq\.gen-[A-Za-z0-9_-]{22}' in vhost '/' refused for user 'app'$`)
	if e := err.(*amqp091.Error); !want.MatchString(e.Reason) {
		t.Fatalf("reason %q", e.Reason)
	}
	// RabbitMQ refuses a server-named stream before checking permissions.
	_, err = channelOf(t, c).QueueDeclare("", true, false, false, false, amqp091.Table{"x-queue-type": "stream"})
	expectRefusal(t, err, 406, "PRECONDITION_FAILED - Cannot declare a server-named queue for type rabbit_stream_queue")
	q, err := channelOf(t, c).QueueDeclare("app.named", false, true, true, false, nil)
	must(t, err)
	if q.Name != "app.named" {
		t.Fatalf("declared %q", q.Name)
	}
}

// TestUserIDProperty checks RabbitMQ's user-id validation: the property
// must name the publishing user unless the user is tagged impersonator.
func TestUserIDProperty(t *testing.T) {
	ts, dial := permsUser(t, Permission{".*", ".*", ".*"})
	c := dial(nil)
	mustDeclare(t, channelOf(t, c), "app.q", nil)
	must(t, publishResult(t, c, "", "app.q", amqp091.Publishing{UserId: "app"}))
	forged := amqp091.Publishing{UserId: "guest"}
	const want = "PRECONDITION_FAILED - user_id property set to 'guest' but authenticated user was 'app'"
	expectRefusal(t, publishResult(t, c, "", "app.q", forged), 406, want)
	// With other properties that make the broker decode them, and in a transaction.
	expectRefusal(t, publishResult(t, c, "", "app.q", amqp091.Publishing{UserId: "guest", Expiration: "x", Headers: amqp091.Table{"h": "v"}}), 406, want)
	tx := channelOf(t, c)
	txClosed := tx.NotifyClose(make(chan *amqp091.Error, 1))
	must(t, tx.Tx())
	must(t, tx.Publish("", "app.q", false, false, forged))
	if tx.TxCommit() == nil {
		t.Fatal("commit of a forged user-id succeeded")
	}
	expectRefusal(t, waitClose(t, txClosed), 406, want)
	// RabbitMQ's order: a missing exchange is reported first.
	expectCode(t, publishResult(t, c, "app.nox", "k", forged), 404)
	// The impersonator tag applies from the next publish on.
	ts.addUser(t, "app", "pw", "impersonator")
	must(t, publishResult(t, c, "", "app.q", forged))
	got, ok, err := channelOf(t, c).Get("app.q", true)
	must(t, err)
	if !ok || got.UserId != "app" {
		t.Fatalf("first message %+v %v", got, ok)
	}
}

// TestDeleteUserClosesConnections checks that deleting a user closes its
// connections with RabbitMQ's 320, while a password change leaves them
// open and a permission change applies to the next operation on an open
// channel (Warren checks every operation; RabbitMQ 3.10 lets a channel
// reuse a cached success until it goes idle).
func TestDeleteUserClosesConnections(t *testing.T) {
	ts, dial := permsUser(t, Permission{".*", ".*", ".*"})
	c := dial(nil)
	closed := c.NotifyClose(make(chan *amqp091.Error, 1))
	ch := channelOf(t, c)
	mustDeclare(t, ch, "app.q", nil)

	pw := "new"
	if _, err := ts.PutUser(UserSpec{Name: "app", Password: &pw}); err != nil {
		t.Fatal(err)
	}
	mustDeclare(t, ch, "app.q", nil) // still open after the password change

	ts.grant(t, "app", "/", Permission{Configure: "^zzz", Write: ".*", Read: ".*"})
	_, err := ch.QueueDeclare("app.q", false, false, false, false, nil)
	expectRefusal(t, err, 403, "ACCESS_REFUSED - access to queue 'app.q' in vhost '/' refused for user 'app'")

	other := ts.dial(t) // guest's connection is not affected
	otherClosed := other.NotifyClose(make(chan *amqp091.Error, 1))
	must(t, ts.DeleteUser("app"))
	e := waitClose(t, closed)
	if e.Code != 320 || e.Reason != "CONNECTION_FORCED - user 'app' is deleted" {
		t.Fatalf("close after delete: %v", e)
	}
	_, err = channelOf(t, other).QueueDeclare("", false, true, true, false, nil)
	must(t, err)
	select {
	case e := <-otherClosed:
		t.Fatalf("guest's connection closed: %v", e)
	default:
	}
}

// TestUserDeletedDuringOpenIsClosed deletes the user between connection.open's
// vhost check and the connection becoming running, the moment a deletion's
// sweep of running connections cannot see: the connection must still close.
func TestUserDeletedDuringOpenIsClosed(t *testing.T) {
	ts, _ := permsUser(t, Permission{".*", ".*", ".*"})
	testHookVhostOpened = func(c *conn) {
		if c.user.name == "app" {
			must(t, ts.DeleteUser("app"))
		}
	}
	t.Cleanup(func() { testHookVhostOpened = nil })
	rc := dialRaw(t, ts.addr)
	rc.openAs("app", "pw", 0)
	if cl := rc.expectConnectionClose(320); cl.ReplyText != "CONNECTION_FORCED - user 'app' is deleted" {
		t.Fatalf("close text %q", cl.ReplyText)
	}
}
