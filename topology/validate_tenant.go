package topology

import (
	"slices"

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
