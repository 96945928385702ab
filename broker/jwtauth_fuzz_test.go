package broker

import (
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// FuzzConnectJWT feeds CONNECT arguments through the broker's CONNECT
// decoding and JWTAuth. Nothing may panic, and a login may only succeed
// as a user the mesh issued, signing the nonce it was given: whatever the
// input, an accepted Identity names the known user of a known tenant.
func FuzzConnectJWT(f *testing.F) {
	m := newAuthMesh(f, nil, "acme")
	tok, kp := m.user("acme", nil)
	userPub, _ := kp.PublicKey()
	nonce := "bm9uY2Utb2YtdGhlLWZ1enplcg"
	sig, _ := kp.Sign([]byte(nonce))
	good := func(jwtStr, sigStr string) []byte {
		b, _ := json.Marshal(map[string]any{"verbose": false, "protocol": 1, "headers": true, "jwt": jwtStr, "sig": sigStr})
		return b
	}
	f.Add(good(tok, base64.RawURLEncoding.EncodeToString(sig)))
	f.Add(good(tok, base64.StdEncoding.EncodeToString(sig)))
	f.Add(good(tok, ""))
	f.Add(good("", "x"))
	f.Add(good(tok[:len(tok)-3], base64.RawURLEncoding.EncodeToString(sig)))
	other, _ := nkeys.CreateUser()
	osig, _ := other.Sign([]byte(nonce))
	f.Add(good(tok, base64.RawURLEncoding.EncodeToString(osig)))
	f.Add([]byte(`{"jwt":1}`))
	f.Add([]byte(`{"jwt":"a.b.c","sig":"!!"}`))
	f.Add([]byte(`not json`))
	auth := m.auth()
	f.Fuzz(func(t *testing.T, arg []byte) {
		o, _, err := parseConnect(arg)
		if err != nil {
			return
		}
		id, err := auth.Authenticate(ConnectInfo{JWT: o.JWT, Sig: o.Sig, NKey: o.NKey, Nonce: nonce})
		if err != nil {
			return
		}
		if id.User != userPub || id.Account != "acme" {
			t.Fatalf("accepted as %+v: not a user the mesh issued", id)
		}
		uc, derr := jwt.DecodeUserClaims(o.JWT)
		if derr != nil || uc.Subject != userPub {
			t.Fatalf("accepted a JWT that does not decode to the issued user: %v", derr)
		}
	})
}
