package tenancy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// PatchPolicies applies a JSON merge patch (RFC 7386) to p: fields the
// patch names are replaced and objects merge recursively; null resets a
// field to its value in defaults (DefaultPolicies of the mesh's regions:
// "dedup_window": null is two minutes again, "backlog_quota": null no
// quota). Keys must be spelled exactly as the fields (encoding/json
// would match "Retention" to retention). Then: a backlog quota without a
// policy gets producer_request_hold; retention messages -1 (the
// topology's "unlimited") is 0. The result is not validated. Errors
// name the field (a json.UnmarshalTypeError's Field, or "unknown field").
func PatchPolicies(p Policies, patch []byte, defaults Policies) (Policies, error) {
	cur, err := policyDoc(p)
	if err != nil {
		return Policies{}, err
	}
	def, err := policyDoc(defaults)
	if err != nil {
		return Policies{}, err
	}
	var pt any
	if err := json.Unmarshal(patch, &pt); err != nil {
		return Policies{}, fmt.Errorf("policies patch: %w", err)
	}
	if _, ok := pt.(map[string]any); !ok {
		return Policies{}, fmt.Errorf("policies patch: want a JSON object")
	}
	if err := knownKeys(pt, reflect.TypeFor[Policies](), ""); err != nil {
		return Policies{}, err
	}
	merged, err := json.Marshal(mergePatch(cur, pt, def))
	if err != nil {
		return Policies{}, err
	}
	var out Policies
	dec := json.NewDecoder(bytes.NewReader(merged))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		return Policies{}, err
	}
	if out.BacklogQuota != nil && out.BacklogQuota.Policy == "" {
		out.BacklogQuota.Policy = BacklogHold
	}
	if out.Retention.Messages == -1 {
		out.Retention.Messages = 0
	}
	return out, nil
}

func policyDoc(p Policies) (any, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	var doc any
	err = json.Unmarshal(b, &doc)
	return doc, err
}

// mergePatch is RFC 7386's MergePatch(target, patch), with null taking
// the field's value in def (absent there: removed).
func mergePatch(target, patch, def any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	tm, ok := target.(map[string]any)
	if !ok {
		tm = map[string]any{}
	}
	dm, _ := def.(map[string]any)
	for k, v := range pm {
		if v == nil {
			if d, ok := dm[k]; ok && d != nil {
				tm[k] = d
			} else {
				delete(tm, k)
			}
			continue
		}
		tm[k] = mergePatch(tm[k], v, dm[k])
	}
	return tm
}

// knownKeys checks that every key of the patch object val names a field
// of struct t exactly (recursing into object fields); it reports the
// first that does not as an unknown field with its path.
func knownKeys(val any, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	m, ok := val.(map[string]any)
	if !ok || t.Kind() != reflect.Struct {
		return nil
	}
	for k, sub := range m {
		name := k
		if path != "" {
			name = path + "." + k
		}
		f, ok := fieldByJSON(t, k)
		if !ok {
			return fmt.Errorf("json: unknown field %q", name)
		}
		if err := knownKeys(sub, f.Type, name); err != nil {
			return err
		}
	}
	return nil
}

func fieldByJSON(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}
