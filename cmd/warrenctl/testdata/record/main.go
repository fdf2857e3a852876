// Command record captures RabbitMQ management API responses that warrenctl's
// unit tests replay (testdata/rabbitmq/*.json). It needs a local RabbitMQ
// with rabbitmq_management (guest:guest on 127.0.0.1:15672, AMQP on 5672):
//
//	go run ./cmd/warrenctl/testdata/record
//
// It changes the broker as little as it can: one AMQP connection with an
// exclusive queue (gone when it disconnects), one queue with x-expires and one
// policy matching no name, both deleted at the end. The rest is read-only.
//
// health-alarms-failed.json is not recorded (raising an alarm would block
// every publisher on the broker): it is written by hand in the shape of
// rabbit_mgmt_wm_health_check_alarms's 503 reply.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

const api = "http://127.0.0.1:15672/api"

var out = filepath.Join("cmd", "warrenctl", "testdata", "rabbitmq")

// call sends one request and returns the status and body.
func call(method, path, user, body string) (int, []byte) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, api+path, rd)
	if err != nil {
		log.Fatal(err)
	}
	req.SetBasicAuth(user, "guest")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		log.Fatal(err)
	}
	return resp.StatusCode, b
}

// record saves a response as name.json, re-indented for review, and its
// status in status.tsv.
func record(status io.Writer, name, method, path, body string) []byte {
	return recordAs(status, name, method, path, "guest", body)
}

func recordAs(status io.Writer, name, method, path, user, body string) []byte {
	code, b := call(method, path, user, body)
	fmt.Fprintf(status, "%s\t%s\t%s\t%d\n", name, method, path, code)
	if len(b) > 0 {
		var buf bytes.Buffer
		if err := json.Indent(&buf, b, "", "  "); err != nil {
			log.Fatalf("%s: not JSON: %v\n%s", name, err, b)
		}
		buf.WriteByte('\n')
		if err := os.WriteFile(filepath.Join(out, name+".json"), buf.Bytes(), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	return b
}

func main() {
	conn, err := amqp091.DialConfig("amqp://guest:guest@127.0.0.1:5672/", amqp091.Config{
		Properties: amqp091.Table{"connection_name": "warrenctl-recorder"},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		log.Fatal(err)
	}
	if err := ch.Qos(10, 0, false); err != nil {
		log.Fatal(err)
	}
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := ch.Consume(q.Name, "warrenctl-recorder-consumer", false, false, false, false, nil); err != nil {
		log.Fatal(err)
	}

	// Statistics reach the API every few seconds.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, b := call("GET", "/channels", "guest", "")
		if bytes.Contains(b, []byte("warrenctl-recorder")) || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}

	status, err := os.Create(filepath.Join(out, "status.tsv"))
	if err != nil {
		log.Fatal(err)
	}
	defer status.Close()
	for _, p := range []string{"overview", "queues", "exchanges", "bindings", "connections", "channels",
		"consumers", "users", "vhosts", "permissions", "nodes"} {
		record(status, p, "GET", "/"+p, "")
	}
	record(status, "definitions", "GET", "/definitions", "")
	record(status, "definitions-vhost", "GET", "/definitions/%2F", "")
	record(status, "health-alarms", "GET", "/health/checks/alarms", "")
	record(status, "health-virtual-hosts", "GET", "/health/checks/virtual-hosts", "")
	record(status, "queue-missing", "GET", "/queues/%2F/warrenctl-no-such-queue", "")
	recordAs(status, "login-failed", "GET", "/overview", "no-such-user", "")
	record(status, "queue-put-badjson", "PUT", "/queues/%2F/warrenctl-recorder-bad", "{")

	// A queue that expires by itself, should this program die half-way.
	name := "warrenctl-recorder-get"
	record(status, "queue-put", "PUT", "/queues/%2F/"+name, `{"durable":false,"arguments":{"x-expires":60000}}`)
	record(status, "queue", "GET", "/queues/%2F/"+name, "")
	record(status, "exchange-publish", "POST", "/exchanges/%2F/amq.default/publish",
		`{"properties":{"content_type":"text/plain","headers":{"k":"v"}},"routing_key":"`+name+`","payload":"hello","payload_encoding":"string"}`)
	record(status, "exchange-publish-unrouted", "POST", "/exchanges/%2F/amq.default/publish",
		`{"properties":{},"routing_key":"warrenctl-nowhere","payload":"x","payload_encoding":"string"}`)
	record(status, "queue-get", "POST", "/queues/%2F/"+name+"/get",
		`{"count":5,"ackmode":"ack_requeue_false","encoding":"auto","truncate":50000}`)
	record(status, "queue-delete", "DELETE", "/queues/%2F/"+name, "")

	// A policy matching nothing, listed and removed again.
	record(status, "policy-put", "PUT", "/policies/%2F/warrenctl-recorder",
		`{"pattern":"^warrenctl-recorder-matches-nothing$","definition":{"max-length":1},"priority":7,"apply-to":"queues"}`)
	record(status, "policies", "GET", "/policies", "")
	record(status, "policy-delete", "DELETE", "/policies/%2F/warrenctl-recorder", "")
	log.Printf("recorded into %s", out)
}
