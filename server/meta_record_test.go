package server

import (
	"net/url"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

func TestInvalidUTF8NamesSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, withDataDir(dir))
	const name = "names\xff\xfe"
	ts.addVhost(t, name)
	ts.addUser(t, name, "pw")
	ts.grant(t, name, name, Permission{".*", ".*", ".*"})
	conn, err := amqp091.DialConfig("amqp://"+url.PathEscape(name)+":pw@"+ts.addr+"/", amqp091.Config{Vhost: name})
	must(t, err)
	ch, err := conn.Channel()
	must(t, err)
	must(t, ch.ExchangeDeclare(name, "fanout", true, false, false, false, nil))
	_, err = ch.QueueDeclare(name, true, false, false, false, nil)
	must(t, err)
	must(t, ch.QueueBind(name, "", name, false, nil))
	conn.Close()
	must(t, ts.Close())

	ts2 := startServer(t, withDataDir(dir))
	vh := ts2.Vhost(name)
	if vh == nil || vh.exchange(name) == nil || vh.queue(name) == nil || len(vh.queue(name).bindings) != 1 {
		t.Fatalf("vhost, exchange, queue or binding named %q lost in a restart", name)
	}
	if ts2.users.permission(name, name) == nil {
		t.Fatalf("user %q or its permission lost in a restart", name)
	}
}
