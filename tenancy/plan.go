package tenancy

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
)

// Config is a set of tenants and namespaces: what a topology file asks
// for, or what a mesh holds.
type Config struct {
	Tenants    []Tenant
	Namespaces []Namespace
}

// ConfigOf is the visible tenants and namespaces of s.
func ConfigOf(s *State) Config {
	return Config{Tenants: s.Tenants(), Namespaces: s.Namespaces("")}
}

// Change is one step of a Plan: create, update or delete one tenant or
// namespace.
type Change struct {
	Op   string // "create" | "update" | "delete"
	Kind Kind   // KindTenant or KindNamespace
	Key  string // "tenant" or "tenant/namespace"
	// Fields lists what an update changes: JSON paths and the values
	// before and after, as JSON text.
	Fields []FieldChange
	// Tenant or Namespace is the desired object (create and update).
	Tenant    *Tenant
	Namespace *Namespace
}

// FieldChange is one changed leaf of an update.
type FieldChange struct {
	Path     string
	From, To string
}

func (c Change) String() string { return fmt.Sprintf("%s %s %s", c.Op, c.Kind, c.Key) }

// Plan lists the changes that make cur into want, like kubectl apply:
// creates and updates of everything want names that differs, and — only
// with prune — deletes of what want does not name. Order: tenant creates
// and updates, namespace creates and updates, namespace deletes, tenant
// deletes (so a tenant's namespaces go before it). An empty plan means
// cur already is want.
func Plan(cur, want Config, prune bool) []Change {
	var out []Change
	curT := map[string]Tenant{}
	for _, t := range cur.Tenants {
		curT[t.Name] = t
	}
	wantT := map[string]bool{}
	for _, t := range want.Tenants {
		t := t
		wantT[t.Name] = true
		old, ok := curT[t.Name]
		switch {
		case !ok:
			out = append(out, Change{Op: "create", Kind: KindTenant, Key: t.Name, Tenant: &t})
		default:
			if f := fieldDiff(old, t); len(f) > 0 {
				out = append(out, Change{Op: "update", Kind: KindTenant, Key: t.Name, Fields: f, Tenant: &t})
			}
		}
	}
	curN := map[string]Namespace{}
	for _, n := range cur.Namespaces {
		curN[n.NS().String()] = n
	}
	wantN := map[string]bool{}
	for _, n := range want.Namespaces {
		n := n
		key := n.NS().String()
		wantN[key] = true
		old, ok := curN[key]
		switch {
		case !ok:
			out = append(out, Change{Op: "create", Kind: KindNamespace, Key: key, Namespace: &n})
		default:
			if f := fieldDiff(old.Policies, n.Policies); len(f) > 0 {
				for i := range f {
					f[i].Path = "policies." + f[i].Path
				}
				out = append(out, Change{Op: "update", Kind: KindNamespace, Key: key, Fields: f, Namespace: &n})
			}
		}
	}
	if !prune {
		return out
	}
	var delN, delT []Change
	for _, n := range cur.Namespaces {
		key := n.NS().String()
		if !wantN[key] {
			delN = append(delN, Change{Op: "delete", Kind: KindNamespace, Key: key})
		}
	}
	for _, t := range cur.Tenants {
		if !wantT[t.Name] {
			delT = append(delT, Change{Op: "delete", Kind: KindTenant, Key: t.Name})
		}
	}
	sort.Slice(delN, func(i, j int) bool { return delN[i].Key < delN[j].Key })
	sort.Slice(delT, func(i, j int) bool { return delT[i].Key < delT[j].Key })
	return append(append(out, delN...), delT...)
}

// fieldDiff lists the JSON leaves where a and b differ, sorted by path.
func fieldDiff(a, b any) []FieldChange {
	var x, y any
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	_ = json.Unmarshal(ja, &x)
	_ = json.Unmarshal(jb, &y)
	var out []FieldChange
	walkDiff("", x, y, &out)
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

func walkDiff(path string, a, b any, out *[]FieldChange) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		for k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			walkDiff(p, am[k], bm[k], out)
		}
		return
	}
	if reflect.DeepEqual(a, b) {
		return
	}
	ta, _ := json.Marshal(a)
	tb, _ := json.Marshal(b)
	*out = append(*out, FieldChange{Path: path, From: string(ta), To: string(tb)})
}
