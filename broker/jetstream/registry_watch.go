package jetstream

import (
	"context"
	"encoding/json"
	"time"

	"github.com/stratamesh/strata/broker/mledger"
	"github.com/stratamesh/strata/internal/meta"
)

const topicsPrefix = "topics/"

// loadRegistry fills the registry from the topic metadata in etcd and
// returns the revision to watch from.
func (s *Service) loadRegistry(ctx context.Context) (int64, error) {
	kvs, rev, err := s.cfg.Store.ListWithRev(ctx, topicsPrefix)
	if err != nil {
		return 0, err
	}
	for _, kv := range kvs {
		s.applyTopicKV(kv, false)
	}
	return rev, nil
}

// applyTopicKV puts one topic's metadata into the registry; campaign says
// whether to campaign for a topic new to the registry.
func (s *Service) applyTopicKV(kv meta.KV, campaign bool) {
	name, ok := mledger.ParseTopicKey(kv.Key)
	if !ok {
		return
	}
	var tm mledger.TopicMeta
	if err := json.Unmarshal(kv.Value, &tm); err != nil {
		s.cfg.Logger.Warn("ignoring unreadable topic metadata", "key", kv.Key, "err", err)
		return
	}
	if s.reg.put(decodeStream(name, tm)) && campaign {
		s.topicAdded(name)
	}
}

// watchRegistry follows topic creations, changes and deletions.
func (s *Service) watchRegistry(rev int64) {
	for s.ctx.Err() == nil {
		for ev := range s.cfg.Store.Watch(s.ctx, topicsPrefix, rev) {
			switch ev.Type {
			case meta.EventPut:
				s.applyTopicKV(ev.KV, true)
			case meta.EventDelete:
				if name, ok := mledger.ParseTopicKey(ev.KV.Key); ok {
					s.reg.remove(name)
					s.topicRemoved(name)
				}
			default:
				goto relist
			}
			rev = ev.Revision + 1
		}
	relist:
		if s.ctx.Err() != nil {
			return
		}
		r, err := s.loadRegistry(s.ctx)
		if err != nil {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		for _, n := range s.reg.all() {
			s.topicAdded(n)
		}
		rev = r + 1
	}
}
