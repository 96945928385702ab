package topology

import (
	"slices"
	"strings"

	"github.com/stratamesh/strata/tenancy"
)

var (
	retentionModes  = []string{RetentionLimits, RetentionInterest, RetentionWorkQueue}
	backlogPolicies = []string{BacklogHold, BacklogReject, BacklogEvictOld}
)

func (r *report) checkTenants(m *Mesh) {
	regions := make([]string, len(m.Regions))
	for i := range m.Regions {
		regions[i] = m.Regions[i].Name
	}
	names := make([]string, len(m.Tenants))
	for i := range m.Tenants {
		names[i] = m.Tenants[i].Name
		r.checkTenant(elem("tenants", i), &m.Tenants[i], regions)
	}
	r.unique("tenants", "name", "tenant", names)
	r.checkJetStream(m)
}

func (r *report) checkTenant(p string, t *Tenant, regions []string) {
	r.requireToken(field(p, "name"), t.Name)
	for i, a := range t.Admins {
		if a == "" {
			r.missing(elem(field(p, "admins"), i))
		}
	}
	q := field(p, "quotas")
	r.atLeast(field(q, "topics"), t.Quotas.Topics, 0)
	r.atLeast(field(q, "connections"), t.Quotas.Connections, 0)
	r.atLeast(field(q, "consumers"), t.Quotas.Consumers, 0)
	r.checkRegionQuotas(field(q, "regions"), &t.Quotas, regions)
	np := field(p, "namespaces")
	names := make([]string, len(t.Namespaces))
	for i := range t.Namespaces {
		names[i] = t.Namespaces[i].Name
		r.checkNamespace(elem(np, i), &t.Namespaces[i], regions)
	}
	r.unique(np, "name", "namespace", names)
}

func (r *report) checkNamespace(p string, ns *Namespace, regions []string) {
	r.requireToken(field(p, "name"), ns.Name)
	r.checkReplication(field(p, "replication"), ns.Replication, regions)
	rp := field(p, "retention")
	r.oneOf(field(rp, "mode"), "retention mode", ns.Retention.Mode, retentionModes...)
	if mp := field(rp, "messages"); ns.Retention.Messages < -1 {
		r.errorf(mp, "must be -1 (unlimited) or more, got %d", ns.Retention.Messages)
	}
	if ns.BacklogQuota != nil {
		r.oneOf(field(p, "backlog_quota.policy"), "backlog policy", ns.BacklogQuota.Policy, backlogPolicies...)
	}
	r.atLeast(field(p, "bundles"), int64(ns.Bundles), 1)
	r.atLeast(field(p, "max_consumers"), int64(ns.MaxConsumers), 0)
}

// checkRegionQuotas checks a tenant's per-region caps: each names a
// region of the file (at its key), caps a quota that has a mesh-wide
// limit, and is at most that limit.
func (r *report) checkRegionQuotas(p string, q *Quotas, regions []string) {
	if len(q.Regions) > tenancy.MaxRegionQuotas {
		r.errorf(p, "at most %d regions, not %d", tenancy.MaxRegionQuotas, len(q.Regions))
		return
	}
	names := make([]string, 0, len(q.Regions))
	for name := range q.Regions {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		rp := field(p, name)
		if !slices.Contains(regions, name) {
			at, ok := r.ix.keys[rp]
			if !ok {
				at = r.ix.at(rp)
			}
			r.errorAt(at, rp, "no such region in the topology (regions: %s)%s", strings.Join(regions, ", "), didYouMean(name, regions))
			continue
		}
		c := q.Regions[name]
		for _, v := range []struct {
			key        string
			cap, limit int64
		}{{"publish_rate", int64(c.PublishRate), int64(q.PublishRate)}, {"publish_bytes", int64(c.PublishBytes), int64(q.PublishBytes)}} {
			switch {
			case v.cap > 0 && v.limit == 0:
				r.errorf(field(rp, v.key), "a per-region cap needs a mesh-wide limit: quotas.%s is not set (unlimited)", v.key)
			case v.cap > v.limit && v.limit > 0:
				r.errorf(field(rp, v.key), "%s is over the mesh-wide limit quotas.%s (%s)", rateString(v.key, v.cap), v.key, rateString(v.key, v.limit))
			}
		}
	}
}

// rateString prints a rate of quota key as the file writes it.
func rateString(key string, v int64) string {
	if key == "publish_bytes" {
		return ByteRate(v).String()
	}
	return MsgRate(v).String()
}

// checkReplication checks that a written replication list names known
// regions, each once, and at least one.
func (r *report) checkReplication(p string, list, regions []string) {
	if r.ix.has(p) && len(list) == 0 {
		r.errorf(p, "must name at least one region (leave it out for all regions)")
	}
	seen := map[string]bool{}
	for i, name := range list {
		ep := elem(p, i)
		switch {
		case !slices.Contains(regions, name):
			r.errorf(ep, "unknown region %s%s", quoteShort(name), didYouMean(name, regions))
		case seen[name]:
			r.errorf(ep, "region %q is listed twice", name)
		}
		seen[name] = true
	}
}

// checkJetStream checks that defaults.jetstream names a declared tenant and
// one of its namespaces.
func (r *report) checkJetStream(m *Mesh) {
	js := m.Defaults.JetStream
	if js == nil {
		return
	}
	tp, np := "defaults.jetstream.tenant", "defaults.jetstream.namespace"
	r.requireToken(tp, js.Tenant)
	r.requireToken(np, js.Namespace)
	if !tenancy.ValidToken(js.Tenant) {
		return
	}
	t, ok := m.Tenant(js.Tenant)
	if !ok {
		r.errorf(tp, "unknown tenant %s%s", quoteShort(js.Tenant), didYouMean(js.Tenant, tenantNames(m)))
		return
	}
	if _, ok := t.Namespace(js.Namespace); !ok && tenancy.ValidToken(js.Namespace) {
		r.errorf(np, "tenant %q has no namespace %s%s", t.Name, quoteShort(js.Namespace),
			didYouMean(js.Namespace, namespaceNames(t)))
	}
}

func didYouMean(word string, candidates []string) string {
	if s := suggest(word, candidates); s != "" {
		return " (did you mean " + quoteShort(s) + "?)"
	}
	return ""
}

func tenantNames(m *Mesh) []string {
	out := make([]string, len(m.Tenants))
	for i := range m.Tenants {
		out[i] = m.Tenants[i].Name
	}
	return out
}

func namespaceNames(t *Tenant) []string {
	out := make([]string, len(t.Namespaces))
	for i := range t.Namespaces {
		out[i] = t.Namespaces[i].Name
	}
	return out
}
