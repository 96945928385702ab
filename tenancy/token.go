package tenancy

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
)

// Token is an admin API credential (ARCHITECTURE §5 "Credentials"): a
// superuser token for the whole mesh (Tenant "") or a tenant-admin token
// confined to one tenant's objects. Only the secret's SHA-256 is stored;
// the secret is shown once, when the token is made.
type Token struct {
	ID     string `json:"id"`
	Tenant string `json:"tenant,omitempty"` // "": superuser
	// Hash is hex SHA-256 of the secret.
	Hash string `json:"hash"`
	// Created is the Unix millisecond time of creation.
	Created     int64  `json:"created"`
	Description string `json:"description,omitempty"`
}

// HashSecret is the stored form of a token secret: hex SHA-256. Secrets
// are random 256-bit values, so a plain hash suffices (no password
// stretching is needed for high-entropy secrets).
func HashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// Matches reports whether secret is this token's, in constant time.
func (t Token) Matches(secret string) bool {
	h := HashSecret(secret)
	return subtle.ConstantTimeCompare([]byte(h), []byte(t.Hash)) == 1
}
