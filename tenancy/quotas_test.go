package tenancy

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

var meshRegions = []string{"us-east", "eu-west", "ap-south"}

// fieldsOf lists the fields of a joined validation error, in order.
func fieldsOf(err error) []string {
	var out []string
	var walk func(error)
	walk = func(e error) {
		var fe *FieldError
		switch x := e.(type) {
		case interface{ Unwrap() []error }:
			for _, y := range x.Unwrap() {
				walk(y)
			}
		default:
			if errors.As(e, &fe) {
				out = append(out, fe.Field)
			}
		}
	}
	if err != nil {
		walk(err)
	}
	return out
}

// TestTenantQuotasValidate: per-region caps name a region of the mesh,
// cap a quota that has a mesh-wide limit, and stay within it; every
// quota is 0 or more. Each refusal names the field at fault.
func TestTenantQuotasValidate(t *testing.T) {
	base := Quotas{PublishRate: 1000, PublishBytes: 1 << 20}
	with := func(regions map[string]RegionQuotas) Quotas {
		q := base
		q.Regions = regions
		return q
	}
	for _, c := range []struct {
		name    string
		q       Quotas
		regions []string
		fields  []string // nil: valid
		msg     string   // in the message, when set
	}{
		{"no caps", base, meshRegions, nil, ""},
		{"caps within the limit", with(map[string]RegionQuotas{"us-east": {PublishRate: 600}, "eu-west": {PublishBytes: 1 << 19}}), meshRegions, nil, ""},
		{"a cap equal to the limit", with(map[string]RegionQuotas{"us-east": {PublishRate: 1000}}), meshRegions, nil, ""},
		{"an empty entry is no cap", with(map[string]RegionQuotas{"us-east": {}}), meshRegions, nil, ""},
		{"unknown region", with(map[string]RegionQuotas{"eu-north": {PublishRate: 10}}), meshRegions,
			[]string{"quotas.regions.eu-north"}, "quotas.regions.eu-north: no such region in the topology (regions: us-east, eu-west, ap-south)"},
		{"any valid name without the mesh's regions", with(map[string]RegionQuotas{"eu-north": {PublishRate: 10}}), nil, nil, ""},
		{"a bad region name without the mesh's regions", with(map[string]RegionQuotas{"eu.north": {PublishRate: 10}}), nil,
			[]string{"quotas.regions.eu.north"}, "not a valid region name"},
		{"negative cap", with(map[string]RegionQuotas{"us-east": {PublishRate: -1}}), meshRegions,
			[]string{"quotas.regions.us-east.publish_rate"}, "must be 0 (no cap) or more, got -1"},
		{"cap over the limit", with(map[string]RegionQuotas{"ap-south": {PublishBytes: 2 << 20}}), meshRegions,
			[]string{"quotas.regions.ap-south.publish_bytes"}, "2097152 is over the mesh-wide limit quotas.publish_bytes (1048576)"},
		{"cap of an unlimited quota", Quotas{Regions: map[string]RegionQuotas{"us-east": {PublishRate: 5}}}, meshRegions,
			[]string{"quotas.regions.us-east.publish_rate"}, "needs a mesh-wide limit: quotas.publish_rate is 0"},
		{"a quota beyond 2^53", Quotas{PublishRate: 1<<63 - 1}, meshRegions,
			[]string{"quotas.publish_rate"}, "at most 9007199254740992 (2^53), got 9223372036854775807"},
		{"negative mesh-wide quotas", Quotas{PublishRate: -1, Storage: -5, Consumers: -2}, meshRegions,
			[]string{"quotas.publish_rate", "quotas.storage", "quotas.consumers"}, "must be 0 (unlimited) or more"},
		{"several problems in region order", with(map[string]RegionQuotas{"zz": {}, "eu-west": {PublishRate: -3, PublishBytes: 4 << 20}, "aa": {}}), meshRegions,
			[]string{"quotas.regions.aa", "quotas.regions.eu-west.publish_rate", "quotas.regions.eu-west.publish_bytes", "quotas.regions.zz"}, ""},
	} {
		tn := Tenant{Name: "pay", Quotas: c.q}
		err := tn.ValidateIn(c.regions)
		if got := fieldsOf(err); !slices.Equal(got, c.fields) {
			t.Errorf("%s: fields %v (%v), want %v", c.name, got, err, c.fields)
			continue
		}
		if c.msg != "" && (err == nil || !strings.Contains(err.Error(), c.msg)) {
			t.Errorf("%s: %v, want it to say %q", c.name, err, c.msg)
		}
		if c.regions == nil {
			if (tn.Validate() == nil) != (err == nil) {
				t.Errorf("%s: Validate and ValidateIn(nil) disagree", c.name)
			}
		}
	}
	many := map[string]RegionQuotas{}
	for i := range MaxRegionQuotas + 1 {
		many["r"+strings.Repeat("x", i)] = RegionQuotas{}
	}
	tn := Tenant{Name: "pay", Quotas: Quotas{Regions: many}}
	if got := fieldsOf(tn.Validate()); !slices.Equal(got, []string{"quotas.regions"}) {
		t.Errorf("%d regions: %v", len(many), got)
	}
}

// TestQuotasJSON: a tenant without per-region caps has the JSON it had
// before they existed (no "regions" key), so records written by older
// nodes and newer ones compare equal; caps survive a round trip.
func TestQuotasJSON(t *testing.T) {
	b, err := json.Marshal(Tenant{Name: "pay", Quotas: Quotas{PublishRate: 5}})
	if err != nil || string(b) != `{"name":"pay","quotas":{"publish_rate":5,"publish_bytes":0,"storage":0,"topics":0,"connections":0,"consumers":0}}` {
		t.Errorf("%s %v", b, err)
	}
	in := Tenant{Name: "pay", Quotas: Quotas{PublishRate: 1000, Regions: map[string]RegionQuotas{"us-east": {PublishRate: 600}}}}
	b, _ = json.Marshal(in)
	if !strings.Contains(string(b), `"regions":{"us-east":{"publish_rate":600,"publish_bytes":0}}`) {
		t.Errorf("caps on the wire: %s", b)
	}
	var out Tenant
	if err := json.Unmarshal(b, &out); err != nil || !reflect.DeepEqual(in, out) {
		t.Errorf("round trip: %+v %v", out, err)
	}
}

// TestPlanRegionCaps: apply's plan sees a change of a per-region cap
// as an update of that one leaf, and a tenant that gains caps likewise.
func TestPlanRegionCaps(t *testing.T) {
	old := Tenant{Name: "pay", Quotas: Quotas{PublishRate: 1000, Regions: map[string]RegionQuotas{"us-east": {PublishRate: 600}}}}
	want := Tenant{Name: "pay", Quotas: Quotas{PublishRate: 1000, Regions: map[string]RegionQuotas{"us-east": {PublishRate: 500}}}}
	plan := Plan(Config{Tenants: []Tenant{old}}, Config{Tenants: []Tenant{want}}, false)
	if len(plan) != 1 || plan[0].Op != "update" || len(plan[0].Fields) != 1 ||
		plan[0].Fields[0] != (FieldChange{Path: "quotas.regions.us-east.publish_rate", From: "600", To: "500"}) {
		t.Fatalf("plan %+v", plan)
	}
	if p := Plan(Config{Tenants: []Tenant{old}}, Config{Tenants: []Tenant{old}}, false); len(p) != 0 {
		t.Errorf("same caps: plan %+v", p)
	}
	plain := Tenant{Name: "pay", Quotas: Quotas{PublishRate: 1000}}
	plan = Plan(Config{Tenants: []Tenant{plain}}, Config{Tenants: []Tenant{old}}, false)
	if len(plan) != 1 || len(plan[0].Fields) != 1 || plan[0].Fields[0].Path != "quotas.regions" {
		t.Errorf("caps added: plan %+v", plan)
	}
}

// FuzzTenantQuotas: any JSON taken as a tenant either fails ValidateIn
// with field errors, or is a tenant whose caps all name the mesh's
// regions, are non-negative and within their mesh-wide limits, and that
// survives a round trip unchanged.
func FuzzTenantQuotas(f *testing.F) {
	for _, s := range []string{
		`{"name":"pay","quotas":{"publish_rate":1000,"regions":{"us-east":{"publish_rate":600}}}}`,
		`{"name":"pay","quotas":{"publish_rate":1000,"regions":{"eu-north":{"publish_rate":600}}}}`,
		`{"name":"pay","quotas":{"publish_bytes":10,"regions":{"eu-west":{"publish_bytes":-1}}}}`,
		`{"name":"pay","quotas":{"regions":{"ap-south":{"publish_rate":1}}}}`,
		`{"name":"pay","quotas":{"regions":{"ap-south":null,"us-east":{}}}}`,
		`{"name":"pay","quotas":{"regions":null}}`,
		`{"name":"pay","quotas":{"storage":-1}}`,
		`{"name":"","quotas":{}}`,
		`{"name":"pay","admins":[],"quotas":{"regions":{}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var tn Tenant
		if json.Unmarshal(b, &tn) != nil {
			return
		}
		err := tn.ValidateIn(meshRegions)
		if err != nil {
			if len(fieldsOf(err)) == 0 {
				t.Fatalf("refused without a field: %v", err)
			}
			return
		}
		q := tn.Quotas
		for r, c := range q.Regions {
			if !slices.Contains(meshRegions, r) || c.PublishRate < 0 || c.PublishBytes < 0 ||
				(c.PublishRate > 0 && (q.PublishRate == 0 || c.PublishRate > q.PublishRate)) ||
				(c.PublishBytes > 0 && (q.PublishBytes == 0 || c.PublishBytes > q.PublishBytes)) {
				t.Fatalf("accepted cap %s %+v of %+v", r, c, q)
			}
		}
		again, _ := json.Marshal(tn)
		var back Tenant
		if err := json.Unmarshal(again, &back); err != nil || back.ValidateIn(meshRegions) != nil {
			t.Fatalf("round trip of %s: %v", again, err)
		}
		if len(tn.Quotas.Regions) == 0 {
			tn.Quotas.Regions = nil // an empty map is written as none
		}
		if len(tn.Admins) == 0 {
			tn.Admins = nil // likewise
		}
		if !reflect.DeepEqual(tn, back) {
			t.Fatalf("round trip changed %+v into %+v", tn, back)
		}
	})
}
