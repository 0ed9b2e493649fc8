package claim

import (
	"strings"
	"testing"
)

func TestTokenCompare(t *testing.T) {
	tests := []struct {
		a, b Token
		want int
	}{
		{"", "", 0},
		{"", "1", -1},
		{"1", "", 1},
		{"9", "10", -1},
		{"48213", "48213", 0},
		{"100000000000000000001", "99999999999999999999", 1},
	}
	for _, tt := range tests {
		got, err := tt.a.Compare(tt.b)
		if err != nil || got != tt.want {
			t.Errorf("Token(%q).Compare(%q) = %d, %v; want %d", tt.a, tt.b, got, err, tt.want)
		}
	}
	if _, err := Token("01").Compare("1"); err == nil {
		t.Error("a token with a leading zero compared without error")
	}
}

func TestParseToken(t *testing.T) {
	for _, bad := range []string{"", "0", "01", "-1", "1.5", "abc", " 1"} {
		if _, err := ParseToken(bad); err == nil || !strings.Contains(err.Error(), "parsing fencing token") {
			t.Errorf("ParseToken(%q) = %v, want an error naming the token", bad, err)
		}
	}
	for _, good := range []string{"1", "48213", "12345678901234567890123"} {
		tok, err := ParseToken(good)
		if err != nil || tok.String() != good {
			t.Errorf("ParseToken(%q) = %q, %v", good, tok, err)
		}
	}
}

func FuzzParseToken(f *testing.F) {
	for _, s := range []string{"1", "0", "01", "48213", "", "-5", "1e9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := ParseToken(s)
		if err != nil {
			return
		}
		// A parsed token round-trips and equals itself.
		if tok.String() != s {
			t.Fatalf("round trip %q -> %q", s, tok)
		}
		same := tok
		if c, err := tok.Compare(same); err != nil || c != 0 {
			t.Fatalf("%q.Compare(itself) = %d, %v", s, c, err)
		}
	})
}

func TestDecodeAnnotations(t *testing.T) {
	a := Config{}.withDefaults().Annotations
	full := a.Encode(Record{Key: "k", Holder: Holder{Namespace: "ns", Name: "n", UID: "u", Kind: "K", APIVersion: "g/v1"}, Token: "7"})
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for kk, vv := range full {
			m[kk] = vv
		}
		if v == "\x00delete" {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	tests := []struct {
		name        string
		annotations map[string]string
		wantPresent bool
		wantForeign string
	}{
		{"given a complete record then it is ours", full, true, ""},
		{"given no annotations then nothing is present", nil, false, "missing annotations"},
		{"given unrelated annotations then nothing is present", map[string]string{"other": "x"}, false, "missing annotations"},
		{"given a missing holder UID then it is foreign", with(a.HolderUID, "\x00delete"), true, "missing annotations " + a.HolderUID},
		{"given another key then it is foreign", with(a.Key, "other"), true, `written for key "other"`},
		{"given an empty UID then it is foreign", with(a.HolderUID, ""), true, "holder name or UID is empty"},
		{"given a garbage token then it is foreign", with(a.Token, "x1"), true, "token annotation"},
		{"given a malformed successor then it is foreign", with(a.Successor, "{"), true, "successor annotation"},
		{"given no kind then it is still ours", with(a.HolderKind, "\x00delete"), true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, present, foreign := a.Decode("k", tt.annotations)
			if present != tt.wantPresent || !strings.HasPrefix(foreign, tt.wantForeign) || (tt.wantForeign == "") != (foreign == "") {
				t.Fatalf("Decode() present=%v foreign=%q; want present=%v foreign starting %q", present, foreign, tt.wantPresent, tt.wantForeign)
			}
		})
	}
}

func FuzzDecodeAnnotations(f *testing.F) {
	f.Add("k", "ns", "n", "u", "7", `{"name":"s","uid":"v"}`)
	f.Add("", "", "", "", "", "")
	f.Add("k", "ns", "n", "u", "01", "{")
	a := Config{}.withDefaults().Annotations
	f.Fuzz(func(t *testing.T, key, ns, name, uid, token, successor string) {
		m := map[string]string{a.Key: key, a.HolderNamespace: ns, a.HolderName: name, a.HolderUID: uid, a.Token: token, a.Successor: successor}
		rec, _, foreign := a.Decode(key, m)
		if foreign != "" {
			return
		}
		// Whatever Decode accepts is a usable record: a holder with name and
		// UID, a parseable token, and it encodes back to the same fields.
		if rec.Holder.Name == "" || rec.Holder.UID == "" {
			t.Fatalf("accepted a holder without name or UID: %+v", rec.Holder)
		}
		if _, err := ParseToken(rec.Token.String()); !rec.Token.IsZero() && err != nil {
			t.Fatalf("accepted token %q", rec.Token)
		}
		again, _, foreign2 := a.Decode(key, a.Encode(rec))
		if foreign2 != "" || again.Holder != rec.Holder || again.Token != rec.Token {
			t.Fatalf("re-encoding changed the record: %+v -> %+v (%q)", rec, again, foreign2)
		}
	})
}
