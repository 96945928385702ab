package jetstream

import (
	"fmt"

	"github.com/stratamesh/strata/replicator"
	"github.com/stratamesh/strata/replicator/wire"
	"github.com/stratamesh/strata/tenancy/quota"
)

// replStorageRefused answers a replicated batch with Failed, storing
// none of it, when the topic's tenant may not store its bytes in this
// region now (ARCHITECTURE §5: storage counts in every region; Quotas'
// storage check). The sender keeps the messages: a Failed answer frees
// the batch's share of its send window, rewinds to the batch's first
// sequence and backs off (replicator.Sender.Answer), so replication
// resumes by itself, nothing lost, once the quota allows. Gap records
// store nothing and pass. It reports whether b was answered.
func (t *topic) replStorageRefused(m message, b *replicator.Batch) bool {
	q := t.s.cfg.Quotas
	if q == nil || b.Gap || len(b.Msgs) == 0 {
		return false
	}
	n := 0
	for i := range b.Msgs {
		n += b.Msgs[i].Bytes()
	}
	err := q.Check(t.name.Tenant, quota.Storage, float64(n))
	if err == nil {
		return false
	}
	t.s.cfg.Logger.Debug("replicated batch refused: storage quota", "topic", t.name.String(), "origin", b.Stream.Region, "err", err)
	t.s.respond(m.reply, wire.EncodeAnswer(wire.Answer{
		Answer: replicator.Answer{Batch: b.ID, Kind: replicator.Failed},
		Error:  fmt.Sprintf("topic %s in region %s: %v", t.name, t.s.cfg.Region, err),
	}))
	return true
}
