package creds

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/stratamesh/strata/tenancy"
)

func operator(t *testing.T) nkeys.KeyPair {
	t.Helper()
	seed, err := NewSeed(nkeys.PrefixByteOperator)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ParseSeed(append([]byte("  "), append(seed, '\n')...), nkeys.PrefixByteOperator)
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

// TestUserCreds: a user's .creds file parses with the NATS libraries, its
// JWT is signed by the tenant's account with the permissions and expiry
// asked for, and the account JWT is the operator's, named after the
// tenant.
func TestUserCreds(t *testing.T) {
	op := operator(t)
	acct, err := NewAccount(op, "pay")
	if err != nil {
		t.Fatal(err)
	}
	ac, err := jwt.DecodeAccountClaims(acct.JWT)
	if err != nil || ac.Issuer != PublicKey(op) || ac.Subject != acct.PublicKey || ac.Name != "pay" {
		t.Fatalf("account JWT %+v: %v", ac, err)
	}
	now := time.Unix(1_800_000_000, 0)
	spec := UserSpec{Name: "alice", Pub: tenancy.Permission{Allow: []string{"pay.>"}}, Sub: tenancy.Permission{Allow: []string{"pay.>", "_INBOX.>"}, Deny: []string{"pay.x"}}, Expiry: 720 * time.Hour}
	u, text, err := NewUser(acct, spec, now)
	if err != nil {
		t.Fatal(err)
	}
	token, err := jwt.ParseDecoratedJWT(text)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := jwt.ParseDecoratedNKey(text)
	if err != nil {
		t.Fatal(err)
	}
	if PublicKey(kp) != u.PublicKey {
		t.Fatalf("the creds' key %s is not the user's %s", PublicKey(kp), u.PublicKey)
	}
	if _, err := nkeys.ParseDecoratedNKey(text); err != nil {
		t.Fatal(err)
	}
	uc, err := jwt.DecodeUserClaims(token)
	if err != nil {
		t.Fatal(err)
	}
	if uc.Issuer != acct.PublicKey || uc.Subject != u.PublicKey || uc.Name != "alice" || uc.Expires != now.Add(720*time.Hour).Unix() ||
		u.Expires != uc.Expires || u.Account != acct.PublicKey {
		t.Fatalf("user claims %+v, user %+v", uc, u)
	}
	if strings.Join(uc.Pub.Allow, ",") != "pay.>" || strings.Join(uc.Sub.Allow, ",") != "pay.>,_INBOX.>" || strings.Join(uc.Sub.Deny, ",") != "pay.x" {
		t.Fatalf("permissions %+v", uc.Permissions)
	}
	if !ac.DidSign(uc) {
		t.Fatal("the account did not sign the user")
	}
	// The record holds no secret.
	if strings.Contains(acct.Seed, u.PublicKey) || u.PublicKey == "" || strings.HasPrefix(u.PublicKey, "S") {
		t.Fatalf("user record %+v", u)
	}

	// Revocation: the account JWT signed again lists the user; NeedsSigning
	// tells a JWT that lacks it.
	rev := Revoke(u, now)
	if !NeedsSigning(PublicKey(op), acct, []tenancy.Revocation{rev}) {
		t.Fatal("a JWT without the revocation does not need signing")
	}
	acct.JWT, err = SignAccount(op, acct, []tenancy.Revocation{rev})
	if err != nil {
		t.Fatal(err)
	}
	if NeedsSigning(PublicKey(op), acct, []tenancy.Revocation{rev}) {
		t.Fatal("the re-signed JWT still needs signing")
	}
	if NeedsSigning(PublicKey(op), acct, nil) {
		t.Fatal("a JWT with more revocations than recorded needs signing")
	}
	if !NeedsSigning(PublicKey(operator(t)), acct, nil) {
		t.Fatal("a JWT of another operator does not need signing")
	}
	ac, _ = jwt.DecodeAccountClaims(acct.JWT)
	if !ac.IsClaimRevoked(uc) {
		t.Fatal("the re-signed account JWT does not revoke the user")
	}
	u2, _, err := NewUser(acct, UserSpec{Name: "alice"}, now.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	uc2 := jwt.NewUserClaims(u2.PublicKey)
	uc2.IssuedAt = now.Add(time.Second).Unix()
	if ac.IsClaimRevoked(uc2) || u2.Expires != 0 {
		t.Fatal("a new user of the same name is revoked, or expires without an expiry")
	}
}

func TestBadInput(t *testing.T) {
	op := operator(t)
	if _, err := ParseSeed([]byte("SUxyz"), nkeys.PrefixByteOperator); err == nil {
		t.Error("garbage accepted as a seed")
	}
	aseed, _ := NewSeed(nkeys.PrefixByteAccount)
	if _, err := ParseSeed(aseed, nkeys.PrefixByteOperator); err == nil || !strings.Contains(err.Error(), "want a seed of kind") {
		t.Errorf("an account seed accepted as the operator's: %v", err)
	}
	acct, _ := NewAccount(op, "pay")
	other, _ := NewAccount(op, "pay")
	acct.Seed = other.Seed
	if _, _, err := NewUser(acct, UserSpec{Name: "a"}, time.Now()); err == nil {
		t.Error("a user signed with a seed that is not the account's")
	}
	if _, _, err := NewUser(other, UserSpec{Name: "a b"}, time.Now()); err == nil {
		t.Error("a bad user name accepted")
	}
	if _, err := NewSystem(op, op); err == nil {
		t.Error("an operator key accepted as the system account")
	}
}

func TestMeshUser(t *testing.T) {
	op := operator(t)
	akp, _ := nkeys.CreateAccount()
	sys, err := NewSystem(op, akp)
	if err != nil {
		t.Fatal(err)
	}
	text, err := sys.MeshCreds("strata-cli", 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	token, _ := jwt.ParseDecoratedJWT(text)
	uc, err := jwt.DecodeUserClaims(token)
	if err != nil || uc.Issuer != sys.AccountKey() {
		t.Fatalf("%+v %v", uc, err)
	}
	ac, err := jwt.DecodeAccountClaims(sys.JWT)
	if err != nil || ac.Issuer != sys.OperatorKey() || ac.Name != SystemAccountName {
		t.Fatalf("%+v %v", ac, err)
	}
}
