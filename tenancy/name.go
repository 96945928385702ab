package tenancy

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidName is wrapped by every error about a malformed name.
var ErrInvalidName = errors.New("tenancy: invalid name")

// ValidToken reports whether s is one name token: [A-Za-z0-9_-]+ (the one
// rule for tenant, namespace, topic, region and mesh names; ARCHITECTURE
// §3 "Topics").
func ValidToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// CheckToken returns nil when s is a valid token, else an error wrapping
// ErrInvalidName that names what (e.g. "tenant") and quotes s.
func CheckToken(what, s string) error {
	if ValidToken(s) {
		return nil
	}
	if s == "" {
		return fmt.Errorf("%w: %s is empty: want [A-Za-z0-9_-]+", ErrInvalidName, what)
	}
	return fmt.Errorf("%w: %s %q: want [A-Za-z0-9_-]+", ErrInvalidName, what, s)
}

// Name is a topic's mesh-wide name: tenant/namespace/topic, each a token
// (ValidToken). The zero Name is invalid. The same Name addresses the
// topic in every region (it is how the replicator names it, never by a
// client's subject). JSON fields: tenant, namespace, topic.
type Name struct {
	Tenant    string `json:"tenant"`
	Namespace string `json:"namespace"`
	Topic     string `json:"topic"`
}

// String is "tenant/namespace/topic".
func (n Name) String() string { return n.Tenant + "/" + n.Namespace + "/" + n.Topic }

// Validate returns nil, or an error wrapping ErrInvalidName that names
// every part that is not a token.
func (n Name) Validate() error {
	return errors.Join(CheckToken("tenant", n.Tenant), CheckToken("namespace", n.Namespace), CheckToken("topic", n.Topic))
}

// NS is the namespace the topic belongs to.
func (n Name) NS() NSName { return NSName{Tenant: n.Tenant, Namespace: n.Namespace} }

// ParseName is String's inverse: "tenant/namespace/topic" of three valid
// tokens; else an error wrapping ErrInvalidName.
func ParseName(s string) (Name, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 {
		return Name{}, fmt.Errorf("%w: %q: want tenant/namespace/topic", ErrInvalidName, s)
	}
	n := Name{Tenant: parts[0], Namespace: parts[1], Topic: parts[2]}
	if err := n.Validate(); err != nil {
		return Name{}, err
	}
	return n, nil
}

// NSName is a namespace's mesh-wide name: tenant/namespace.
type NSName struct {
	Tenant    string `json:"tenant"`
	Namespace string `json:"namespace"`
}

// String is "tenant/namespace".
func (n NSName) String() string { return n.Tenant + "/" + n.Namespace }

// Validate returns nil, or an error wrapping ErrInvalidName naming the bad
// parts.
func (n NSName) Validate() error {
	return errors.Join(CheckToken("tenant", n.Tenant), CheckToken("namespace", n.Namespace))
}

// Topic is the topic named t in namespace n.
func (n NSName) Topic(t string) Name { return Name{Tenant: n.Tenant, Namespace: n.Namespace, Topic: t} }

// ParseNSName is NSName.String's inverse ("tenant/namespace").
func ParseNSName(s string) (NSName, error) {
	t, ns, ok := strings.Cut(s, "/")
	if !ok || strings.Contains(ns, "/") {
		return NSName{}, fmt.Errorf("%w: %q: want tenant/namespace", ErrInvalidName, s)
	}
	n := NSName{Tenant: t, Namespace: ns}
	if err := n.Validate(); err != nil {
		return NSName{}, err
	}
	return n, nil
}
