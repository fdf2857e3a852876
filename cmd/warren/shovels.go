package main

import (
	"fmt"
	"log/slog"
	"net"
	"strconv"

	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/shovel"
)

// shovelComponent is the runtime parameter component of dynamic shovels.
const shovelComponent = "shovel"

// startShovels runs a shovel for each stored shovel parameter and follows
// their changes; the returned Manager is also the management API's view of
// them. Close it before the server.
func startShovels(srv *server.Server, logger *slog.Logger) *shovel.Manager {
	m := shovel.New(shovel.Config{
		Params: func() []shovel.Param { return shovelParams(srv) },
		Local:  func() (shovel.Local, error) { return localBroker(srv) },
		Delete: func(vhost, name string) error { return srv.DeleteParameter(shovelComponent, vhost, name) },
		Here:   func(key, vhost, queue string) bool { return runsHere(srv, key, vhost, queue) },
		Node:   srv.NodeName(), ClusterName: srv.ClusterName,
		Logger: logger,
	})
	srv.OnParameterChange(func(component string) {
		if component == shovelComponent {
			m.Changed()
		}
	})
	// A queue declared or deleted may move a shovel to its home, and a
	// node lost or joined moves those the hash placed.
	srv.OnDefinitionChange(m.Changed)
	srv.OnMembershipChange(m.Changed)
	m.Start()
	return m
}

func shovelParams(srv *server.Server) []shovel.Param {
	var out []shovel.Param
	for _, p := range srv.Parameters() {
		if p.Component == shovelComponent {
			out = append(out, shovel.Param{Vhost: p.Vhost, Name: p.Name, Value: p.Value})
		}
	}
	return out
}

// localBroker is where a shovel's direct URI (amqp:// with no host)
// connects: this node's AMQP listener over loopback, as the internal user
// (server.InternalUser), the counterpart of RabbitMQ's direct connection.
func localBroker(srv *server.Server) (shovel.Local, error) {
	addr := srv.Node().AMQPAddr
	if addr == "" {
		return shovel.Local{}, fmt.Errorf("a direct URI (amqp:// with no host) needs the AMQP listener (amqp-listen)")
	}
	host, port := server.SplitHostPort(addr)
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	} else if !ip.IsLoopback() {
		return shovel.Local{}, fmt.Errorf("a direct URI (amqp:// with no host) needs the AMQP listener on a loopback or unspecified address, not %s", addr)
	}
	user, password := srv.InternalCredential()
	return shovel.Local{Addr: net.JoinHostPort(host, strconv.Itoa(port)), User: user, Password: password}, nil
}
