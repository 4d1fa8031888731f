package pluginauthor

import (
	"go/format"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRenderPlugin(t *testing.T) {
	tests := []struct {
		name string
		pkg  string
		// want are texts each file must contain, by file name.
		want map[string][]string
	}{
		{name: "in a larger module", pkg: "./plugins/acme", want: map[string][]string{
			"main.go": {
				`func (hello) Name() string { return "acme.hello" }`,
				"// Command stepwise-plugin-acme ",
				"(README.md, Dockerfile)",
			},
			"main_test.go": {`c.Run(context.Background(), "acme.hello", sdk.HookCreate, req)`},
			"README.md": {
				"# stepwise-plugin-acme\n",
				"the plugin's entrypoint never runs",
				"\nCGO_ENABLED=0 go build -trimpath -o bin/stepwise-plugin-acme .\n",
				"\nkubectl stepwise plugin image bin/stepwise-plugin-acme --signing-key ~/.stepwise/stepwise-signing.key --tag REGISTRY/stepwise-plugin-acme:TAG -o stepwise-plugin-acme.tar\n",
				"\nskopeo copy oci-archive:stepwise-plugin-acme.tar docker://REGISTRY/stepwise-plugin-acme:TAG\n",
				"\nkubectl stepwise plugin verify bin/stepwise-plugin-acme --key ~/.stepwise/stepwise-signing.pub\n",
				"\ndocker build -f ./plugins/acme/Dockerfile -t REGISTRY/stepwise-plugin-acme:TAG .\n",
				"where\n`go.mod` is:",
				"```yaml\nplugins:\n- name: acme\n  image: REGISTRY/stepwise-plugin-acme@sha256:IMAGE_DIGEST\n  signature:\n    publicKey: |\n",
			},
			"Dockerfile": {
				"\nFROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build\n",
				"\nARG PKG=./plugins/acme\n",
				"CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \\\n    go build -trimpath -o /out/stepwise-plugin-acme \"${PKG}\"\n",
				"\nFROM scratch\nCOPY --from=build /out/stepwise-plugin-acme /stepwise-plugin-acme\nUSER 65532:65532\nENTRYPOINT [\"/stepwise-plugin-acme\"]\n",
				"#   docker build -f ./plugins/acme/Dockerfile -t REGISTRY/stepwise-plugin-acme:TAG .\n",
			},
		}},
		{name: "a module of its own", pkg: ".", want: map[string][]string{
			"README.md": {
				"\ndocker build -f ./Dockerfile -t REGISTRY/stepwise-plugin-acme:TAG .\n",
				"`go.mod` is (this directory):",
			},
			"Dockerfile": {"\nARG PKG=.\n"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files, err := renderPlugin("acme", tt.pkg)
			require.NoError(t, err)
			var names []string
			byName := map[string]string{}
			for _, f := range files {
				names = append(names, f.name)
				byName[f.name] = string(f.data)
				if filepath.Ext(f.name) == ".go" {
					formatted, err := format.Source(f.data)
					require.NoError(t, err)
					assert.Equal(t, string(formatted), string(f.data), "%s is gofmt'ed", f.name)
				}
				assert.NotContains(t, string(f.data), "{{", "%s: every template action done", f.name)
				assert.NotContains(t, string(f.data), "<no value>", f.name)
			}
			assert.Equal(t, []string{"main.go", "main_test.go", "README.md", "Dockerfile", ".gitignore"}, names)
			for file, texts := range tt.want {
				for _, text := range texts {
					assert.Contains(t, byName[file], text, file)
				}
			}
			for _, line := range strings.Split(byName["Dockerfile"], "\n") {
				if strings.HasPrefix(line, "ARG GO_VERSION=") {
					assert.NotEqual(t, "ARG GO_VERSION=", line)
				}
			}
		})
	}
}

func TestGoImageVersion(t *testing.T) {
	tests := []struct{ goVersion, want string }{
		{goVersion: "go1.26.8", want: "1.26"},
		{goVersion: "go1.27", want: "1.27"},
		{goVersion: "go1.27rc1", want: "1.27"},
		{goVersion: "go1.26.8 X:jsonv2", want: "1.26"},
		{goVersion: "devel go1.27-1a2b3c4 Mon Jan 1 00:00:00 2026 +0000", want: "latest"},
	}
	for _, tt := range tests {
		t.Run(tt.goVersion, func(t *testing.T) {
			assert.Equal(t, tt.want, goImageVersion(tt.goVersion))
		})
	}
}

func TestContextPackage(t *testing.T) {
	wd := t.TempDir()
	t.Chdir(wd)
	tests := []struct{ dir, want string }{
		{dir: filepath.Join("plugins", "acme"), want: "./plugins/acme"},
		{dir: "./acme/", want: "./acme"},
		{dir: ".", want: "."},
		{dir: filepath.Join(wd, "plugins", "acme"), want: "./plugins/acme"},
		{dir: wd, want: "."},
		{dir: filepath.Join("..", "acme"), want: "."},
		{dir: "..", want: "."},
		{dir: "..acme", want: "./..acme"},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			assert.Equal(t, tt.want, contextPackage(tt.dir))
		})
	}
}
