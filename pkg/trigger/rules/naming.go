package rules

import (
	"crypto/sha256"
	"encoding/base32"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// hashLength is the length of the hashes names end with.
const hashLength = 5

// PipelineName is the name of the pipeline a trigger runs for an object:
// TRIGGER-OBJECT made a valid DNS-1123 subdomain (lower case; characters a subdomain has
// not become '-'; each dot-separated label starts and ends with a letter or digit), cut to
// leave room for a dash and a hash of the object's UID, which always ends it. The name is
// the same at every sync, so that a create is idempotent, and differs for a re-created
// object of the same name and for long names that share their beginning.
func PipelineName(trigger, object string, uid types.UID) string {
	base := subdomain(trigger + "-" + object)
	limit := validation.DNS1123SubdomainMaxLength - 1 - hashLength
	if len(base) > limit {
		base = strings.TrimRight(base[:limit], "-.")
	}
	return base + "-" + hash5(string(uid))
}

// subdomain turns s into a DNS-1123 subdomain, but for its length.
func subdomain(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		default:
			return '-'
		}
	}, s)
	var labels []string
	for _, l := range strings.Split(s, ".") {
		if l = strings.Trim(l, "-"); l != "" {
			labels = append(labels, l)
		}
	}
	return strings.Join(labels, ".")
}

// LabelValueOf is the value of LabelTrigger for a trigger's name.
func LabelValueOf(trigger string) string { return labelValue(trigger) }

// TaintValueOf names a trigger in its TaintWaiting taints: NAMESPACE.NAME, made a label
// value.
func TaintValueOf(trig *v1alpha1.PipelineTrigger) string {
	return labelValue(trig.Namespace + "." + trig.Name)
}

// labelValue makes s, a DNS-1123 subdomain or names of them joined by '.', a label value:
// only its length may need fixing, by cutting it and ending it with a dash and a hash of s.
func labelValue(s string) string {
	if len(s) <= validation.LabelValueMaxLength {
		return s
	}
	cut := strings.TrimRight(s[:validation.LabelValueMaxLength-1-hashLength], "-._")
	return cut + "-" + hash5(s)
}

// hash5 is a short hash of s: 5 characters of base32 (25 bits), lower case.
func hash5(s string) string {
	sum := sha256.Sum256([]byte(s))
	return strings.ToLower(base32.StdEncoding.EncodeToString(sum[:]))[:hashLength]
}

// ObjectKey names an object as AnnotationObject, a trigger's status.queue and its
// messages do: namespace/name, or name for a cluster-scoped object.
func ObjectKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
