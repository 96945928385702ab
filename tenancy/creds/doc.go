// Package creds makes and signs the mesh's NATS credentials (issue 24)
// with github.com/nats-io/jwt/v2 and github.com/nats-io/nkeys: the mesh
// is the NATS operator; each tenant is an account whose account JWT the
// operator signs (its Name is the tenant's name, its revocations the
// tenant's revoked users); a tenant's users are nkeys whose user JWTs the
// tenant's account signs; and the system account (not a tenant) signs the
// users the mesh's own connections and the superuser's tools log in as.
//
// # What it owns
//
//   - making an account (NewAccount) and re-signing its JWT with the
//     tenant's revocations (SignAccount, Lacks);
//   - making a user and its standard .creds text (NewUser), which holds the
//     user's private nkey: it is returned to the caller once and never
//     stored;
//   - the system account's JWT and the mesh's own users (System,
//     MeshUser), and loading seeds (ParseSeed).
//
// # What it must not do
//
// Store anything (tenancy/store does), read files (its callers do) or
// verify connections (the broker does, with the same libraries). It holds
// no state: every function is given the keys and the time it needs, so
// tests drive expiry and revocation with a fixed clock.
package creds
