package mledger

import (
	"context"
	"time"

	"github.com/stratamesh/strata/broker/natsproto"
)

// hdrMsgID is the header carrying a message's dedup id.
const hdrMsgID = "Nats-Msg-Id"

// loop is the ML's driver goroutine: rollovers, retention, forgetting
// trimmed subjects, ledger deletion, lazy metadata writes and the
// requests of Close, Purge, SetLimits and DeleteTopic all run here, one
// at a time, so that metadata writes never race each other. When the ML
// stops it releases everything, closes Done and calls OnLost.
func (m *ML) loop() {
	defer close(m.loopDone)
	tick := time.NewTicker(m.cfg.MaintenanceInterval)
	defer tick.Stop()
	for {
		select {
		case <-m.ctx.Done():
			m.shutdown()
			return
		case r := <-m.reqCh:
			r.reply <- r.fn()
		case <-m.kickCh:
			m.maintain()
		case <-tick.C:
			m.maintain()
			m.persist()
		}
	}
}

// shutdown releases the stopped ML: writers stopped without closing
// their ledgers (the next owner recovers them), every publish answered.
func (m *ML) shutdown() {
	m.mu.Lock()
	var ws []*openLedger
	for _, l := range []*openLedger{m.prev, m.cur, m.spare} {
		if l != nil {
			ws = append(ws, l)
		}
	}
	lost := m.lostErr
	m.mu.Unlock()
	for _, l := range ws {
		abort(l) // the ledger stays OPEN unless closed before
	}
	m.wakeCompleter()
	<-m.complDone
	m.offWG.Wait() // its ctx (m.ctx) is cancelled
	m.closeTierReaders()
	close(m.done)
	if lost != nil {
		m.cfg.OnLost(lost)
	}
}

// maintain runs what appends and time make due: a rollover, retention,
// forgetting trimmed messages' subjects, removing done ledgers, and
// learning FirstTime.
func (m *ML) maintain() {
	now := m.cfg.Now()
	m.mu.Lock()
	if m.stopErr != nil || m.closing {
		m.mu.Unlock()
		return
	}
	switched := m.prev != nil
	roll := m.rolloverDue(now) && !now.Before(m.rollErr)
	spare := m.spare == nil && !now.Before(m.rollErr)
	m.mu.Unlock()
	var err error
	switch {
	case switched:
		err = m.finishRollover(false)
	case roll:
		_, err = m.rollover(false)
	case spare:
		err = m.ensureSpare()
		m.mu.Lock()
		m.dirty = m.dirty || m.spare != nil // record it
		m.mu.Unlock()
	}
	if err != nil && m.ctx.Err() == nil {
		m.log.Warn("rollover failed", "err", err)
	}
	m.mu.Lock()
	if f := m.core.retainFrom(now, &m.cache); f > m.core.first {
		m.trimLocked(f)
	}
	m.mu.Unlock()
	m.forget()
	m.resolveFirstTime(m.ctx)
	m.maintainOffload(now)
}

// trimLocked raises FirstSeq to f (mu held). Trimmed messages stay
// cached until forget has subtracted them from the subject index.
func (m *ML) trimLocked(f uint64) {
	if m.core.trim(f, &m.cache) {
		m.dirty = true
	}
}

// forget advances the subject counts over trimmed messages (reading back
// those not cached, nor in a ledger with a known breakdown), then takes
// done ledgers out of the list into the trash (deleted after the next
// metadata write).
func (m *ML) forget() {
	for m.ctx.Err() == nil {
		m.mu.Lock()
		kind, seq, l := m.core.nextForget()
		switch kind {
		case forgetNone:
			m.cache.dropBelow(m.core.counted) // kept until forgotten
			if gone := m.core.removeDone(); len(gone) > 0 {
				m.trash = append(m.trash, gone...)
				m.dirty = true
			}
			m.mu.Unlock()
			return
		case forgetAll:
			m.core.forgetAllConfirmed()
			m.dirty = true
			m.mu.Unlock()
			continue
		case forgetLedger:
			m.core.forgetWholeLedger(l)
			m.dirty = true
			m.mu.Unlock()
			continue
		}
		if cm, ok := m.cache.get(seq); ok {
			_ = m.core.forgetMsg(seq, cm.m.Subject)
			m.mu.Unlock()
			continue
		}
		ref := refOf(l)
		m.mu.Unlock()
		if time.Now().Before(m.readRetry) {
			return
		}
		msgs, err := m.readLedger(m.ctx, ref, seq)
		if err != nil {
			if m.ctx.Err() == nil {
				m.readRetry = time.Now().Add(time.Second)
				m.log.Warn("reading trimmed messages for the subject index failed; will retry", "ledger", ref.id, "err", err)
			}
			return
		}
		m.mu.Lock()
		for _, msg := range msgs {
			if m.core.forgetMsg(msg.Seq, msg.Subject) != nil {
				break
			}
		}
		m.dirty = true
		m.mu.Unlock()
	}
}

// resolveFirstTime reads FirstSeq's message back when its time is not
// known (after a trim into messages that are not cached).
func (m *ML) resolveFirstTime(ctx context.Context) {
	m.mu.Lock()
	c := m.core
	if !c.firstTime.IsZero() || c.first > c.conf.seq {
		m.mu.Unlock()
		return
	}
	seq := c.first
	m.mu.Unlock()
	if time.Now().Before(m.readRetry) {
		return
	}
	msg, err := m.Read(ctx, seq)
	if err != nil {
		m.readRetry = time.Now().Add(time.Second)
		return
	}
	m.mu.Lock()
	if m.core.first == seq {
		m.core.firstTime = msg.Time
	}
	m.mu.Unlock()
}

// msgIDOf is the Nats-Msg-Id in a stored header block ("" if none).
func msgIDOf(hdr []byte) string {
	if len(hdr) == 0 {
		return ""
	}
	v, ok := natsproto.HeaderGet(hdr, hdrMsgID)
	if !ok {
		return ""
	}
	return string(v)
}
