package cli

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// readPipelineManifest reads the one Pipeline of a YAML or JSON file, or of stdin for "-".
// Unknown fields are refused, as kubectl's strict field validation would: a misspelt field
// would otherwise be planned as absent.
func readPipelineManifest(path string, stdin io.Reader) (*v1alpha1.Pipeline, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var docs [][]byte
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, fmt.Errorf("decode %s: %w", path, err)
		}
		if m != nil { // not an empty document, or comments only
			docs = append(docs, doc)
		}
	}
	if len(docs) != 1 {
		return nil, fmt.Errorf("%s holds %d objects: plan takes one Pipeline", path, len(docs))
	}
	var p v1alpha1.Pipeline
	if err := yaml.UnmarshalStrict(docs[0], &p); err != nil {
		return nil, fmt.Errorf("decode the Pipeline of %s: %w", path, err)
	}
	if gvk := p.GroupVersionKind(); gvk != v1alpha1.SchemeGroupVersion.WithKind("Pipeline") {
		return nil, fmt.Errorf("%s holds a %s %s, not a %s Pipeline", path, orDash(p.APIVersion), orDash(p.Kind), v1alpha1.SchemeGroupVersion)
	}
	return &p, nil
}
