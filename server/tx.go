package server

import "github.com/warrenmq/warren/amqp"

// txState buffers a transactional channel's publishes and settlements until
// tx.commit. Settled deliveries leave the unacked list at once (so tags are
// validated immediately, as RabbitMQ does) and go back on rollback.
type txState struct {
	publishes []txPublish
	settles   []txSettle
}

type txPublish struct {
	ex        *Exchange
	msg       *Message
	mandatory bool
}

type txSettle struct {
	kind settleKind
	ds   []delivery
}

func (ch *channel) txSelect(m *amqp.TxSelect) *amqp.Error {
	if ch.confirm {
		return amqp.NewError(amqp.PreconditionFailed, m.ID(), "cannot switch from confirm to tx mode")
	}
	if ch.tx == nil {
		ch.tx = &txState{}
	}
	ch.stats.txMode.Store(true)
	ch.conn.out.sendMethod(ch.id, &amqp.TxSelectOk{})
	return nil
}

func (ch *channel) txCommit(m *amqp.TxCommit) *amqp.Error {
	if ch.tx == nil {
		return amqp.NewError(amqp.PreconditionFailed, m.ID(), "channel is not transactional")
	}
	tx := ch.tx
	ch.tx = &txState{}
	for _, p := range tx.publishes {
		if err := ch.route(p.ex, p.msg, p.mandatory); err != nil {
			return err
		}
	}
	homes := map[*homeLink]bool{}
	quorums := map[*quorumQueue]bool{}
	for _, s := range tx.settles {
		ch.applySettle(s.ds, s.kind)
		for _, d := range s.ds {
			rq, remote := d.q.(*remoteQueue)
			if qq, ok := d.q.(*quorumQueue); ok {
				// Led elsewhere: its settlements were forwarded to the
				// leader, which answers the mark as a home does.
				if rq, remote = qq.forward(), true; rq == nil {
					quorums[qq], remote = true, false
				}
			}
			if remote {
				if l := rq.r.link(rq.home); l != nil {
					homes[l] = true
				}
			}
		}
	}
	// Acks of quorum queues led here: committed in the queue's log, so a
	// failover cannot bring them back (quorum_tx.go).
	for q := range quorums {
		if err := q.syncSettled(); err != nil {
			ch.conn.vhost.log.Error("tx.commit: the acks of a quorum queue are not committed", "queue", q.q.name, "err", err)
			return amqp.NewError(amqp.PreconditionFailed, m.ID(), "partial tx completion")
		}
	}
	// Acks of deliveries from queues homed on other nodes are stored by
	// their homes: wait for each to confirm it (a home down fails the
	// commit, whose acks then return with the home's redeliveries).
	for l := range homes {
		if err := l.settledDurably(ch.conn.vhost.name); err != nil {
			ch.conn.vhost.log.Error("tx.commit: the acks of remote deliveries are not durable", "home", l.home, "err", err)
			return amqp.NewError(amqp.PreconditionFailed, m.ID(), "partial tx completion")
		}
	}
	// The commit-ok promises the transaction survives a crash, as a confirm
	// does: wait until the commit round has written its acks and stored
	// publishes (RabbitMQ's commit-ok likewise waits for the publishes'
	// confirms). A failed round fails the commit as RabbitMQ fails a
	// transaction with a nacked publish.
	if st := ch.conn.vhost.storage; st != nil && (len(tx.publishes) > 0 || len(tx.settles) > 0) {
		if err := st.waitRound(); err != nil {
			ch.conn.vhost.log.Error("tx.commit: the transaction is not durable", "err", err)
			return amqp.NewError(amqp.PreconditionFailed, m.ID(), "partial tx completion")
		}
	}
	ch.conn.out.sendMethod(ch.id, &amqp.TxCommitOk{})
	return nil
}

func (ch *channel) txRollback(m *amqp.TxRollback) *amqp.Error {
	if ch.tx == nil {
		return amqp.NewError(amqp.PreconditionFailed, m.ID(), "channel is not transactional")
	}
	tx := ch.tx
	ch.tx = &txState{}
	ch.umu.Lock()
	for _, s := range tx.settles {
		for _, d := range s.ds {
			ch.unacked.insert(d)
		}
	}
	ch.umu.Unlock()
	ch.conn.out.sendMethod(ch.id, &amqp.TxRollbackOk{})
	return nil
}
