package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"strconv"

	"github.com/spf13/viper"

	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/shovel"
)

// shovelComponent is the runtime parameter component of dynamic shovels.
const shovelComponent = "shovel"

// startShovels runs a shovel for each stored shovel parameter and follows
// their changes; the returned Manager is also the management API's view of
// them. Close it before the server.
func startShovels(srv *server.Server, static []shovel.Param, logger *slog.Logger) *shovel.Manager {
	m := shovel.New(shovel.Config{
		Params: func() []shovel.Param { return shovelParams(srv) },
		Static: static,
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

// staticShovels reads the configuration file's shovels key, Warren's
// counterpart of RabbitMQ's static shovels (the rabbitmq_shovel
// application's shovels setting): a list of shovels, each a name, an
// optional vhost (default "/") and the dynamic shovel's keys, checked as a
// shovel parameter is. They run from the file alone: not stored, not
// deletable through the API, shown with type static.
func staticShovels(v *viper.Viper, srv *server.Server) ([]shovel.Param, error) {
	raw := v.Get("shovels")
	if raw == nil {
		return nil, nil
	}
	// Through JSON, so numbers are json.Number as in stored parameters
	// and the YAML decoder's types do not matter.
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, fmt.Errorf("shovels: %w", err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var list []map[string]any
	if err := d.Decode(&list); err != nil {
		return nil, fmt.Errorf("shovels: a list of shovels, each with name and the shovel keys: %w", err)
	}
	var out []shovel.Param
	seen := make(map[string]bool)
	for i, def := range list {
		name, _ := def["name"].(string)
		if name == "" {
			return nil, fmt.Errorf("shovels[%d]: no name", i)
		}
		vhost := "/"
		if vh, ok := def["vhost"]; ok {
			if vhost, _ = vh.(string); vhost == "" {
				return nil, fmt.Errorf("shovels: %s: vhost must be a vhost's name", name)
			}
		}
		if seen[vhost+"\x00"+name] {
			return nil, fmt.Errorf("shovels: %s: two shovels of that name in vhost %s", name, vhost)
		}
		seen[vhost+"\x00"+name] = true
		value := make(map[string]any, len(def))
		for k, x := range def {
			if k != "name" && k != "vhost" {
				value[k] = x
			}
		}
		if err := srv.ValidateParameter(server.Parameter{Component: shovelComponent, Vhost: vhost, Name: name, Value: value}); err != nil {
			return nil, fmt.Errorf("shovels: %s: %w", name, err)
		}
		out = append(out, shovel.Param{Vhost: vhost, Name: name, Value: value})
	}
	return out, nil
}
