package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// The binary runs a shovel put through the management API, its direct URIs
// reaching this node's own listener, and lists it in /api/shovels.
func TestRunShovels(t *testing.T) {
	addr, mgmtAddr := freePort(t), freePort(t)
	old := logOutput
	logOutput = &bytes.Buffer{}
	t.Cleanup(func() { logOutput = old })
	sigs := make(chan os.Signal, 1)
	exit := make(chan int, 1)
	errOut := &bytes.Buffer{}
	go func() {
		exit <- run([]string{"--amqp-listen", addr, "--mgmt-listen", mgmtAddr, "--metrics-listen", "", "--data-dir", t.TempDir()},
			&bytes.Buffer{}, errOut, sigs)
	}()
	t.Cleanup(func() {
		sigs <- syscall.SIGTERM
		if code := <-exit; code != 0 {
			t.Errorf("exit %d", code)
		}
	})
	api := func(method, path, body string) (int, string) {
		rq, err := http.NewRequest(method, "http://"+mgmtAddr+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		rq.SetBasicAuth("guest", "guest")
		rq.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(rq)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	poll := func(what string, cond func() bool) {
		t.Helper()
		// 30 s: under CI's parallel packages a start's meta.db and store
		// fsyncs have been seen to take 10 s on this 2-core machine.
		for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s: %s", what, errOut)
			}
		}
	}
	poll("the management API", func() bool { code, _ := api("GET", "/api/overview", ""); return code == 200 })
	if code, body := api("PUT", "/api/parameters/shovel/%2F/cmd", `{"value":{"src-uri":"amqp://","src-queue":"cmd-src","dest-uri":"amqp://","dest-queue":"cmd-dest"}}`); code != http.StatusCreated {
		t.Fatalf("PUT the shovel: %d %s", code, body)
	}
	var list []map[string]any
	poll("the shovel running", func() bool {
		_, body := api("GET", "/api/shovels", "")
		return json.Unmarshal([]byte(body), &list) == nil && len(list) == 1 && list[0]["state"] == "running"
	})
	conn, err := amqp091.Dial("amqp://guest:guest@" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Publish("", "cmd-src", false, false, amqp091.Publishing{Body: []byte("moved")}); err != nil {
		t.Fatal(err)
	}
	poll("the message moved", func() bool {
		m, ok, err := ch.Get("cmd-dest", true)
		return err == nil && ok && string(m.Body) == "moved"
	})
}
