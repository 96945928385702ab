package tenancy

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// PatchPolicies applies a JSON merge patch (RFC 7386) to p: fields the
// patch names are replaced, objects merge recursively, null removes
// (resets to the zero value). The result is decoded strictly (an unknown
// field is an error naming it) but not validated. Errors name the field
// where they can (json.UnmarshalTypeError's Field).
func PatchPolicies(p Policies, patch []byte) (Policies, error) {
	cur, err := json.Marshal(p)
	if err != nil {
		return Policies{}, err
	}
	var doc, pt any
	if err := json.Unmarshal(cur, &doc); err != nil {
		return Policies{}, err
	}
	if err := json.Unmarshal(patch, &pt); err != nil {
		return Policies{}, fmt.Errorf("policies patch: %w", err)
	}
	if _, ok := pt.(map[string]any); !ok {
		return Policies{}, fmt.Errorf("policies patch: want a JSON object")
	}
	merged, err := json.Marshal(mergePatch(doc, pt))
	if err != nil {
		return Policies{}, err
	}
	var out Policies
	dec := json.NewDecoder(bytes.NewReader(merged))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		return Policies{}, err
	}
	return out, nil
}

// mergePatch is RFC 7386's MergePatch(target, patch).
func mergePatch(target, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	tm, ok := target.(map[string]any)
	if !ok {
		tm = map[string]any{}
	}
	for k, v := range pm {
		if v == nil {
			delete(tm, k)
			continue
		}
		tm[k] = mergePatch(tm[k], v)
	}
	return tm
}
