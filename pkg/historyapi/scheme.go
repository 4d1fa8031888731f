package historyapi

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/stepwise-dev/stepwise/pkg/apis/history"
	historyv1alpha1 "github.com/stepwise-dev/stepwise/pkg/apis/history/v1alpha1"
)

// newScheme returns the scheme the server decodes parameters and encodes objects with:
// the v1alpha1 types under their version and, as the same Go types, under the group's
// internal version. The generic server converts what storage returns from the internal
// version to the requested one; since the Go type is registered for that version too,
// the scheme only sets the kind and needs no conversion functions.
func newScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	if err := historyv1alpha1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("add %s to the scheme: %w", historyv1alpha1.SchemeGroupVersion, err)
	}
	internal := schema.GroupVersion{Group: history.GroupName, Version: runtime.APIVersionInternal}
	scheme.AddKnownTypes(internal, &historyv1alpha1.PipelineRecord{}, &historyv1alpha1.PipelineRecordList{})
	if err := scheme.SetVersionPriority(historyv1alpha1.SchemeGroupVersion); err != nil {
		return nil, fmt.Errorf("set the version priority of %s: %w", history.GroupName, err)
	}

	// The list handler passes every field selector through the scheme before storage
	// sees it; without this only metadata.name and metadata.namespace would get through.
	kind := historyv1alpha1.SchemeGroupVersion.WithKind("PipelineRecord")
	if err := scheme.AddFieldLabelConversionFunc(kind, convertFieldLabel); err != nil {
		return nil, fmt.Errorf("add the field selectors of %s: %w", kind, err)
	}

	// The generic server decodes the options of every request (ListOptions, GetOptions,
	// TableOptions...) as meta.k8s.io types of an empty group's v1, and answers with
	// Status and discovery documents, which are the same in every version.
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	unversioned := schema.GroupVersion{Group: "", Version: "v1"}
	scheme.AddUnversionedTypes(unversioned,
		&metav1.Status{},
		&metav1.APIVersions{},
		&metav1.APIGroupList{},
		&metav1.APIGroup{},
		&metav1.APIResourceList{},
	)
	return scheme, nil
}

// convertFieldLabel lets through the field selectors a list of records understands, as
// they are: storage translates them.
func convertFieldLabel(label, value string) (string, string, error) {
	if !fieldSupported(label) {
		return "", "", unsupportedFieldError(label)
	}
	return label, value, nil
}
