package contract

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckParams(t *testing.T) {
	typed := []Parameter{
		{Name: "node", Type: ParamString, Required: true},
		{Name: "timeout", Type: ParamDuration, Default: "10m"},
		{Name: "count", Type: ParamInt},
		{Name: "force", Type: ParamBool},
		{Name: "url", Type: ParamURL},
		{Name: "policy", Type: ParamEnum, Values: []string{"Fail", "Force"}, Default: "Fail"},
		{Name: "credentialsSecret", Type: ParamSecret},
	}
	tests := []struct {
		name    string
		decl    []Parameter
		params  map[string]string
		want    map[string]string
		wantErr string
	}{
		{name: "defaults filled", decl: typed, params: map[string]string{"node": "n1"},
			want: map[string]string{"node": "n1", "timeout": "10m", "policy": "Fail"}},
		{name: "every type", decl: typed, params: map[string]string{
			"node": "n1", "timeout": "90s", "count": "-3", "force": "true", "url": "https://example.com/x?y=1",
			"policy": "Force", "credentialsSecret": "creds",
		}, want: map[string]string{
			"node": "n1", "timeout": "90s", "count": "-3", "force": "true", "url": "https://example.com/x?y=1",
			"policy": "Force", "credentialsSecret": "creds",
		}},
		{name: "required missing", decl: typed, params: map[string]string{}, wantErr: `parameter "node" is required`},
		{name: "a required string set empty", decl: typed, params: map[string]string{"node": ""}, wantErr: `parameter "node" is required`},
		{name: "not a duration", decl: typed, params: map[string]string{"node": "n", "timeout": "5 minutes"},
			wantErr: `parameter "timeout" is "5 minutes", not a duration such as 90s or 10m`},
		{name: "not an int", decl: typed, params: map[string]string{"node": "n", "count": "3.5"},
			wantErr: `parameter "count" is "3.5", not a whole number`},
		{name: "not a bool", decl: typed, params: map[string]string{"node": "n", "force": "yes"},
			wantErr: `parameter "force" is "yes", not true or false`},
		{name: "not a URL, value not repeated", decl: typed, params: map[string]string{"node": "n", "url": "ftp://user:pw@host/"},
			wantErr: `parameter "url" is not an absolute http or https URL`},
		{name: "outside the enum", decl: typed, params: map[string]string{"node": "n", "policy": "Forse"},
			wantErr: `parameter "policy" is "Forse", not one of Fail, Force`},
		{name: "empty values of other types are not set", decl: typed,
			params: map[string]string{"node": "n", "timeout": "", "credentialsSecret": "", "policy": ""},
			want:   map[string]string{"node": "n", "timeout": "10m", "policy": "Fail"}},
		{name: "empty required non-string", decl: []Parameter{{Name: "count", Type: ParamInt, Required: true}},
			params: map[string]string{"count": ""}, wantErr: `parameter "count" is required`},
		{name: "undeclared, declarations complete", decl: typed, params: map[string]string{"node": "n", "timout": "5m"},
			wantErr: `parameter "timout" is not a parameter of the executor, which takes node, timeout, count, force, url, policy, credentialsSecret`},
		{name: "undeclared, legacy declarations", decl: []Parameter{{Name: "name", Required: true}, {Name: "x", Type: ParamInt}},
			params: map[string]string{"name": "a", "other": "b"}, want: map[string]string{"name": "a", "other": "b"}},
		{name: "no declarations", params: map[string]string{"a": "b"}, want: map[string]string{"a": "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CheckParams(tt.decl, tt.params)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Equal(t, tt.wantErr, err.Error())
				assert.True(t, IsPermanent(err))
				assert.Equal(t, ReasonInvalidParameter, OwnReason(err))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestCheckParamsDoesNotChangeItsInput(t *testing.T) {
	params := map[string]string{"a": "1"}
	got, err := CheckParams([]Parameter{{Name: "a", Type: ParamInt}, {Name: "b", Type: ParamInt, Default: "2"}}, params)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"a": "1", "b": "2"}, got)
	assert.Equal(t, map[string]string{"a": "1"}, params)
}

func TestRequestAccessors(t *testing.T) {
	req := &Request{
		Params: map[string]string{
			"s": "text", "n": "42", "b": "true", "d": "1m30s", "u": "https://example.com/p", "bad": "x",
		},
		SecretParams: map[string]map[string][]byte{"credentialsSecret": {"password": []byte("pw")}},
	}
	assert.Equal(t, "text", req.String("s"))
	assert.Equal(t, int64(42), req.Int("n"))
	assert.True(t, req.Bool("b"))
	assert.Equal(t, 90*time.Second, req.Duration("d"))
	require.NotNil(t, req.URL("u"))
	assert.Equal(t, "example.com", req.URL("u").Host)
	assert.Equal(t, map[string][]byte{"password": []byte("pw")}, req.Secret("credentialsSecret"))
	// Unchecked or unset: the zero value.
	assert.Zero(t, req.Int("bad"))
	assert.False(t, req.Bool("missing"))
	assert.Zero(t, req.Duration("bad"))
	assert.Nil(t, req.URL("bad"))
	assert.Nil(t, req.Secret("missing"))
}
