package main

import (
	"errors"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"
)

// setupTopology declares (or with --predeclared, checks) the exchange, the
// queues and their bindings on a connection of its own, and purges the
// queues if asked.
func setupTopology(cfg *Config, queues []string) error {
	conn, ch, err := openChannel(cfg.setupURL(), "setup")
	if err != nil {
		return err
	}
	err = declareTopology(ch, cfg, queues)
	return errors.Join(err, conn.close())
}

// declareTopology does the work of setupTopology on ch. It stops at the
// first refusal: the broker closes the channel after one.
func declareTopology(ch *amqp.Channel, cfg *Config, queues []string) error {
	if cfg.Exchange != "" {
		var err error
		if cfg.Predeclared {
			err = ch.ExchangeDeclarePassive(cfg.Exchange, cfg.ExchangeType, cfg.Durable, false, false, false, nil)
		} else {
			err = ch.ExchangeDeclare(cfg.Exchange, cfg.ExchangeType, cfg.Durable, false, false, false, nil)
		}
		if err != nil {
			return fmt.Errorf("%w: exchange %q (%s): %w", ErrDeclare, cfg.Exchange, cfg.ExchangeType, err)
		}
	}
	for _, q := range queues {
		var err error
		if cfg.Predeclared {
			_, err = ch.QueueDeclarePassive(q, cfg.Durable, false, false, false, nil)
		} else {
			_, err = ch.QueueDeclare(q, cfg.Durable, false, false, false, cfg.QueueArgs)
		}
		if err != nil {
			return fmt.Errorf("%w: queue %q (durable=%t): %w", ErrDeclare, q, cfg.Durable, err)
		}
		if cfg.Exchange != "" && !cfg.Predeclared {
			if err := ch.QueueBind(q, q, cfg.Exchange, false, nil); err != nil {
				return fmt.Errorf("%w: bind queue %q to exchange %q: %w", ErrDeclare, q, cfg.Exchange, err)
			}
		}
		if cfg.Purge {
			if _, err := ch.QueuePurge(q, false); err != nil {
				return fmt.Errorf("%w: purge queue %q: %w", ErrDeclare, q, err)
			}
		}
	}
	return nil
}

// deleteTopology deletes queues and then, if not "", exchange, on a
// connection of its own. What is already gone is not an error.
func deleteTopology(rawURL, exchange string, queues []string) error {
	conn, ch, err := openChannel(rawURL, "cleanup")
	if err != nil {
		return err
	}
	var errs []error
	del := func(what string, f func() error) bool {
		err := f()
		if err == nil {
			return true
		}
		var aerr *amqp.Error
		if !errors.As(err, &aerr) || aerr.Code != amqp.NotFound {
			errs = append(errs, fmt.Errorf("delete %s: %w", what, err))
		}
		// The refusal closed the channel; open another for the rest.
		if ch, err = conn.Channel(); err != nil {
			errs = append(errs, fmt.Errorf("delete %s: reopen channel: %w", what, err))
			return false
		}
		return true
	}
	for _, q := range queues {
		if !del(fmt.Sprintf("queue %q", q), func() error {
			_, err := ch.QueueDelete(q, false, false, false)
			return err
		}) {
			break
		}
	}
	if exchange != "" && len(errs) == 0 {
		del(fmt.Sprintf("exchange %q", exchange), func() error { return ch.ExchangeDelete(exchange, false, false) })
	}
	errs = append(errs, conn.close())
	return errors.Join(errs...)
}
