// Command recordclient holds AMQP connections, channels and consumers open on
// a broker while record.sh captures RabbitMQ's management API responses, so
// the recorded connection, channel and consumer objects are real ones. It runs
// until it receives SIGTERM or SIGINT.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

func main() {
	url := flag.String("url", "amqp://guest:guest@127.0.0.1:5672/", "broker URL")
	ready := flag.String("ready", "", "file created once everything is open")
	flag.Parse()
	cfg := amqp091.Config{Properties: amqp091.Table{"connection_name": "record-client"}, Heartbeat: 30 * time.Second}
	conn, err := amqp091.DialConfig(*url, cfg)
	if err != nil {
		log.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		log.Fatalf("channel: %v", err)
	}
	if err := ch.Qos(10, 0, false); err != nil {
		log.Fatalf("qos: %v", err)
	}
	// q1 is declared by record.sh; consume with manual acks and leave some unacked.
	msgs, err := ch.Consume("q1", "record-consumer", false, false, false, false, amqp091.Table{"x-priority": int32(3)})
	if err != nil {
		log.Fatalf("consume: %v", err)
	}
	pub, err := conn.Channel()
	if err != nil {
		log.Fatalf("channel: %v", err)
	}
	if err := pub.Confirm(false); err != nil {
		log.Fatalf("confirm: %v", err)
	}
	confirms := pub.NotifyPublish(make(chan amqp091.Confirmation, 100))
	ctx := context.Background()
	for i := 0; i < 20; i++ {
		err := pub.PublishWithContext(ctx, "ex1", "q1.key", false, false, amqp091.Publishing{
			ContentType: "text/plain", DeliveryMode: 2, Body: []byte(fmt.Sprintf("message %d", i)),
		})
		if err != nil {
			log.Fatalf("publish: %v", err)
		}
		<-confirms
	}
	// Ack half of what arrives; the rest stays unacknowledged.
	go func() {
		n := 0
		for d := range msgs {
			if n%2 == 0 {
				_ = d.Ack(false)
			}
			n++
		}
	}()
	// A second, auto-ack consumer on q2.
	if _, err := ch.Consume("q2", "", true, false, false, false, nil); err != nil {
		log.Fatalf("consume q2: %v", err)
	}
	if *ready != "" {
		if err := os.WriteFile(*ready, []byte("ok\n"), 0o644); err != nil {
			log.Fatalf("ready file: %v", err)
		}
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-sigs:
			return
		case <-tick.C:
			// Keep rates non-zero while recording.
			_ = pub.PublishWithContext(ctx, "ex1", "q1.key", false, false, amqp091.Publishing{Body: []byte("tick")})
		}
	}
}
