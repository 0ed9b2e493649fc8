package claimsctl

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/ocf-claim/claim/pkg/claim"
)

// shortUID is how many characters of a UID the narrow table shows: enough to
// tell holders apart and to check against --holder-uid by eye.
const shortUID = 8

// none fills an empty cell, as kubectl does, so columns stay aligned.
const none = "<none>"

// ClaimView is one record in -o yaml|json output. The field names are
// stable.
type ClaimView struct {
	Key         string       `json:"key"`
	Backend     string       `json:"backend"`
	Record      ObjectRef    `json:"record"`
	Holder      *HolderView  `json:"holder,omitempty"`
	Token       string       `json:"token,omitempty"`
	AcquireTime *metav1.Time `json:"acquireTime,omitempty"`
	Successor   *HolderView  `json:"successor,omitempty"`
	State       State        `json:"state"`
	Detail      string       `json:"detail,omitempty"`
	// RecordedIn lists every namespace that holds a record of Key, sorted,
	// when there is more than one among the records shown: the claim
	// namespace is the whole exclusion boundary, so each of them may have
	// granted the key to another holder. Empty otherwise.
	RecordedIn []string `json:"recordedIn,omitempty"`
}

// ObjectRef names the object that stores a record.
type ObjectRef struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// HolderView is a holder in structured output.
type HolderView struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	UID        string `json:"uid,omitempty"`
}

// ClaimList is the -o yaml|json output of list.
type ClaimList struct {
	Items []ClaimView `json:"items"`
}

func (o *Options) holderView(h *claim.Holder) *HolderView {
	if h == nil || h.Name == "" && h.UID == "" {
		return nil
	}
	return &HolderView{APIVersion: h.APIVersion, Kind: h.Kind, Namespace: h.Namespace, Name: h.Name, UID: o.show(string(h.UID))}
}

func (o *Options) view(r record) ClaimView {
	v := ClaimView{
		Key:        claim.Redact(r.rec.Key),
		Backend:    r.backend,
		Record:     ObjectRef{Namespace: r.rec.Ref.Namespace, Name: r.rec.Ref.Name},
		Holder:     o.holderView(&r.rec.Holder),
		Token:      o.show(r.rec.Token.String()),
		Successor:  o.holderView(r.rec.Successor),
		State:      r.state,
		Detail:     r.detail,
		RecordedIn: r.recordedIn,
	}
	if !r.rec.AcquireTime.IsZero() {
		v.AcquireTime = &metav1.Time{Time: r.rec.AcquireTime.UTC()}
	}
	return v
}

// recordTable is the list table; wide adds where the record is stored, the
// full holder UID and the detail of its state.
func (o *Options) recordTable(recs []record, wide bool) table {
	t := table{header: []string{"KEY", "HOLDER", "UID", "TOKEN", "AGE", "SUCCESSOR", "STATE"}}
	if wide {
		t.header = append(t.header, "RECORD", "HOLDER-UID", "DETAIL")
	}
	now := o.Clock.Now()
	for _, r := range recs {
		uid := o.show(string(r.rec.Holder.UID))
		successor := ""
		if s := r.rec.Successor; s != nil {
			successor = holderRef(*s)
		}
		row := []string{
			r.rec.Key, holderRef(r.rec.Holder), truncate(uid, shortUID), o.show(r.rec.Token.String()),
			age(now, r.since), successor, string(r.state),
		}
		if wide {
			where := r.rec.Ref.String()
			if r.backend == backendLease {
				where = "lease/" + where
			} else {
				where = r.backend + "/" + where
			}
			row = append(row, where, uid, r.detail)
		}
		t.rows = append(t.rows, row)
	}
	return t
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// age is kubectl's rendering of how long ago since was; unknown is empty.
func age(now, since time.Time) string {
	if since.IsZero() {
		return ""
	}
	return duration.HumanDuration(now.Sub(since))
}

// table is rows of cells under a header, printed as kubectl prints tables.
type table struct {
	header []string
	rows   [][]string
}

func (t table) write(w io.Writer, indent string) error {
	tw := tabwriter.NewWriter(w, 6, 4, 3, ' ', 0)
	line := func(cells []string) {
		out := make([]string, len(cells))
		for i, c := range cells {
			if c == "" {
				c = none
			}
			// Cells come from the cluster: a tab or newline would break the
			// columns, an escape sequence would drive the terminal.
			out[i] = printable(c)
		}
		fmt.Fprintln(tw, indent+strings.Join(out, "\t"))
	}
	line(t.header)
	for _, r := range t.rows {
		line(r)
	}
	return tw.Flush()
}

// writeStructured prints v as YAML or JSON, with the credentials in every
// string field redacted (claim.Redact: a detail or a condition message may
// quote a key again) and every rune that is not printable escaped (see
// safeJSON and safeYAML).
func writeStructured(w io.Writer, format string, v any) error {
	v = redacted(v)
	var (
		data []byte
		err  error
	)
	if format == outputJSON {
		data, err = json.MarshalIndent(v, "", "    ")
		data = append(safeJSON(data), '\n')
	} else {
		data, err = safeYAML(v)
	}
	if err != nil {
		return fmt.Errorf("encoding output: %w", err)
	}
	_, err = w.Write(data)
	return err
}

// redacted returns a copy of v with claim.Redact applied to every string it
// holds, through structs, pointers, slices, maps and interfaces, so that
// structured output redacts each field the same way, whichever field a
// credential reached. Unexported fields (a time's) are left as they are.
func redacted(v any) any {
	if v == nil {
		return nil
	}
	return redactValue(reflect.ValueOf(v)).Interface()
}

func redactValue(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.String:
		out := reflect.New(v.Type()).Elem()
		out.SetString(claim.Redact(v.String()))
		return out
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type().Elem())
		out.Elem().Set(redactValue(v.Elem()))
		return out
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type()).Elem()
		out.Set(redactValue(v.Elem()))
		return out
	case reflect.Struct:
		out := reflect.New(v.Type()).Elem()
		out.Set(v)
		for i := range v.NumField() {
			if out.Field(i).CanSet() {
				out.Field(i).Set(redactValue(v.Field(i)))
			}
		}
		return out
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			out.Index(i).Set(redactValue(v.Index(i)))
		}
		return out
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			out.SetMapIndex(redactValue(it.Key()), redactValue(it.Value()))
		}
		return out
	}
	return v
}
