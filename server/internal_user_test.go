package server

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// The internal user logs in over loopback with the credential only the
// process knows and may use every vhost; it cannot be created, listed or
// logged in to with another password.
func TestInternalUser(t *testing.T) {
	ts := startServer(t)
	ts.addVhost(t, "iu-later")
	user, password := ts.InternalCredential()
	for _, vhost := range []string{"/", "iu-later"} {
		c, err := amqp091.DialConfig("amqp://"+ts.addr+"/", amqp091.Config{Vhost: vhost,
			SASL: []amqp091.Authentication{&amqp091.PlainAuth{Username: user, Password: password}}})
		if err != nil {
			t.Fatalf("internal login to %q: %v", vhost, err)
		}
		ch, err := c.Channel()
		must(t, err)
		if _, err := ch.QueueDeclare("iu-q", false, true, false, false, nil); err != nil {
			t.Errorf("declare in %q as the internal user: %v", vhost, err)
		}
		c.Close()
	}
	if _, err := amqp091.Dial(fmt.Sprintf("amqp://%s:wrong@%s/", user, ts.addr)); err == nil ||
		!strings.Contains(err.Error(), "403") {
		t.Errorf("internal user with a wrong password: %v", err)
	}
	pw := "x"
	if _, err := ts.PutUser(UserSpec{Name: InternalUser, Password: &pw}); !errors.Is(err, ErrInvalid) {
		t.Errorf("creating the internal user: %v, want ErrInvalid", err)
	}
	for _, u := range ts.Users() {
		if u.Name == InternalUser {
			t.Errorf("the internal user is listed")
		}
	}
}
