package layout

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestName(t *testing.T) {
	tests := []struct {
		file   string
		want   string
		wantOK bool
	}{
		{file: "stepwise-plugin-vsphere", want: "vsphere", wantOK: true},
		{file: "stepwise-plugin-", want: ""},
		{file: "stepwise-plugin-vsphere.sigstore.json", want: "vsphere.sigstore.json"},
		{file: "SHA256SUMS", want: "SHA256SUMS"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, ok := Name(tt.file)
			assert.Equal(t, tt.wantOK, ok)
			if ok {
				assert.Equal(t, tt.want, got)
			}
		})
	}
	assert.Equal(t, "/p/stepwise-plugin-x.sigstore.json", SignaturePath("/p/"+Executable("x")))
}

func TestServingExecutor(t *testing.T) {
	for executor, want := range map[string]string{
		"acme.hello":     "stepwise-plugin-acme",
		"vsphere.vm.off": "stepwise-plugin-vsphere",
		"hello":          "",
		".hello":         "",
	} {
		assert.Equal(t, want, ServingExecutor(executor), executor)
	}
}
