package jetstream

import (
	"encoding/json"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/stratamesh/strata/broker/jsapi"
	"github.com/stratamesh/strata/broker/mledger"
	"github.com/stratamesh/strata/broker/sublist"
	"github.com/stratamesh/strata/tenancy"
)

// topicSpec is what this package keeps in a topic's opaque spec: the
// stream it is known as and its configuration (JSON).
type topicSpec struct {
	Stream string             `json:"stream"`
	Config jsapi.StreamConfig `json:"config"`
}

// stream is one registry entry: a topic as the JetStream API sees it.
type stream struct {
	name    tenancy.Name
	stream  string // stream name (per tenant)
	config  jsapi.StreamConfig
	created time.Time
}

// registry is every broker's view of the region's topics: stream name →
// topic and subject → capturing stream. It is fed by a watch on the topic
// metadata and by this broker's own creates (so a create is visible here
// before its watch event arrives).
type registry struct {
	mu       sync.RWMutex
	byStream map[string]map[string]*stream // tenant → stream name → entry
	byTopic  map[tenancy.Name]*stream
	capture  *sublist.List[*stream]
}

func newRegistry() *registry {
	return &registry{
		byStream: map[string]map[string]*stream{},
		byTopic:  map[tenancy.Name]*stream{},
		capture:  sublist.New[*stream](),
	}
}

// put adds or replaces the entry of a topic; it reports whether the topic
// is new to the registry.
func (r *registry) put(st *stream) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	// Entries are immutable once published (readers hold them without
	// the lock): a change replaces the entry.
	old := r.byTopic[st.name]
	if old != nil {
		r.removeLocked(old)
	}
	r.byTopic[st.name] = st
	m := r.byStream[st.name.Tenant]
	if m == nil {
		m = map[string]*stream{}
		r.byStream[st.name.Tenant] = m
	}
	m[st.stream] = st
	for _, subj := range st.config.Subjects {
		_ = r.capture.Insert(subj, "", st)
	}
	return old == nil
}

// remove drops a topic's entry, if present.
func (r *registry) remove(name tenancy.Name) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st := r.byTopic[name]; st != nil {
		r.removeLocked(st)
	}
}

func (r *registry) removeLocked(st *stream) {
	delete(r.byTopic, st.name)
	if m := r.byStream[st.name.Tenant]; m != nil && m[st.stream] == st {
		delete(m, st.stream)
	}
	for _, subj := range st.config.Subjects {
		_ = r.capture.Remove(subj, "", st)
	}
}

// lookup returns tenant's stream by name, or nil.
func (r *registry) lookup(tenant, name string) *stream {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.byStream[tenant][name]
}

// topic returns the entry of a topic, or nil.
func (r *registry) topic(name tenancy.Name) *stream {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.byTopic[name]
}

// captures returns the stream capturing a literal subject, or nil: for a
// tenant account, only that tenant's streams capture its publishes; for
// the system account ("", or auth off) any tenant's, and when several
// match (filters of different tenants) the first.
func (r *registry) captures(account string, subject []byte) *stream {
	res := r.capture.MatchBytes(subject)
	if account == "" {
		if len(res.Plain) == 0 {
			return nil
		}
		return res.Plain[0]
	}
	for _, st := range res.Plain {
		if st.name.Tenant == account {
			return st
		}
	}
	return nil
}

// overlapping returns the name of a stream of tenant, other than self,
// one of whose subjects overlaps one of subjects ("" when none): 10065.
func (r *registry) overlapping(tenant, self string, subjects []string) string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for name, st := range r.byStream[tenant] {
		if name == self {
			continue
		}
		for _, a := range st.config.Subjects {
			for _, b := range subjects {
				if subjectsOverlap(a, b) {
					return name
				}
			}
		}
	}
	return ""
}

// streams returns tenant's streams sorted by name, those whose subjects
// overlap filter when filter is set.
func (r *registry) streams(tenant, filter string) []*stream {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []*stream
	for _, st := range r.byStream[tenant] {
		if filter != "" {
			hit := false
			for _, s := range st.config.Subjects {
				if subjectsOverlap(s, filter) {
					hit = true
					break
				}
			}
			if !hit {
				continue
			}
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].stream < out[j].stream })
	return out
}

// all returns every topic in the registry.
func (r *registry) all() []tenancy.Name {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]tenancy.Name, 0, len(r.byTopic))
	for n := range r.byTopic {
		out = append(out, n)
	}
	return out
}

// decodeStream turns a topic's metadata into a registry entry. A topic
// without a JetStream spec (created by the admin API) gets the derived
// stream "<namespace>:<topic>" with subjects "t.ns.topic" and
// "t.ns.topic.>" (spec §4).
func decodeStream(name tenancy.Name, meta mledger.TopicMeta) *stream {
	var spec topicSpec
	if len(meta.Spec) > 0 {
		_ = json.Unmarshal(meta.Spec, &spec)
	}
	if spec.Stream == "" {
		spec.Stream = name.Namespace + ":" + name.Topic
		spec.Config = jsapi.StreamConfig{Name: spec.Stream, Subjects: topicSubjects(name.Tenant, name.Namespace, name.Topic)}
		spec.Config.SetDefaults()
	}
	return &stream{name: name, stream: spec.Stream, config: spec.Config, created: meta.Created}
}

// topicForStream is the topic a stream name denotes in tenant (spec §4):
// "ns:topic" names topic ns/topic; any other valid name is topic
// <namespace>/<name>, where namespace is the stream's
// metadata["strata.namespace"] or the default. ok is false when the name
// is not a valid Strata token.
func topicForStream(tenant, defaultNS, name string, metadata map[string]string) (tenancy.Name, bool) {
	if ns, topic, found := strings.Cut(name, ":"); found {
		return tenancy.Name{Tenant: tenant, Namespace: ns, Topic: topic}, tenancy.ValidToken(ns) && tenancy.ValidToken(topic)
	}
	ns := defaultNS
	if v := metadata["strata.namespace"]; v != "" {
		ns = v
	}
	return tenancy.Name{Tenant: tenant, Namespace: ns, Topic: name}, tenancy.ValidToken(ns) && tenancy.ValidToken(name)
}
