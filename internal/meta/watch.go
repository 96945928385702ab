package meta

import (
	"context"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// EventType says what happened to a key.
type EventType int

const (
	// EventPut: the key was created or updated; Event.KV holds it.
	EventPut EventType = iota + 1
	// EventDelete: the key was deleted (or its lease ended); Event.KV
	// holds only Key and ModRevision (the deletion's revision).
	EventDelete
	// EventCompacted: the watch could not continue because etcd compacted
	// the revisions it needed (Event.Revision is the compaction revision).
	// It is the last event: the channel closes right after. Re-read with
	// ListWithRev and watch again from the returned revision + 1.
	EventCompacted
)

func (t EventType) String() string {
	switch t {
	case EventPut:
		return "put"
	case EventDelete:
		return "delete"
	case EventCompacted:
		return "compacted"
	default:
		return "unknown"
	}
}

// Event is one change under a watched prefix.
type Event struct {
	Type     EventType
	KV       KV
	Revision int64 // revision of the change (several events can share one: a Txn)
}

// Watch delivers, in revision order and without gaps or repeats, every
// change to keys under prefix (relative; "" watches the whole Store).
//
// fromRev 0 means from now: Watch first reads the current revision, so any
// write that completes after Watch returns is delivered. fromRev > 0
// replays history from that revision (inclusive).
//
// The channel is closed when ctx ends or the Store closes, right after an
// EventCompacted, or at once if the watch cannot start (ctx already done,
// Store closed).
//
// Slow readers: the channel holds Config.WatchBuffer events. When it is
// full the Store cancels the etcd watch instead of letting the etcd client
// buffer without bound, waits for the reader, and resumes the watch from
// the next undelivered revision. Nothing is lost unless the reader falls so
// far behind that etcd compacts that revision (then EventCompacted). A slow
// reader never blocks etcd or other watchers; it only delays itself.
//
// Connection trouble and loss of the etcd leader are retried with backoff,
// resuming from the next undelivered revision.
func (s *Store) Watch(ctx context.Context, prefix string, fromRev int64) <-chan Event {
	out := make(chan Event, s.cfg.WatchBuffer)
	if ctx.Err() != nil || s.isClosed() {
		close(out)
		return out
	}
	if fromRev <= 0 {
		// Any key read gives the current revision in its header.
		resp, err := s.client.Get(ctx, s.root, clientv3.WithCountOnly())
		if err != nil {
			s.log.Warn("watch: cannot read the current revision", "prefix", prefix, "err", err)
			close(out)
			return out
		}
		fromRev = resp.Header.Revision + 1
	}
	if !s.goStart() {
		close(out)
		return out
	}
	w := &watcher{s: s, prefix: prefix, next: fromRev, out: out}
	wctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.ctx, cancel)
	go func() {
		defer s.wg.Done()
		defer close(out)
		defer stop()
		defer cancel()
		w.run(wctx)
	}()
	return out
}

type watcher struct {
	s      *Store
	prefix string
	next   int64 // first revision not yet delivered
	out    chan Event
}

// watchOutcome says why one etcd watch ended.
type watchOutcome int

const (
	watchDone     watchOutcome = iota // ctx ended or EventCompacted sent
	watchOverflow                     // reader slow: resume now from next
	watchBroken                       // etcd ended the watch: retry after backoff
)

func (w *watcher) run(ctx context.Context) {
	const minBackoff, maxBackoff = 50 * time.Millisecond, 2 * time.Second
	backoff := minBackoff
	for ctx.Err() == nil {
		switch w.once(ctx) {
		case watchDone:
			return
		case watchOverflow:
			backoff = minBackoff
		case watchBroken:
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
			backoff = min(2*backoff, maxBackoff)
		}
	}
}

// once runs one etcd watch from w.next until it ends.
func (w *watcher) once(ctx context.Context) watchOutcome {
	ectx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := w.s.client.Watch(ectx, w.s.abs(w.prefix), clientv3.WithPrefix(), clientv3.WithRev(w.next))
	for resp := range wch {
		if resp.CompactRevision != 0 {
			select {
			case w.out <- Event{Type: EventCompacted, Revision: resp.CompactRevision}:
			case <-ctx.Done():
			}
			return watchDone
		}
		if err := resp.Err(); err != nil {
			if ctx.Err() == nil {
				w.s.log.Debug("watch interrupted; resuming", "prefix", w.prefix, "next", w.next, "err", err)
			}
			return watchBroken
		}
		overflow := false
		for _, ev := range resp.Events {
			e := w.event(ev)
			if e.Revision < w.next {
				continue // already delivered before a resume
			}
			if !overflow {
				select {
				case w.out <- e:
					continue
				default:
				}
				// The reader is behind. Stop the etcd watch so the client
				// does not queue for us, and finish this response (etcd
				// never splits one revision across responses), so that
				// resuming from the revision after it is exact.
				overflow = true
				cancel()
				w.s.log.Debug("watch reader behind; pausing the etcd watch", "prefix", w.prefix, "revision", e.Revision)
			}
			select {
			case w.out <- e:
			case <-ctx.Done():
				return watchDone
			}
		}
		if n := len(resp.Events); n > 0 {
			w.next = max(w.next, resp.Events[n-1].Kv.ModRevision+1)
		}
		if overflow {
			return watchOverflow
		}
	}
	if ctx.Err() != nil {
		return watchDone
	}
	return watchBroken
}

func (w *watcher) event(ev *clientv3.Event) Event {
	e := Event{Type: EventPut, KV: w.s.kv(ev.Kv), Revision: ev.Kv.ModRevision}
	if ev.Type == mvccpb.DELETE {
		e.Type = EventDelete
		e.KV.Value = nil
	}
	return e
}
